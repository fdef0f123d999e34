/* The host's side of the exec agent's directory and socket (agent-dir.h): the directory
 * session start makes in the session's runtime directory for init to bind its socket in, the
 * wait until init serves it, and the connection to that socket every exec opens. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "backends/docker/agent-dir.h"
#include "backends/docker/protocol.h"
#include "base/cleanup.h"
#include "base/fs.h"
#include "protocol/persist.h"
#include "protocol/rundir.h"

/* How long create waits for init to serve the exec agent. */
#define AGENT_READY_WAIT 5.0

/* The agent's directory: <session runtime dir>/agent (protocol/rundir.h), never in the project
 * tree, where another sandbox could reach it. Recomputed from the session's identity. */
static int agent_dir_path(const struct cordon_session *s, char **out, struct cordon_error **err) {
  return rundir_path(cordon_context_state_dir(s->ctx), s->id, DOCKER_AGENT_DIR, out, err);
}

/* The agent's directory, owned by the container's user (init binds its socket there) and
 * reachable by nobody else. *out is its real path, for the engine. */
int docker_make_agent_dir(struct cordon_session *s, uid_t uid, gid_t gid, char **out,
                          struct cordon_error **err) {
  _cleanup_free_ char *path = NULL;
  if (session_rundir(s, true, err) < 0 || agent_dir_path(s, &path, err) < 0)
    return -1;
  if (mkdir(path, 0700) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot create %s", path);
  _cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot open %s", path);
  if ((st.st_uid != uid || st.st_gid != gid) && fchown(fd, uid, gid) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno,
                            "cannot give %s to the container's user %u:%u", path, (unsigned)uid,
                            (unsigned)gid);
  char resolved[PATH_MAX];
  if (!realpath(path, resolved))
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "agent directory %s", path);
  *out = strdup(resolved);
  return *out ? 0 : cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "agent directory");
}

/* Connect to the agent's socket. The directory is writable from inside the container, so
 * nothing there is followed: the socket is opened O_PATH|O_NOFOLLOW beneath the directory,
 * must be a socket, and is connected to through its fd (a symlink planted there cannot send
 * us to a socket of the host). Returns the connected fd, or -1 with *errnum set. *peer_pid:
 * the pid that made the listening socket, as we see it (0 when not visible). */
int docker_agent_connect(const struct cordon_session *s, int *errnum, long *peer_pid) {
  _cleanup_free_ char *path = NULL;
  if (agent_dir_path(s, &path, NULL) < 0) {
    *errnum = ENOMEM;
    return -1;
  }
  _cleanup_close_ int dir = open(path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  _cleanup_close_ int node =
      dir < 0 ? -1 : openat(dir, DOCKER_AGENT_SOCKET, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  if (node < 0 || fstat(node, &st) < 0) {
    *errnum = errno;
    return -1;
  }
  if (!S_ISSOCK(st.st_mode)) {
    *errnum = ENOTSOCK;
    return -1;
  }
  _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *errnum = errno;
    return -1;
  }
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  snprintf(addr.sun_path, sizeof(addr.sun_path), "/proc/self/fd/%d", node);
  int r;
  do
    r = connect(fd, (struct sockaddr *)&addr, sizeof(addr));
  while (r < 0 && errno == EINTR);
  if (r < 0) {
    *errnum = errno;
    return -1;
  }
  struct ucred cred = {0};
  socklen_t length = sizeof(cred);
  *peer_pid = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &length) == 0 ? cred.pid : 0;
  return steal_fd(&fd);
}

/* After the container started: wait until init serves the agent (it binds its socket within
 * a millisecond or two of starting), so that every later exec, from any process, finds it;
 * and remember which pid serves it, so that a socket replaced from inside the container is
 * refused later. Nothing of the workload has run yet, so the first answer is init's. */
int docker_agent_wait_ready(struct cordon_session *s, const char *container, long *agent_pid,
                            struct cordon_error **err) {
  double until = fs_now() + AGENT_READY_WAIT;
  useconds_t nap = 200;
  for (;;) {
    int errnum = 0;
    int fd = docker_agent_connect(s, &errnum, agent_pid);
    if (fd >= 0) {
      close(fd); /* the agent takes a connection closed before a request as a probe */
      return 0;
    }
    if ((errnum != ENOENT && errnum != ECONNREFUSED) || fs_now() > until)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errnum,
                              "session %s: the exec agent of container %.12s did not start", s->id,
                              container);
    usleep(nap);
    if (nap < 10000)
      nap *= 2;
  }
}
