/* The `docker` backend: each session is a long-running container of the Docker engine, driven
 * over the Engine API on its unix socket (engine.c), never through the docker CLI.
 *
 * The container's pid 1 is cordon-docker-init (init.c, bind-mounted read-only), which reaps
 * orphans. The workspace is a host directory bind-mounted at the manifest root, so read,
 * write and ls work on the host side, anchored beneath it (protocol/workspace.c). The path
 * policy becomes mounts: read-only paths are re-bound read-only, hidden directories are
 * covered by an empty read-only tmpfs, hidden files by an empty read-only file, `.cordon/` is
 * always hidden. Network: NetworkMode none unless egress open is asked for. All capabilities
 * dropped, no new privileges, Docker's default seccomp profile with cordon's denials stacked
 * on top by the exec wrapper, memory/CPU/pids limits through the engine's cgroups.
 *
 * Execs go through the exec agent that init serves on a unix socket in the session's state
 * directory (agent.h): the shared runner (exec/runner.c) makes the pipes and owns capture,
 * bounds and the timeout, and this file's launcher hands the pipe ends to the agent, whose
 * per-exec monitor runs the command and kills its whole tree, and only it, when it ends or is
 * told to. Everything the agent sends back is parsed as hostile input. With
 * CORDON_DOCKER_EXEC=api (or a container without an agent) an exec goes through the engine's
 * exec API instead and runs under the init's exec wrapper, which gives it the same semantics
 * (exact environment, 126/127, a timeout that kills the exec's whole tree and only it, a
 * status trailer telling signals and timeouts apart); the exit code then comes from exec
 * inspect. Containers carry labels (session, project, ephemeral, creator) so that
 * `cordon gc` can find the ones a crash left behind. */
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cordon/cas.h>
#include <cordon/session.h>
#include <cordon/snapshot.h>

#include "backends/builtin.h"
#include "protocol/workspace.h"
#include "protocol/persist.h"
#include "protocol/rundir.h"
#include "backends/docker/agent.h"
#include "backends/docker/config.h"
#include "backends/docker/docker-paths.h"
#include "backends/docker/docker.h"
#include "backends/docker/engine.h"
#include "backends/docker/protocol.h"
#include "backends/docker/stream.h"
#include "base/cleanup.h"
#include "base/fs.h"
#include "base/proc.h"
#include "base/strv.h"
#include "confine/policy.h"
#include "confine/private.h"
#include "confine/resolve.h"
#include "exec/runner.h"

/* After an exec's own timeout, how long the host waits for the wrapper to report before it
 * kills the exec's tree itself (the wrapper is normally done within milliseconds). */
#define HOST_TIMEOUT_GRACE 2.0
/* How long we keep reading after the fallback kill, and how long exec inspect may keep saying
 * "running" after the stream ended (the engine records the exit asynchronously). */
#define DRAIN_AFTER_KILL 3.0
#define INSPECT_SETTLE 5.0
#define EMPTY_FILE "docker-empty"
/* Who commands of a session resumed from a snapshot run as when cordon (root) owns its
 * workspace: never root. $CORDON_DOCKER_UID overrides (a number, not 0). */
#define SANDBOX_UID 65534u
/* How long create waits for init to serve the exec agent. */
#define AGENT_READY_WAIT 5.0
/* How long the agent may take to start a command (fork, exec) and to send its 16-byte final
 * reply once the connection says it is there. */
#define AGENT_START_TIMEOUT_MS 10000
#define AGENT_REPLY_TIMEOUT_MS 5000
/* After a timeout, how many of the runner's kill rounds (one a second) the agent gets to
 * report before the host hangs up on it. */
#define AGENT_KILL_PATIENCE 3

struct docker_session {
  struct docker_engine *engine;
  char *container;
  bool agent;     /* the container serves the exec agent (made by a cordon that has one) */
  long agent_pid; /* init's pid as SO_PEERCRED showed it at create; 0: unknown */
};

static void docker_session_free(struct docker_session *d) {
  if (!d)
    return;
  docker_engine_free(d->engine);
  free(d->container);
  free(d);
}

static void cleanup_engine(struct docker_engine **e) {
  docker_engine_free(*e);
}
static void cleanup_json(json_t **j) {
  json_decref(*j);
}
#define _cleanup_engine_ _cleanup_(cleanup_engine)
#define _cleanup_json_ _cleanup_(cleanup_json)

/* ---- configuration from the environment ------------------------------------------------- */

static const char *default_image(void) {
  const char *image = getenv("CORDON_DOCKER_IMAGE");
  return image && *image ? image : DOCKER_DEFAULT_IMAGE;
}

/* Image references go into URL paths: accept the characters a reference may hold and nothing
 * that could change the request (?, #, %, spaces). */
static int check_image_name(const char *image, struct cordon_error **err) {
  size_t n = strlen(image);
  if (n == 0 || n > 255)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "image name '%s' is empty or too long",
                            image);
  for (size_t i = 0; i < n; i++) {
    char c = image[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
          strchr("._-/:@", c)))
      return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                              "image name '%s' holds a character not allowed in image references",
                              image);
  }
  return 0;
}

/* The init binary to bind-mount: $CORDON_DOCKER_INIT, else the installed one, else the one in
 * the build tree (for tests and benchmarks run from a build directory). */
static const char *init_binary(void) {
  const char *env = getenv("CORDON_DOCKER_INIT");
  if (env && *env)
    return env;
  if (access(CORDON_DOCKER_INIT_INSTALLED, X_OK) == 0)
    return CORDON_DOCKER_INIT_INSTALLED;
  if (access(CORDON_DOCKER_INIT_BUILD, X_OK) == 0)
    return CORDON_DOCKER_INIT_BUILD;
  return NULL;
}

static int init_binary_checked(const char **out, struct cordon_error **err) {
  const char *path = init_binary();
  if (!path)
    return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0,
                            "cordon-docker-init not found (looked for %s; set CORDON_DOCKER_INIT)",
                            CORDON_DOCKER_INIT_INSTALLED);
  if (path[0] != '/' || access(path, X_OK) < 0)
    return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, errno ? errno : EINVAL,
                            "cordon-docker-init %s is not an executable absolute path", path);
  *out = path;
  return 0;
}

/* ---- availability --------------------------------------------------------------------------- */

static int image_present(struct docker_engine *e, const char *image, struct cordon_error **err) {
  if (check_image_name(image, err) < 0)
    return -1;
  _cleanup_free_ char *path = NULL;
  if (asprintf(&path, "/images/%s/json", image) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "image");
  long status = 0;
  if (docker_engine_request(e, "GET", path, NULL, &status, NULL, err) < 0)
    return -1;
  if (status == 404)
    return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0,
                            "image %s is not present in the Docker engine at %s (cordon does not "
                            "pull images: build, pull or import it, e.g. scripts/docker-up; "
                            "CORDON_DOCKER_IMAGE or --image choose another)",
                            image, docker_engine_socket(e));
  if (status != 200)
    return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0,
                            "the Docker engine at %s answered HTTP %ld for image %s",
                            docker_engine_socket(e), status, image);
  return 0;
}

static int docker_available(const struct cordon_backend *self, char **reason) {
  struct cordon_error *err = NULL;
  _cleanup_engine_ struct docker_engine *e = NULL;
  const char *init = NULL;
  if (init_binary_checked(&init, &err) < 0 || docker_engine_open(NULL, &e, &err) < 0 ||
      docker_engine_ping(e, &err) < 0 || image_present(e, default_image(), &err) < 0) {
    *reason = strdup(err && err->message ? err->message : "unavailable");
    cordon_error_free(err);
    return 0;
  }
  return 1;
}

/* ---- session state ------------------------------------------------------------------------ */

static int save_backend_state(struct cordon_session *s, const char *container, const char *socket,
                              const char *image, bool owned, const char *snapshot_id,
                              long agent_pid, struct cordon_error **err) {
  json_t *o =
      json_pack("{s:s, s:s, s:s, s:b, s:b, s:I}", "container", container, "socket", socket, "image",
                image, "owned_workspace", owned, "agent", 1, "agent_pid", (json_int_t)agent_pid);
  /* Also what keeps the snapshot from `cas gc` while the session lives. */
  if (o && snapshot_id)
    json_object_set_new(o, "from_snapshot", json_string(snapshot_id));
  free(s->backend_state);
  s->backend_state = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
  json_decref(o);
  return s->backend_state ? 0 : cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "state");
}

/* Container id, socket and agent from the persisted state (a state without "agent" is a
 * container made before the agent existed: its execs go through the exec API). */
static int load_backend_state(struct cordon_session *s, char **container, char **socket,
                              bool *agent, long *agent_pid, struct cordon_error **err) {
  _cleanup_json_ json_t *o = s->backend_state ? json_loads(s->backend_state, 0, NULL) : NULL;
  *agent = json_is_true(json_object_get(o, "agent"));
  json_t *pid = json_object_get(o, "agent_pid");
  *agent_pid =
      json_is_integer(pid) && json_integer_value(pid) > 0 && json_integer_value(pid) <= INT32_MAX
          ? (long)json_integer_value(pid)
          : 0;
  const char *c = json_string_value(json_object_get(o, "container"));
  const char *k = json_string_value(json_object_get(o, "socket"));
  if (!c || !k || !*c || !*k)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                            "session %s: the docker backend state names no container", s->id);
  *container = strdup(c);
  *socket = strdup(k);
  if (!*container || !*socket) {
    free(*container);
    free(*socket);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "state");
  }
  return 0;
}

/* The state file sits in the project tree, where a sandbox may reach it: what it says about
 * the engine, the container and the agent's pid is also kept in the session's runtime
 * directory ("<container>\n<engine socket>\n<agent pid>\n", 0600), and a state that differs
 * from that record is refused. */
#define PRIVATE_RECORD "docker"

static char *private_record(const char *container, const char *socket, long agent_pid) {
  char *text = NULL;
  return asprintf(&text, "%s\n%s\n%ld\n", container, socket, agent_pid) < 0 ? NULL : text;
}

static int write_private_record(struct cordon_session *s, const char *container, const char *socket,
                                long agent_pid, struct cordon_error **err) {
  _cleanup_free_ char *text = private_record(container, socket, agent_pid);
  if (!text)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "state");
  int fd = session_rundir(s, true, err);
  if (fd < 0 || rundir_write_private(fd, PRIVATE_RECORD, text, strlen(text), err) < 0)
    return cordon_error_prefix(err, "session %s", s->id);
  return 0;
}

static int check_private_record(struct cordon_session *s, const char *container, const char *socket,
                                long agent_pid, struct cordon_error **err) {
  _cleanup_free_ char *expected = private_record(container, socket, agent_pid);
  if (!expected)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "state");
  struct cordon_error *open_err = NULL;
  int fd = session_rundir(s, false, &open_err);
  _cleanup_free_ unsigned char *text = NULL;
  size_t len = 0;
  if (fd >= 0 && rundir_read_private(fd, PRIVATE_RECORD, 4096, &text, &len, &open_err) == 0) {
    if (len == strlen(expected) && memcmp(text, expected, len) == 0)
      return 0;
    return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                            "session %s: its docker state differs from the session's private "
                            "record (state tampered with): refusing to act on it",
                            s->id);
  }
  bool missing = open_err && open_err->kind == CORDON_ERR_NOT_FOUND;
  if (!missing) {
    if (err && !*err)
      *err = open_err;
    else
      cordon_error_free(open_err);
    return -1;
  }
  cordon_error_free(open_err);
  /* No record (the runtime directory went with a reboot): no agent socket either, and the
   * engine must be the one this process would use anyway. */
  _cleanup_free_ char *engine = NULL;
  if (docker_host_socket(getenv("DOCKER_HOST"), &engine, err) < 0)
    return -1;
  if (strcmp(engine, socket) != 0)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                            "session %s: its state names the Docker engine %s, not %s, and the "
                            "session's private record is gone: refused",
                            s->id, socket, engine);
  return 0;
}

/* ---- create --------------------------------------------------------------------------------- */

/* "BOOTID:PID:STARTTIME" of a process, so that gc can tell whether it still runs; NULL when it
 * does not. */
static char *creator_identity(pid_t pid) {
  char boot[64];
  fs_boot_id(boot, sizeof(boot));
  unsigned long long start = proc_start_time(pid);
  char *out = NULL;
  if (!start || asprintf(&out, "%s:%d:%llu", boot, (int)pid, start) < 0)
    return NULL;
  return out;
}

static int engine_features(struct docker_engine *e, struct docker_engine_features *f,
                           struct cordon_error **err) {
  _cleanup_json_ json_t *info = NULL;
  if (docker_engine_call(e, "GET", "/info", NULL, &info, err) < 0)
    return -1;
  f->memory_limit = json_is_true(json_object_get(info, "MemoryLimit"));
  f->swap_limit = json_is_true(json_object_get(info, "SwapLimit"));
  f->cpu_cfs_quota = json_is_true(json_object_get(info, "CpuCfsQuota"));
  f->pids_limit = json_is_true(json_object_get(info, "PidsLimit"));
  size_t i;
  json_t *opt;
  json_array_foreach(json_object_get(info, "SecurityOptions"), i, opt) {
    const char *v = json_string_value(opt);
    if (v && !strncmp(v, "name=seccomp", 12))
      f->seccomp = true;
  }
  return 0;
}

/* The workspace: the given directory, or a fresh one in the session's state directory (empty,
 * or restored from a snapshot, every blob verified); then the manifest's files on top. */
static int prepare_workspace(struct cordon_session *s, const struct cordon_manifest *m,
                             const char *snapshot_id, const char *const *private_dirs, bool *owned,
                             struct cordon_error **err) {
  char resolved[PATH_MAX];
  *owned = !m->workspace;
  if (snapshot_id && m->workspace)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                            "a session resumed from a snapshot gets a fresh workspace; a "
                            "workspace cannot be given too");
  if (m->workspace) {
    struct stat st;
    if (!realpath(m->workspace, resolved) || stat(resolved, &st) < 0)
      return cordon_error_set(err, CORDON_ERR_NOT_FOUND, errno, "workspace %s", m->workspace);
    if (!S_ISDIR(st.st_mode))
      return cordon_error_set(err, CORDON_ERR_USAGE, ENOTDIR, "workspace %s", m->workspace);
    if (confine_check_not_private(resolved, "workspace", private_dirs, err) < 0)
      return -1;
    s->workspace = strdup(resolved);
  } else {
    _cleanup_free_ char *dir = NULL;
    if (asprintf(&dir, "%s/workspace", s->state_dir) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "workspace");
    if (snapshot_id) {
      if (workspace_restore(s, snapshot_id, dir, err) < 0)
        return -1;
    } else if (mkdir(dir, 0755) < 0 || chmod(dir, 0755) < 0) { /* not umask's */
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot create %s", dir);
    }
    /* The engine mounts real paths: resolve any symlink in the project's own path. */
    if (!realpath(dir, resolved))
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "workspace %s", dir);
    s->workspace = strdup(resolved);
  }
  if (!s->workspace)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "workspace");
  return workspace_write_manifest_files(s->workspace, m, err);
}

static uid_t sandbox_uid(void) {
  const char *v = getenv("CORDON_DOCKER_UID");
  char *end = NULL;
  unsigned long n = v && *v ? strtoul(v, &end, 10) : 0;
  return n > 0 && n < 0xffffffffUL && end && !*end ? (uid_t)n : (uid_t)SANDBOX_UID;
}

/* Chown the directory dirfd and everything below it to uid:uid, anchored at dirfd: no link is
 * followed, no other file system entered. Returns 0 or an errno value. */
static int chown_tree(int dirfd, dev_t dev, uid_t uid, unsigned depth) {
  if (depth > 4096)
    return ELOOP;
  if (fchown(dirfd, uid, uid) < 0)
    return errno;
  int fd = dup(dirfd);
  DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
  if (!d) {
    int e = errno;
    if (fd >= 0)
      close(fd);
    return e;
  }
  int r = 0;
  struct dirent *de;
  while (r == 0 && (errno = 0, de = readdir(d))) {
    const char *n = de->d_name;
    if (n[0] == '.' && (!n[1] || (n[1] == '.' && !n[2])))
      continue;
    struct stat st;
    if (fstatat(dirfd, n, &st, AT_SYMLINK_NOFOLLOW) < 0) {
      r = errno;
    } else if (S_ISDIR(st.st_mode)) {
      if (st.st_dev != dev)
        continue;
      int sub = openat(dirfd, n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      r = sub < 0 ? errno : chown_tree(sub, dev, uid, depth + 1);
      if (sub >= 0)
        close(sub);
    } else if (fchownat(dirfd, n, uid, uid, AT_SYMLINK_NOFOLLOW) < 0) {
      r = errno;
    }
  }
  if (r == 0 && errno)
    r = errno;
  closedir(d);
  return r;
}

/* Give a workspace cordon restored (nothing has run in it yet, and cordon owns it) to the
 * sandbox's user. */
static int give_workspace(const char *dir, uid_t uid, struct cordon_error **err) {
  _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  int r = fd < 0 || fstat(fd, &st) < 0 ? errno : chown_tree(fd, st.st_dev, uid, 0);
  if (r)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, r,
                            "cannot give the workspace %s to the sandbox's user %u", dir,
                            (unsigned)uid);
  return 0;
}

/* An empty file owned by us, mounted read-only over hidden files. */
static int make_empty_file(struct cordon_session *s, char **out, struct cordon_error **err) {
  if (asprintf(out, "%s/%s", s->state_dir, EMPTY_FILE) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "empty file");
  int fd = open(*out, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0444);
  if (fd < 0 && errno != EEXIST)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot create %s", *out);
  if (fd >= 0)
    close(fd);
  return 0;
}

/* ---- the exec agent: its directory and socket ------------------------------------------ */

/* The agent's directory: <session runtime dir>/agent (protocol/rundir.h), never in the project
 * tree, where another sandbox could reach it. Recomputed from the session's identity. */
static int agent_dir_path(const struct cordon_session *s, char **out, struct cordon_error **err) {
  return rundir_path(cordon_context_state_dir(s->ctx), s->id, DOCKER_AGENT_DIR, out, err);
}

/* The agent's directory, owned by the container's user (init binds its socket there) and
 * reachable by nobody else. *out is its real path, for the engine. */
static int make_agent_dir(struct cordon_session *s, uid_t uid, gid_t gid, char **out,
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
static int agent_wait_ready(struct cordon_session *s, const char *container, long *agent_pid,
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

/* Remove a container we made, on a failure path: best effort, errors are not the news. */
static void remove_container(struct docker_engine *e, const char *id) {
  _cleanup_free_ char *path = NULL;
  if (asprintf(&path, "/containers/%s?force=true&v=true", id) < 0)
    return;
  long status = 0;
  struct cordon_error *ignored = NULL;
  docker_engine_request(e, "DELETE", path, NULL, &status, NULL, &ignored);
  cordon_error_free(ignored);
}

/* The always-hidden set inside a grant (and a .cordon/ at its top): container paths to cover
 * with an empty tmpfs, added to *hidden once each. */
static int hide_in_grant(const struct confine_path *grant, const char *const *private_dirs,
                         char ***hidden, struct cordon_error **err) {
  char **beneath = NULL;
  int r = confine_private_beneath(private_dirs, grant->source, true, &beneath, err);
  for (size_t i = 0; r == 0 && beneath && beneath[i]; i++) {
    char *target = NULL;
    bool seen = false;
    if (asprintf(&target, "%s/%s", grant->path, beneath[i]) < 0) {
      r = cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "policy");
      break;
    }
    for (size_t j = 0; *hidden && (*hidden)[j]; j++)
      seen |= strcmp((*hidden)[j], target) == 0;
    if (seen)
      free(target);
    else if (strv_push_take(hidden, target) < 0)
      r = cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "policy");
  }
  strv_free(beneath);
  return r;
}

/* Host paths granted read-only, checked by the ns backend's rules and resolved to the real
 * paths the engine will bind (at their own path inside the container). */
static int resolve_grants(const char *const *allow_ro, const char *root,
                          const char *const *private_dirs, struct confine_path **out, size_t *count,
                          char ***hidden, struct cordon_error **err) {
  size_t n = strv_length(allow_ro);
  *count = 0;
  *out = calloc(n + 1, sizeof(**out));
  char **norm = calloc(n + 1, sizeof(char *));
  int r = *out && norm ? 0 : cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "policy");
  for (size_t i = 0; i < n && r == 0; i++)
    r = confine_normalize_host_path(allow_ro[i], "read-only grant", &norm[i], err);
  if (r == 0)
    r = confine_check_host_lists(NULL, (const char *const *)norm, root, err);
  for (size_t i = 0; i < n && r == 0; i++) {
    r = confine_resolve_host_path(norm[i], false, false, "read-only grant", &(*out)[i], NULL, err);
    *count = i + 1;
    if (r == 0)
      r = confine_check_not_private((*out)[i].source, "read-only grant", private_dirs, err);
    if (r == 0 && (*out)[i].kind == CONFINE_KIND_DIR)
      r = hide_in_grant(&(*out)[i], private_dirs, hidden, err);
  }
  strv_free(norm);
  return r;
}

/* create and resume: the workspace, then the container. */
static int start_session(struct cordon_session *s, const struct cordon_manifest *m,
                         const char *snapshot_id, struct cordon_error **err) {
  const struct cordon_policy *p = &m->policy;
  if (m->repo)
    return cordon_error_set(err, CORDON_ERR_UNSUPPORTED, 0,
                            "git repository workspaces are not supported by the docker backend "
                            "yet; give a --workspace directory");
  const char *network = NULL;
  if (docker_network_mode(p->egress, getenv("CORDON_DOCKER_NETWORK"), &network, err) < 0)
    return -1;
  const char *image = m->image && *m->image ? m->image : default_image();
  const char *init = NULL;
  if (check_image_name(image, err) < 0 || init_binary_checked(&init, err) < 0)
    return -1;

  if (confine_check_sandbox_root(s->root, NULL, err) < 0 ||
      confine_check_limits(&p->limits, err) < 0)
    return -1;
  bool owned = false;
  _cleanup_(strv_freep) char **private_dirs = NULL, **hidden_grant_dirs = NULL;
  if (confine_private_set(cordon_context_state_dir(s->ctx), &private_dirs, err) < 0 ||
      prepare_workspace(s, m, snapshot_id, (const char *const *)private_dirs, &owned, err) < 0)
    return -1;
  struct docker_paths paths;
  if (docker_paths_resolve(s->workspace, p->read_only, p->hidden, (const char *const *)private_dirs,
                           &paths, err) < 0)
    return -1;
  int r = -1;
  struct confine_path *grants = NULL;
  size_t n_grants = 0;
  _cleanup_engine_ struct docker_engine *e = NULL;
  _cleanup_free_ char *empty = NULL, *creator = NULL, *user = NULL, *name = NULL, *start = NULL,
                      *agent_dir = NULL;
  long agent_pid = 0;
  _cleanup_json_ json_t *config = NULL, *created = NULL;
  struct docker_engine_features features = {0};
  const struct cordon_limits *l = &p->limits;
  bool limited = l->memory_bytes || l->pids || l->cpus > 0;
  struct stat ws;
  if (resolve_grants(p->allow_ro, s->root, (const char *const *)private_dirs, &grants, &n_grants,
                     &hidden_grant_dirs, err) < 0 ||
      docker_engine_open(NULL, &e, err) < 0 || make_empty_file(s, &empty, err) < 0)
    goto out;
  /* /info costs ~25 ms: ask only when there are limits to check. */
  if (limited && engine_features(e, &features, err) < 0)
    goto out;
  /* A session resumed from a snapshot (race candidates and judges) never runs as root: its
   * fresh workspace goes to an unprivileged user, its root file system is read-only and /tmp
   * is its own tmpfs, so a command cannot replace a tool a later command (a judge) uses. */
  bool resumed = snapshot_id != NULL && owned;
  if (resumed && geteuid() == 0 && give_workspace(s->workspace, sandbox_uid(), err) < 0)
    goto out;
  if (stat(s->workspace, &ws) < 0) {
    cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "workspace %s", s->workspace);
    goto out;
  }
  if (make_agent_dir(s, ws.st_uid, ws.st_gid, &agent_dir, err) < 0)
    goto out;
  /* Commands run as the workspace's owner: files they create belong to whoever owns it. */
  if (asprintf(&user, "%u:%u", (unsigned)ws.st_uid, (unsigned)ws.st_gid) < 0 ||
      asprintf(&name, "/containers/create?name=cordon-%s", s->id) < 0) {
    cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "container");
    goto out;
  }
  creator = creator_identity(getpid());
  struct docker_container_spec spec = {
      .image = image,
      .session_id = s->id,
      .project_state_dir = cordon_context_state_dir(s->ctx),
      .creator = creator,
      .ephemeral = m->ephemeral,
      .workspace = s->workspace,
      .root = s->root,
      .init_path = init,
      .agent_dir = agent_dir,
      .empty_file = empty,
      .user = user,
      .network = network,
      .allow_ro = grants,
      .n_allow_ro = n_grants,
      .hidden_grant_dirs = (const char *const *)hidden_grant_dirs,
      .paths = &paths,
      .limits = l,
      .features = &features,
      .read_only_root = resumed,
  };
  if (docker_container_config(&spec, &config, err) < 0)
    goto out;
  long status = 0;
  if (docker_engine_request(e, "POST", name, config, &status, &created, err) < 0) {
    /* The engine may have made it before the connection broke: remove it by its name. */
    remove_container(e, name + strlen("/containers/create?name="));
    goto out;
  }
  if (status == 404) {
    cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0,
                     "image %s is not present in the Docker engine at %s (cordon does not pull "
                     "images: build, pull or import it first)",
                     image, docker_engine_socket(e));
    goto out;
  }
  const char *id = json_string_value(json_object_get(created, "Id"));
  if (status != 201 || !id) {
    const char *msg = json_string_value(json_object_get(created, "message"));
    cordon_error_set(err, CORDON_ERR_SYSTEM, 0,
                     "Docker engine refused the container (HTTP %ld): %s", status,
                     msg ? msg : "no message");
    goto out;
  }
  if (asprintf(&start, "/containers/%s/start", id) < 0) {
    cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "container");
    remove_container(e, id);
    goto out;
  }
  /* Whatever fails from here on, the container must not outlive the attempt. */
  if (docker_engine_call(e, "POST", start, NULL, NULL, err) < 0 ||
      agent_wait_ready(s, id, &agent_pid, err) < 0 ||
      write_private_record(s, id, docker_engine_socket(e), agent_pid, err) < 0 ||
      save_backend_state(s, id, docker_engine_socket(e), image, owned, snapshot_id, agent_pid,
                         err) < 0) {
    remove_container(e, id);
    goto out;
  }
  struct docker_session *d = calloc(1, sizeof(*d));
  if (!d || !(d->container = strdup(id))) {
    free(d);
    remove_container(e, id);
    cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "session");
    goto out;
  }
  d->engine = steal_ptr(&e);
  d->agent = true;
  d->agent_pid = agent_pid;
  s->impl = d;
  r = 0;
out:
  confine_paths_free(grants, n_grants);
  docker_paths_clear(&paths);
  return r;
}

static int docker_create(struct cordon_session *s, const struct cordon_manifest *m,
                         struct cordon_error **err) {
  return start_session(s, m, NULL, err);
}

static int docker_resume(struct cordon_session *s, const struct cordon_manifest *m,
                         const char *snapshot_id, struct cordon_error **err) {
  return start_session(s, m, snapshot_id, err);
}

/* The workspace as it is now, into the project's store. The container keeps running: a command
 * writing meanwhile may or may not make it in, as with any live tree. */
static int docker_snapshot(struct cordon_session *s, char **snapshot_id,
                           struct cordon_error **err) {
  return workspace_snapshot(s, NULL, snapshot_id, err);
}

static int docker_attach(struct cordon_session *s, struct cordon_error **err) {
  _cleanup_free_ char *container = NULL, *socket = NULL;
  bool agent = false;
  long agent_pid = 0;
  if (load_backend_state(s, &container, &socket, &agent, &agent_pid, err) < 0 ||
      check_private_record(s, container, socket, agent_pid, err) < 0)
    return -1;
  struct docker_session *d = calloc(1, sizeof(*d));
  if (!d)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "session");
  d->agent = agent;
  d->agent_pid = agent_pid;
  /* No request here: a stopped or removed container shows at the first operation, with a
   * message saying so, and attaching stays free for commands that only read files. */
  if (docker_engine_open(socket, &d->engine, err) < 0) {
    free(d);
    return -1;
  }
  d->container = steal_ptr(&container);
  s->impl = d;
  return 0;
}

static void docker_release(struct cordon_session *s) {
  docker_session_free(s->impl);
  s->impl = NULL;
}

/* The session's engine client and container, attaching from the state when create/attach
 * did not (destroy after a failed attach). */
static int session_handle(struct cordon_session *s, struct docker_session **out,
                          struct cordon_error **err) {
  if (!s->impl && docker_attach(s, err) < 0)
    return -1;
  *out = s->impl;
  return 0;
}

static int inspect_container(struct docker_session *d, long *status, json_t **info,
                             struct cordon_error **err);

/* Whether the container the state names is this session's: labelled by cordon for this
 * session of this project (or already gone). Anything else is never stopped or removed. */
static int check_container_labels(struct cordon_session *s, struct docker_session *d,
                                  struct cordon_error **err) {
  long status = 0;
  _cleanup_json_ json_t *info = NULL;
  if (inspect_container(d, &status, &info, err) < 0)
    return cordon_error_prefix(err, "session %s", s->id);
  if (status == 404)
    return 0;
  json_t *labels = json_object_get(json_object_get(info, "Config"), "Labels");
  const char *session = json_string_value(json_object_get(labels, DOCKER_LABEL_SESSION));
  const char *project = json_string_value(json_object_get(labels, DOCKER_LABEL_PROJECT));
  if (status != 200 || !session || !project || strcmp(session, s->id) != 0 ||
      strcmp(project, cordon_context_state_dir(s->ctx)) != 0)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                            "session %s: container %.12s is not labelled as this session's "
                            "(state tampered with?): refusing to act on it",
                            s->id, d->container);
  return 0;
}

static int docker_destroy(struct cordon_session *s, struct cordon_error **err) {
  struct docker_session *d = NULL;
  struct cordon_error *state_err = NULL;
  if (!s->impl && !s->backend_state)
    return 0; /* create failed before it recorded anything (and removed its own container) */
  if (session_handle(s, &d, &state_err) < 0) {
    /* No container was recorded: create failed before making one (and removed its own). */
    if (state_err && state_err->kind != CORDON_ERR_INVALID) {
      cordon_error_free(state_err);
      return 0;
    }
    if (err && !*err)
      *err = state_err;
    else
      cordon_error_free(state_err);
    return -1;
  }
  if (check_container_labels(s, d, err) < 0)
    return -1;
  _cleanup_free_ char *path = NULL;
  if (asprintf(&path, "/containers/%s?force=true&v=true", d->container) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "destroy");
  long status = 0;
  json_t *answer = NULL;
  if (docker_engine_request(d->engine, "DELETE", path, NULL, &status, &answer, err) < 0)
    return cordon_error_prefix(err, "session %s: cannot remove container %.12s", s->id,
                               d->container);
  const char *msg = json_string_value(json_object_get(answer, "message"));
  int r = 0;
  if (status != 204 && status != 404) /* 404: already gone, destroy is idempotent */
    r = cordon_error_set(err, CORDON_ERR_SYSTEM, 0,
                         "session %s: the Docker engine did not remove container %.12s (HTTP "
                         "%ld): %s",
                         s->id, d->container, status, msg ? msg : "no message");
  json_decref(answer);
  return r;
}

static int docker_shutdown(struct cordon_session *s, struct cordon_error **err) {
  struct docker_session *d = NULL;
  if (session_handle(s, &d, err) < 0 || check_container_labels(s, d, err) < 0)
    return -1;
  _cleanup_free_ char *path = NULL;
  if (asprintf(&path, "/containers/%s/stop?t=2", d->container) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "shutdown");
  long status = 0;
  json_t *answer = NULL;
  if (docker_engine_request(d->engine, "POST", path, NULL, &status, &answer, err) < 0)
    return cordon_error_prefix(err, "session %s", s->id);
  const char *msg = json_string_value(json_object_get(answer, "message"));
  int r = 0;
  /* 304: already stopped; 404: already removed. Both are "stopped". */
  if (status != 204 && status != 304 && status != 404)
    r = cordon_error_set(err, CORDON_ERR_SYSTEM, 0,
                         "session %s: the Docker engine did not stop container %.12s (HTTP %ld): "
                         "%s",
                         s->id, d->container, status, msg ? msg : "no message");
  json_decref(answer);
  return r;
}

/* ---- files ------------------------------------------------------------------------------------
 */

static int docker_read(struct cordon_session *s, const char *path, unsigned char **data,
                       size_t *length, struct cordon_error **err) {
  return workspace_read(s->workspace, path, data, length, err);
}

/* A workspace cordon restored for a resumed session and gave to the sandbox's user: what the
 * host writes there goes to that user too, or the sandbox could not change it. Every
 * component of path (anchored at the workspace, no link followed) that root owns was made by
 * the host, since the whole tree was given away. */
static int give_written(struct cordon_session *s, const char *path, struct cordon_error **err) {
  _cleanup_json_ json_t *o = s->backend_state ? json_loads(s->backend_state, 0, NULL) : NULL;
  if (geteuid() != 0 || !json_is_true(json_object_get(o, "owned_workspace")) ||
      !json_object_get(o, "from_snapshot"))
    return 0;
  _cleanup_free_ char *norm = NULL;
  if (fs_normalize_relative(path, &norm, err) < 0)
    return -1;
  int fd = open(s->workspace, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct stat root;
  if (fd < 0 || fstat(fd, &root) < 0) {
    int e = errno;
    if (fd >= 0)
      close(fd);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "workspace %s", s->workspace);
  }
  if (root.st_uid == 0) {
    close(fd);
    return 0;
  }
  int r = 0;
  for (char *name = norm, *next; r == 0 && name && *name; name = next) {
    next = strchr(name, '/');
    if (next)
      *next++ = 0;
    int sub = openat(fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (sub < 0 || fstat(sub, &st) < 0)
      r = cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "workspace %s", path);
    else if (st.st_uid == 0 &&
             fchownat(sub, "", root.st_uid, root.st_gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
      r = cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot give %s to the sandbox's user",
                           path);
    close(fd);
    fd = sub;
  }
  if (fd >= 0)
    close(fd);
  return r;
}

static int docker_write(struct cordon_session *s, const char *path, const void *data, size_t length,
                        unsigned mode, struct cordon_error **err) {
  if (workspace_write(s->workspace, path, data, length, mode, err) < 0)
    return -1;
  return give_written(s, path, err);
}

static int docker_ls(struct cordon_session *s, const char *path, struct cordon_dirent **entries,
                     size_t *count, struct cordon_error **err) {
  return workspace_ls(s->workspace, path, entries, count, err);
}

/* ---- exec --------------------------------------------------------------------------------- */

struct exec_output {
  struct docker_capture out, err_capture, engine;
  struct docker_tail tail;
};

static void exec_sink(void *data, enum docker_stream_id stream, const unsigned char *bytes,
                      size_t length) {
  struct exec_output *o = data;
  switch (stream) {
  case DOCKER_STREAM_STDOUT: docker_capture_append(&o->out, bytes, length); break;
  case DOCKER_STREAM_STDERR: docker_tail_feed(&o->tail, bytes, length); break;
  default: docker_capture_append(&o->engine, bytes, length); break;
  }
}

static void discard_sink(void *data, enum docker_stream_id stream, const unsigned char *bytes,
                         size_t length) {
}

/* Map the engine's answer to exec create onto what happened to the session. */
static int exec_create_error(struct cordon_session *s, struct docker_session *d, long status,
                             json_t *answer, struct cordon_error **err) {
  const char *msg = json_string_value(json_object_get(answer, "message"));
  if (status == 404)
    return cordon_error_set(err, CORDON_ERR_NOT_FOUND, 0,
                            "session %s: its container %.12s no longer exists (removed outside "
                            "cordon?); destroy the session",
                            s->id, d->container);
  if (status == 409)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                            "session %s: its container %.12s is not running (stopped or killed "
                            "outside cordon?): %s",
                            s->id, d->container, msg ? msg : "no message");
  return cordon_error_set(err, CORDON_ERR_SYSTEM, 0,
                          "session %s: the Docker engine refused the exec (HTTP %ld): %s", s->id,
                          status, msg ? msg : "no message");
}

/* Create an exec; *exec_id is malloc'd. */
static int exec_create(struct cordon_session *s, struct docker_session *d, json_t *config,
                       char **exec_id, struct cordon_error **err) {
  _cleanup_free_ char *path = NULL;
  if (asprintf(&path, "/containers/%s/exec", d->container) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "exec");
  long status = 0;
  _cleanup_json_ json_t *answer = NULL;
  if (docker_engine_request(d->engine, "POST", path, config, &status, &answer, err) < 0)
    return cordon_error_prefix(err, "session %s", s->id);
  const char *id = json_string_value(json_object_get(answer, "Id"));
  if (status != 201 || !id)
    return exec_create_error(s, d, status, answer, err);
  *exec_id = strdup(id);
  return *exec_id ? 0 : cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "exec");
}

/* Exec inspect until the engine has recorded the exit. *exit_code -1 when it never did. */
static int exec_inspect(struct docker_session *d, const char *exec_id, int *exit_code,
                        struct cordon_error **err) {
  _cleanup_free_ char *path = NULL;
  if (asprintf(&path, "/exec/%s/json", exec_id) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "exec inspect");
  double until = fs_now() + INSPECT_SETTLE;
  int nap_us = 200;
  *exit_code = -1;
  for (;;) {
    _cleanup_json_ json_t *info = NULL;
    if (docker_engine_call(d->engine, "GET", path, NULL, &info, err) < 0)
      return -1;
    json_t *code = json_object_get(info, "ExitCode");
    if (!json_is_true(json_object_get(info, "Running")) && json_is_integer(code)) {
      *exit_code = (int)json_integer_value(code);
      return 0;
    }
    if (fs_now() > until)
      return 0;
    usleep((useconds_t)nap_us);
    if (nap_us < 20000)
      nap_us *= 2;
  }
}

/* The fallback when a wrapper could not do its job (it was killed, or it is stuck): a second
 * exec kills that wrapper's tree and every orphan in the container. Returns -1 when the engine
 * refused or could not start the exec (the container is not running, gone or going), else 0. */
static int kill_exec_tree(struct cordon_session *s, struct docker_session *d, const char *token) {
  const char *argv[] = {DOCKER_INIT_TARGET, "kill-exec", token, NULL};
  _cleanup_json_ json_t *config =
      json_pack("{s:b, s:b, s:b, s:[s, s, s], s:s}", "AttachStdin", 0, "AttachStdout", 1,
                "AttachStderr", 1, "Cmd", argv[0], argv[1], argv[2], "WorkingDir", "/");
  _cleanup_free_ char *exec_id = NULL;
  struct cordon_error *failed = NULL;
  struct docker_exec_stream *stream = NULL;
  bool ended = false;
  int r = 0;
  if (!config)
    return 0;
  if (exec_create(s, d, config, &exec_id, &failed) < 0) {
    r = failed && (failed->kind == CORDON_ERR_INVALID || failed->kind == CORDON_ERR_NOT_FOUND) ? -1
                                                                                               : 0;
  } else if (docker_exec_stream_open(d->engine, exec_id, NULL, 0, false, &stream, &failed) == 0) {
    docker_exec_stream_pump(stream, fs_now() + DRAIN_AFTER_KILL, discard_sink, NULL, &ended,
                            &failed);
    /* A helper that did not run to a clean exit means the container is on its way out. */
    int code = -1;
    if (exec_inspect(d, exec_id, &code, &failed) < 0 || code != 0)
      r = -1;
  } else {
    r = -1;
  }
  docker_exec_stream_close(stream);
  cordon_error_free(failed);
  return r;
}

/* The engine's record of the session's container: *status 200 with *info, or 404. */
static int inspect_container(struct docker_session *d, long *status, json_t **info,
                             struct cordon_error **err) {
  _cleanup_free_ char *path = NULL;
  if (asprintf(&path, "/containers/%s/json", d->container) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "container");
  return docker_engine_request(d->engine, "GET", path, NULL, status, info, err);
}

/* After a stream that ended without the wrapper's trailer: did the container die? (known_dead:
 * the engine already refused an exec because the container is not running) */
static int container_gone_error(struct cordon_session *s, struct docker_session *d, bool known_dead,
                                struct cordon_error **err) {
  long status = 0;
  _cleanup_json_ json_t *info = NULL;
  struct cordon_error *ignored = NULL;
  /* The engine records the container's end after the exec's: give it a moment to catch up. */
  double until = fs_now() + (known_dead ? INSPECT_SETTLE : 0.0);
  for (;;) {
    json_decref(info);
    info = NULL;
    if (inspect_container(d, &status, &info, &ignored) < 0) {
      cordon_error_free(ignored);
      return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0,
                              "session %s: the Docker engine went away while the command ran",
                              s->id);
    }
    if (status == 404 || !json_is_true(json_object_get(json_object_get(info, "State"), "Running")))
      break;
    if (fs_now() >= until)
      return 0;
    usleep(20000);
  }
  if (status == 404)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, 0,
                            "session %s: its container %.12s was removed while the command ran "
                            "(outside cordon)",
                            s->id, d->container);
  json_t *state = json_object_get(info, "State");
  return cordon_error_set(
      err, CORDON_ERR_SYSTEM, 0,
      "session %s: its container %.12s stopped while the command ran (exit code %lld%s; killed "
      "or stopped outside cordon?); the session cannot run commands any more: destroy it",
      s->id, d->container, (long long)json_integer_value(json_object_get(state, "ExitCode")),
      json_is_true(json_object_get(state, "OOMKilled")) ? ", out of memory" : "");
}

/* The working directory inside the container. */
static int container_cwd(struct cordon_session *s, const char *cwd, char **out,
                         struct cordon_error **err) {
  if (cwd && cwd[0] == '/') {
    *out = strdup(cwd); /* outside the workspace: a path of the container's own filesystem */
  } else if (!cwd || !*cwd) {
    *out = strdup(s->root);
  } else {
    /* Inside the workspace: it must be a directory there, reached without leaving it. */
    _cleanup_close_ int root = open(s->workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root < 0)
      return cordon_error_set(err, CORDON_ERR_NOT_FOUND, errno, "workspace %s", s->workspace);
    _cleanup_close_ int dir =
        fs_open_beneath(root, cwd, O_PATH | O_DIRECTORY, 0, "the workspace", err);
    if (dir < 0)
      return cordon_error_prefix(err, "working directory");
    size_t n = strlen(s->root);
    while (n > 1 && s->root[n - 1] == '/')
      n--;
    if (asprintf(out, "%.*s/%s", (int)n, s->root, cwd) < 0)
      *out = NULL;
  }
  return *out ? 0 : cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "working directory");
}

/* The exec API path (CORDON_DOCKER_EXEC=api, and containers without an agent): one engine
 * exec per command, under the init's exec wrapper. */
static int docker_exec_api(struct cordon_session *s, struct docker_session *d,
                           const struct cordon_exec_request *req, struct cordon_exec_result *res,
                           struct cordon_error **err) {
  double started = fs_now();
  _cleanup_free_ char *cwd = NULL, *token = NULL, *exec_id = NULL;
  if (container_cwd(s, req->cwd, &cwd, err) < 0 || fs_random_hex(8, &token, err) < 0)
    return -1;
  bool attach_stdin = req->stdin_data != NULL;
  struct docker_exec_spec spec = {
      .argv = req->argv,
      .env = req->env,
      .cwd = cwd,
      .timeout = req->timeout,
      .attach_stdin = attach_stdin,
      .token = token,
  };
  _cleanup_json_ json_t *config = NULL;
  if (docker_exec_config(&spec, &config, err) < 0 || exec_create(s, d, config, &exec_id, err) < 0)
    return -1;

  struct exec_output o;
  docker_capture_init(&o.out, req->max_output);
  docker_capture_init(&o.err_capture, req->max_output);
  docker_capture_init(&o.engine, 4096);
  memset(&o.tail, 0, sizeof(o.tail));
  o.tail.capture = &o.err_capture;
  struct docker_exec_stream *stream = NULL;
  int r = -1;
  bool ended = false, host_killed = false, container_dead = false;
  if (docker_exec_stream_open(d->engine, exec_id, req->stdin_data, req->stdin_length, attach_stdin,
                              &stream, err) < 0) {
    cordon_error_prefix(err, "session %s", s->id);
    goto out;
  }
  /* The wrapper enforces the timeout; the host steps in only if it did not. */
  double deadline = req->timeout > 0 ? started + req->timeout + HOST_TIMEOUT_GRACE : 0;
  if (docker_exec_stream_pump(stream, deadline, exec_sink, &o, &ended, err) < 0)
    goto out;
  if (!ended) {
    container_dead = kill_exec_tree(s, d, token) < 0;
    host_killed = true;
    if (docker_exec_stream_pump(stream, fs_now() + DRAIN_AFTER_KILL, exec_sink, &o, &ended, err) <
        0)
      goto out;
  }
  docker_exec_stream_close(stream);
  stream = NULL;

  struct docker_status status;
  docker_tail_finish(&o.tail, &status);
  int inspected = -1;
  if (exec_inspect(d, exec_id, &inspected, err) < 0)
    goto out;
  if (status.kind == DOCKER_STATUS_NONE) {
    /* The wrapper did not finish: the container died, or something killed the wrapper. Its
     * orphans must not outlive the exec; the helper exec also tells whether the container
     * still runs. */
    if (!host_killed)
      container_dead = kill_exec_tree(s, d, token) < 0;
    if (container_gone_error(s, d, container_dead, err) < 0)
      goto out;
    if (inspected < 0 && !host_killed) {
      size_t n = 0;
      unsigned char *engine_text = docker_capture_take(&o.engine, &n);
      cordon_error_set(err, CORDON_ERR_SYSTEM, 0,
                       "session %s: the Docker engine reported no exit status for the exec%s%.*s",
                       s->id, n ? ": " : "", (int)(n > 300 ? 300 : n),
                       engine_text ? (const char *)engine_text : "");
      free(engine_text);
      goto out;
    }
  } else if (status.kind == DOCKER_STATUS_CHDIR) {
    cordon_error_set(err, CORDON_ERR_NOT_FOUND, status.value, "cannot run %s in %s", req->argv[0],
                     cwd);
    goto out;
  } else if (status.kind == DOCKER_STATUS_SETUP) {
    cordon_error_set(err, CORDON_ERR_SYSTEM, status.value,
                     "session %s: the exec wrapper could not set up %s", s->id, req->argv[0]);
    goto out;
  } else if (status.kind == DOCKER_STATUS_NO_SECCOMP) {
    cordon_error_set(err, CORDON_ERR_DENIED, 0,
                     "session %s: the Docker engine ran the command without a seccomp profile "
                     "(is the daemon started with seccomp unconfined?); refusing to run "
                     "without it",
                     s->id);
    goto out;
  }

  /* The exit code is the engine's; the trailer says how it came about when they agree. */
  int code = inspected >= 0 ? inspected : docker_status_exit_code(&status);
  bool agree = status.kind != DOCKER_STATUS_NONE && docker_status_exit_code(&status) == code;
  res->exit_code = code & 0xff;
  if (agree && status.kind == DOCKER_STATUS_SIGNAL)
    res->term_signal = status.value;
  if ((agree && status.kind == DOCKER_STATUS_TIMEOUT) || host_killed) {
    res->timed_out = true;
    res->exit_code = 128 + 9;
    res->term_signal = 9;
  }
  res->stdout_total = o.out.total;
  res->stdout_truncated = o.out.truncated;
  res->stderr_total = o.err_capture.total;
  res->stderr_truncated = o.err_capture.truncated;
  res->stdout_data = docker_capture_take(&o.out, &res->stdout_length);
  res->stderr_data = docker_capture_take(&o.err_capture, &res->stderr_length);
  if (!res->stdout_data || !res->stderr_data || o.out.failed || o.err_capture.failed) {
    cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "cannot store the command's output");
    goto out;
  }
  res->duration = fs_now() - started;
  r = 0;
out:
  docker_exec_stream_close(stream);
  docker_capture_free(&o.out);
  docker_capture_free(&o.err_capture);
  docker_capture_free(&o.engine);
  return r;
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
  if (inspect_container(d, &status, &info, err) < 0)
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
  if (container_gone_error(s, d, true, err) < 0)
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

static int docker_exec_agent(struct cordon_session *s, struct docker_session *d,
                             const struct cordon_exec_request *req, struct cordon_exec_result *res,
                             struct cordon_error **err) {
  _cleanup_free_ char *cwd = NULL;
  if (container_cwd(s, req->cwd, &cwd, err) < 0)
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

/* CORDON_DOCKER_EXEC: unset or "agent" (the default: the in-container agent, when the
 * container has one) or "api" (the Engine API's exec, one `runc exec` per command). */
static int docker_exec(struct cordon_session *s, const struct cordon_exec_request *req,
                       struct cordon_exec_result *res, struct cordon_error **err) {
  struct docker_session *d = NULL;
  if (session_handle(s, &d, err) < 0)
    return -1;
  const char *mode = getenv("CORDON_DOCKER_EXEC");
  if (mode && *mode && strcmp(mode, "agent") != 0 && strcmp(mode, "api") != 0)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                            "CORDON_DOCKER_EXEC=%s: expected agent or api", mode);
  bool api = mode && !strcmp(mode, "api");
  if (!api && !d->agent) {
    if (mode && !strcmp(mode, "agent"))
      return cordon_error_set(err, CORDON_ERR_UNSUPPORTED, 0,
                              "session %s: its container %.12s has no exec agent (made by an "
                              "earlier cordon); unset CORDON_DOCKER_EXEC to use the Engine API",
                              s->id, d->container);
    api = true;
  }
  return api ? docker_exec_api(s, d, req, res, err) : docker_exec_agent(s, d, req, res, err);
}

/* ---- gc ------------------------------------------------------------------------------------- */

static bool creator_alive(const char *creator) {
  char boot[64];
  int pid = 0;
  unsigned long long start = 0;
  if (!creator || sscanf(creator, "%63[^:]:%d:%llu", boot, &pid, &start) != 3 || pid <= 0)
    return false;
  _cleanup_free_ char *now = creator_identity((pid_t)pid);
  return now && !strcmp(now, creator);
}

static bool state_file_exists(const char *project_state_dir, const char *session) {
  _cleanup_free_ char *path = NULL;
  struct stat st;
  return asprintf(&path, "%s/sessions/%s/state.json", project_state_dir, session) >= 0 &&
         stat(path, &st) == 0;
}

/* Session ids are lowercase hex and dashes; anything else in a label is not ours to trust as
 * a path component. */
static bool plausible_session_id(const char *id) {
  size_t n = strlen(id);
  if (n == 0 || n > 64)
    return false;
  for (size_t i = 0; i < n; i++)
    if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= '0' && id[i] <= '9') || id[i] == '-'))
      return false;
  return true;
}

void docker_gc_entries_free(struct docker_gc_entry *entries, size_t count) {
  for (size_t i = 0; entries && i < count; i++) {
    free(entries[i].container);
    free(entries[i].session);
    free(entries[i].project);
    free(entries[i].reason);
    free(entries[i].error);
  }
  free(entries);
}

int docker_gc(struct cordon_context *ctx, bool all_projects, bool dry_run,
              struct docker_gc_entry **entries, size_t *count, struct cordon_error **err) {
  *entries = NULL;
  *count = 0;
  _cleanup_engine_ struct docker_engine *e = NULL;
  _cleanup_json_ json_t *list = NULL;
  /* filters={"label":["org.cordon.session"]}, percent-encoded */
  static const char query[] =
      "/containers/json?all=1&filters=%7B%22label%22%3A%5B%22" DOCKER_LABEL_SESSION "%22%5D%7D";
  if (docker_engine_open(NULL, &e, err) < 0 ||
      docker_engine_call(e, "GET", query, NULL, &list, err) < 0)
    return -1;
  const char *here = cordon_context_state_dir(ctx);
  struct docker_gc_entry *out = calloc(json_array_size(list) + 1, sizeof(*out));
  if (!out)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "gc");
  size_t n = 0, i;
  json_t *c;
  json_array_foreach(list, i, c) {
    json_t *labels = json_object_get(c, "Labels");
    const char *id = json_string_value(json_object_get(c, "Id"));
    const char *session = json_string_value(json_object_get(labels, DOCKER_LABEL_SESSION));
    const char *project = json_string_value(json_object_get(labels, DOCKER_LABEL_PROJECT));
    const char *ephemeral = json_string_value(json_object_get(labels, DOCKER_LABEL_EPHEMERAL));
    const char *creator = json_string_value(json_object_get(labels, DOCKER_LABEL_CREATOR));
    if (!id || !session || !project || project[0] != '/' || !plausible_session_id(session))
      continue;
    if (!all_projects && strcmp(project, here) != 0)
      continue;
    /* A session whose state is missing may be in the middle of being created: its creator
     * still runs. Once the creator is gone, nothing will ever record it. */
    const char *reason = NULL;
    bool dead_run = false;
    bool alive = creator_alive(creator);
    if (!state_file_exists(project, session)) {
      if (!alive)
        reason = "its session no longer exists";
    } else if (ephemeral && !strcmp(ephemeral, "1") && !alive) {
      reason = "the `cordon run` that created it is gone";
      dead_run = true;
    }
    if (!reason)
      continue;
    struct docker_gc_entry *g = &out[n++];
    g->container = strndup(id, 12);
    g->session = strdup(session);
    g->project = strdup(project);
    g->reason = strdup(reason);
    if (dry_run)
      continue;
    _cleanup_free_ char *path = NULL;
    long status = 0;
    struct cordon_error *rm_err = NULL;
    if (asprintf(&path, "/containers/%s?force=true&v=true", id) < 0 ||
        docker_engine_request(e, "DELETE", path, NULL, &status, NULL, &rm_err) < 0) {
      g->error = strdup(rm_err && rm_err->message ? rm_err->message : "out of memory");
    } else if (status != 204 && status != 404) {
      if (asprintf(&g->error, "the Docker engine answered HTTP %ld", status) < 0)
        g->error = NULL;
    } else {
      g->removed = true;
      if (dead_run) {
        /* The run's process died before it could remove its session state. */
        _cleanup_free_ char *dir = NULL;
        if (asprintf(&dir, "%s/sessions/%s", project, session) >= 0)
          fs_remove_tree(dir, &rm_err);
      }
    }
    cordon_error_free(rm_err);
  }
  *entries = out;
  *count = n;
  return 0;
}

const struct cordon_backend cordon_backend_docker = {
    .abi_version = CORDON_BACKEND_ABI_VERSION,
    .name = "docker",
    .summary = "a container of the Docker engine per session (Engine API on its unix socket)",
    .capabilities = CORDON_CAP_FILE_RW | CORDON_CAP_EXEC | CORDON_CAP_NETWORK | CORDON_CAP_SNAPSHOT,
    .tier = CORDON_TIER_CONTAINER,
    /* Limits the engine reports it cannot set are refused by name at create. Egress none and
     * loopback are both NetworkMode none (the container's own lo only); restricted is not
     * implemented. /tmp is a capped tmpfs (HostConfig.Tmpfs), /dev/shm as large (ShmSize). */
    .enforces = CORDON_FEATURE_READ_ONLY_PATHS | CORDON_FEATURE_HIDDEN_PATHS |
                CORDON_FEATURE_HOST_GRANTS | CORDON_FEATURE_MEMORY | CORDON_FEATURE_PIDS |
                CORDON_FEATURE_CPU | CORDON_FEATURE_NOFILE | CORDON_FEATURE_FSIZE |
                CORDON_FEATURE_TMP_SIZE | CORDON_FEATURE_NET_NONE | CORDON_FEATURE_NET_LOOPBACK,
    .available = docker_available,
    .create = docker_create,
    .resume = docker_resume,
    .attach = docker_attach,
    .destroy = docker_destroy,
    .shutdown = docker_shutdown,
    .release = docker_release,
    .read = docker_read,
    .write = docker_write,
    .ls = docker_ls,
    .exec = docker_exec,
    .snapshot = docker_snapshot,
};
