/* The host's side of the exec agent cordon-docker-init serves on a unix socket in the
 * session's runtime directory (agent.h): the agent's directory and the connection to its
 * socket, and an exec launcher for the shared runner (exec/runner.c). The runner makes the
 * pipes and owns capture, bounds and the timeout; this launcher hands the pipe ends to the
 * agent, whose per-exec monitor runs the command and kills its whole tree, and only it, when
 * it ends or is told to. Everything the agent sends back is parsed as hostile input. */
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

#include "backends/docker/agent.h"
#include "backends/docker/internal.h"
#include "backends/docker/protocol.h"
#include "base/cleanup.h"
#include "base/fs.h"
#include "exec/runner.h"
#include "protocol/persist.h"
#include "protocol/rundir.h"

/* How long create waits for init to serve the exec agent. */
#define AGENT_READY_WAIT 5.0
/* How long the agent may take to start a command (fork, exec) and to send its 16-byte final
 * reply once the connection says it is there. */
#define AGENT_START_TIMEOUT_MS 10000
#define AGENT_REPLY_TIMEOUT_MS 5000
/* After a timeout, how many of the runner's kill rounds (one a second) the agent gets to
 * report before the host hangs up on it. */
#define AGENT_KILL_PATIENCE 3

/* ---- the exec agent: its directory and socket ------------------------------------------ */

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
static int agent_socket_connect(const struct cordon_session *s, int *errnum, long *peer_pid) {
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
    int fd = agent_socket_connect(s, &errnum, agent_pid);
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

/* ---- exec through the agent ------------------------------------------------------------ */

struct agent_launch {
  struct cordon_session *s;
  struct docker_session *d;
  const char *cwd;
  int conn;
  int kill_rounds;      /* kill_tree calls so far */
  bool ended;           /* the final reply arrived (or the connection broke) */
  bool gave_up;         /* the agent did not report after a timeout: we hung up */
  bool agent_timed_out; /* the agent's own timeout fired first */
};

/* The engine's view of a container whose agent cannot be reached: gone, stopped, or running
 * (then the agent itself is the problem). */
static int agent_unreachable(struct cordon_session *s, struct docker_session *d, int errnum,
                             struct cordon_error **err) {
  long status = 0;
  _cleanup_json_ json_t *info = NULL;
  if (docker_inspect_container(d, &status, &info, err) < 0)
    return cordon_error_prefix(err, "session %s", s->id);
  json_t *state = json_object_get(info, "State");
  if (status == 404)
    return cordon_error_set(err, CORDON_ERR_NOT_FOUND, 0,
                            "session %s: its container %.12s no longer exists (removed outside "
                            "cordon?); destroy the session",
                            s->id, d->container);
  if (status == 200 && !json_is_true(json_object_get(state, "Running")))
    return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                            "session %s: its container %.12s is not running (stopped or killed "
                            "outside cordon?); destroy the session",
                            s->id, d->container);
  return cordon_error_set(
      err, CORDON_ERR_UNAVAILABLE, errnum,
      "session %s: cannot reach the exec agent of container %.12s in its runtime "
      "directory (CORDON_DOCKER_EXEC=api runs commands through the Engine API "
      "instead)",
      s->id, d->container);
}

/* The connection ended without a final reply: the container died, or the exec's monitor was
 * killed from inside it. */
static int agent_lost(struct cordon_session *s, struct docker_session *d,
                      struct cordon_error **err) {
  int errnum = 0;
  long peer = 0;
  int fd = agent_socket_connect(s, &errnum, &peer);
  if (fd >= 0) {
    close(fd); /* init still serves: the container runs, only this exec's monitor died */
    return cordon_error_set(err, CORDON_ERR_SYSTEM, 0,
                            "session %s: the exec's monitor in container %.12s ended without a "
                            "status (killed from inside the container?)",
                            s->id, d->container);
  }
  if (docker_container_gone_error(s, d, true, err) < 0)
    return -1;
  return cordon_error_set(err, CORDON_ERR_SYSTEM, errnum,
                          "session %s: the exec agent of container %.12s stopped answering", s->id,
                          d->container);
}

static int agent_start(void *data, const struct exec_spec *spec, const int stdio_fds[3],
                       int *exit_fd, struct cordon_error **err) {
  struct agent_launch *l = data;
  struct cordon_session *s = l->s;
  struct docker_session *d = l->d;
  _cleanup_free_ unsigned char *buf = NULL;
  size_t len = 0;
  static const char *const empty[] = {NULL};
  /* The agent keeps its own copy of the timeout, in case we cannot tell it (frozen, gone). */
  if (exec_wire_encode(&docker_agent_protocol, spec->cwd, spec->argv,
                       spec->envp ? spec->envp : empty, exec_wire_timeout_ms(spec->timeout), &buf,
                       &len, err) < 0)
    return -1;
  int errnum = 0;
  long peer = 0;
  l->conn = agent_socket_connect(s, &errnum, &peer);
  if (l->conn < 0)
    return agent_unreachable(s, d, errnum, err);
  if (d->agent_pid > 0 && peer > 0 && peer != d->agent_pid)
    return cordon_error_set(err, CORDON_ERR_DENIED, 0,
                            "session %s: the exec agent socket of container %.12s is served by "
                            "pid %ld, not by the container's init (pid %ld): it was replaced from "
                            "inside the container; refusing",
                            s->id, d->container, peer, d->agent_pid);
  if (exec_wire_send_with_fds(l->conn, buf, len, stdio_fds, EXEC_WIRE_STDIO_FDS) < 0) {
    l->ended = true;
    return agent_lost(s, d, err);
  }
  struct exec_wire_reply reply;
  int r =
      exec_wire_read_reply(l->conn, &docker_agent_protocol, AGENT_START_TIMEOUT_MS, &reply, err);
  if (r <= 0) {
    l->ended = true;
    return r < 0 ? cordon_error_prefix(err, "session %s", s->id) : agent_lost(s, d, err);
  }
  if (reply.type == EXEC_WIRE_FAILED) {
    l->ended = true;
    if (reply.a == EXEC_WIRE_STAGE_CHDIR)
      return cordon_error_set(err, CORDON_ERR_NOT_FOUND, reply.b, "cannot run %s in %s",
                              spec->argv[0], spec->cwd);
    if (reply.a == EXEC_WIRE_STAGE_NO_SECCOMP)
      return cordon_error_set(err, CORDON_ERR_DENIED, 0,
                              "session %s: the Docker engine runs the container without a seccomp "
                              "profile (is the daemon started with seccomp unconfined?); refusing "
                              "to run without it",
                              s->id);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, reply.b,
                            "session %s: the exec agent could not set up %s", s->id, spec->argv[0]);
  }
  if (reply.type != EXEC_WIRE_RUNNING) {
    l->ended = true;
    return cordon_error_set(err, CORDON_ERR_SYSTEM, EPROTO,
                            "session %s: the exec agent answered '%c' before the command ran",
                            s->id, (char)reply.type);
  }
  /* The runner closes its exit fd when it fires: give it a copy, keep ours for the reply. */
  *exit_fd = fcntl(l->conn, F_DUPFD_CLOEXEC, 3);
  if (*exit_fd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "dup");
  return 0;
}

static int agent_reap(void *data, int *exit_code, int *term_signal, struct cordon_error **err) {
  struct agent_launch *l = data;
  struct exec_wire_reply reply;
  struct cordon_error *local = NULL;
  int r =
      exec_wire_read_reply(l->conn, &docker_agent_protocol, AGENT_REPLY_TIMEOUT_MS, &reply, &local);
  l->ended = true;
  if (r == 0 && l->gave_up) {
    /* We hung up on an agent that did not report after the timeout; it kills the tree when
     * it sees that. The runner reports the timeout. */
    *exit_code = 128 + 9;
    *term_signal = 9;
    return 0;
  }
  if (r < 0) {
    if (!err) {
      cordon_error_free(local);
      return -1;
    }
    *err = local;
    return cordon_error_prefix(err, "session %s", l->s->id);
  }
  if (r == 0)
    return err ? agent_lost(l->s, l->d, err) : -1;
  if (reply.type == EXEC_WIRE_TIMED_OUT) {
    l->agent_timed_out = true;
    *exit_code = 128 + 9;
    *term_signal = 9;
    return 0;
  }
  if (reply.type != EXEC_WIRE_EXITED)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, EPROTO,
                            "session %s: the exec agent answered '%c' instead of a status",
                            l->s->id, (char)reply.type);
  *exit_code = reply.a;
  *term_signal = reply.b;
  return 0;
}

static void agent_kill_tree(void *data) {
  struct agent_launch *l = data;
  if (l->conn < 0 || l->ended)
    return; /* after the status, the agent has already removed the tree */
  if (l->kill_rounds++ == 0) {
    exec_wire_send_kill(l->conn);
  } else if (l->kill_rounds > AGENT_KILL_PATIENCE && !l->gave_up) {
    /* The agent does not answer (stopped, frozen): hang up, which ends the runner's wait and
     * tells the agent, should it wake, to kill the tree. */
    l->gave_up = true;
    shutdown(l->conn, SHUT_RDWR);
  }
}

static void agent_cleanup(void *data) {
  struct agent_launch *l = data;
  if (l->conn >= 0)
    close(l->conn); /* the agent kills whatever is left when we hang up */
  l->conn = -1;
}

int docker_exec_agent(struct cordon_session *s, struct docker_session *d,
                      const struct cordon_exec_request *req, struct cordon_exec_result *res,
                      struct cordon_error **err) {
  _cleanup_free_ char *cwd = NULL;
  if (docker_container_cwd(s, req->cwd, &cwd, err) < 0)
    return -1;
  struct exec_spec spec = exec_spec_from_request(req, cwd);
  struct agent_launch l = {.s = s, .d = d, .cwd = cwd, .conn = -1};
  const struct exec_launcher launcher = {
      .data = &l,
      .start = agent_start,
      .reap = agent_reap,
      .kill_tree = agent_kill_tree,
      .cleanup = agent_cleanup,
  };
  if (exec_run_with(&spec, &launcher, res, err) < 0)
    return -1;
  if (l.agent_timed_out)
    res->timed_out = true;
  return 0;
}
