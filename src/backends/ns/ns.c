/* The `ns` backend: native Linux confinement (user, mount, pid, ipc, uts, cgroup and network
 * namespaces, pivot_root, seccomp, cgroups, no capabilities), built on the kernel directly.
 *
 * create() (start.c) plans the whole sandbox first and refuses what it cannot enforce, then
 * makes the session's cgroups and socket and starts the holder (holder.c), which builds the
 * sandbox's root and waits for commands. Sessions outlive the process that made them: backend_state
 * records the holder's pid and start time (so a recycled pid is never mistaken for it) and the
 * cgroups to remove. exec() sends argv, environment, cwd and the three stdio fds over the
 * session socket; the runner (exec/runner.c) does the capture and the timeout around it.
 * read/write/ls work on the host side of the workspace (a host directory bind-mounted in). */
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cordon/cas.h>
#include <cordon/keys.h>
#include <cordon/session.h>
#include <cordon/snapshot.h>

#include "backends/builtin.h"
#include "backends/ns/holder.h"
#include "backends/ns/impl.h"
#include "backends/ns/ns.h"
#include "backends/ns/proto.h"
#include "base/cleanup.h"
#include "base/fs.h"
#include "base/proc.h"
#include "base/strv.h"
#include "base/syscalls.h"
#include "confine/cgroup.h"
#include "confine/policy.h"
#include "crypto/digest.h"
#include "exec/runner.h"
#include "protocol/persist.h"
#include "protocol/rundir.h"
#include "protocol/workspace.h"

/* How long exec waits for the holder to answer a request. */
#define START_TIMEOUT_MS 30000
/* How long destroy waits for the holder (and with it the namespace) to die. */
#define DESTROY_WAIT_MS 5000

/* ---- availability ------------------------------------------------------------------------ */

static int ns_available(const struct cordon_backend *self, char **reason) {
  const char *why = NULL;
  if (ns_read_sysctl("/proc/sys/user/max_user_namespaces") == 0)
    why = "user namespaces disabled (user.max_user_namespaces=0)";
  else if (geteuid() != 0 && ns_read_sysctl("/proc/sys/kernel/unprivileged_userns_clone") == 0)
    why = "unprivileged user namespaces disabled (kernel.unprivileged_userns_clone=0)";
  else if (geteuid() != 0 &&
           ns_read_sysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == 1)
    why = "unprivileged user namespaces restricted by AppArmor "
          "(kernel.apparmor_restrict_unprivileged_userns=1)";
  else if (sys_mount_setattr(-1, "", 0, NULL) < 0 && errno == ENOSYS)
    why = "the kernel lacks mount_setattr (Linux 5.12 or later is needed)";
  else if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) < 0 && errno == EINVAL)
    why = "the kernel has no seccomp filter support";
  if (!why)
    return 1;
  if (reason)
    *reason = strdup(why);
  return 0;
}

/* ---- the holder's lifetime ----------------------------------------------------------------- */

/* Whether pid is pid 1 of a pid namespace below ours, as every holder is ("NSpid: N 1"). */
static bool is_pid_namespace_init(pid_t pid) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
  _cleanup_free_ unsigned char *text = NULL;
  size_t len = 0;
  if (fs_read_file(path, 65536, &text, &len, NULL) < 0)
    return false;
  const char *line = strstr((const char *)text, "\nNSpid:");
  if (!line)
    return false;
  const char *end = strchrnul(line + 1, '\n');
  /* At least two levels, the last one 1. */
  const char *last = end;
  while (last > line && (last[-1] == ' ' || last[-1] == '\t'))
    last--;
  const char *start = last;
  while (start > line && start[-1] != ' ' && start[-1] != '\t')
    start--;
  const char *first = line + strlen("\nNSpid:");
  first += strspn(first, " \t");
  return start > first && last - start == 1 && *start == '1';
}

/* Whether the recorded holder pid names our holder: its start time, and (the state being
 * untrusted, and start times guessable) membership of the session's own v2 cgroup, in which
 * the holder is born. */
static bool holder_is_ours(const struct ns_impl *impl) {
  if (impl->holder_pid <= 0 || proc_start_time(impl->holder_pid) != impl->holder_start ||
      !is_pid_namespace_init(impl->holder_pid))
    return false;
  if (!impl->cgroups.v2)
    return true;
  const char *leaf = strrchr(impl->cgroups.v2, '/') + 1; /* cordon-<id>: load_state checked */
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)impl->holder_pid);
  _cleanup_free_ unsigned char *text = NULL;
  size_t len = 0;
  if (fs_read_file(path, 65536, &text, &len, NULL) < 0)
    return false;
  /* The unified line "0::/path": the leaf must be one of its components. */
  for (char *line = (char *)text; line && *line;) {
    char *next = strchr(line, '\n');
    if (next)
      *next++ = 0;
    if (strncmp(line, "0::", 3) == 0) {
      size_t n = strlen(leaf);
      for (const char *c = strchr(line + 3, '/'); c; c = strchr(c + 1, '/'))
        if (strncmp(c + 1, leaf, n) == 0 && (c[1 + n] == 0 || c[1 + n] == '/'))
          return true;
      return false;
    }
    line = next;
  }
  return false;
}

/* A pidfd for the holder, or -1 when it is gone (or its pid now names another process). */
static int holder_pidfd(const struct ns_impl *impl) {
  if (impl->holder_pid <= 0)
    return -1;
  int fd = sys_pidfd_open(impl->holder_pid, 0);
  if (fd < 0)
    return -1;
  /* The pidfd pins the process we opened; if its start time (and cgroup) match, it is ours. */
  if (!holder_is_ours(impl)) {
    close(fd);
    return -1;
  }
  return fd;
}

static void holder_kill(struct ns_impl *impl) {
  _cleanup_close_ int fd = holder_pidfd(impl);
  if (fd < 0)
    return;
  /* pid 1 of the namespace: its death takes every process in the namespace with it. */
  sys_pidfd_send_signal(fd, SIGKILL);
  struct pollfd pfd = {.fd = fd, .events = POLLIN};
  while (poll(&pfd, 1, DESTROY_WAIT_MS) < 0 && errno == EINTR)
    ;
  /* The holder is our child when this process created the session: leave no zombie. */
  waitpid(impl->holder_pid, NULL, WNOHANG);
}

static bool cgroups_in_use(const struct confine_cgroups *cg) {
  bool any = cg->v2 != NULL;
  for (size_t i = 0; i < CONFINE_CG_V1_COUNT; i++)
    any = any || cg->v1[i];
  return any;
}

/* A one-shot sandbox without limits has a cgroup v2 for its device rule alone. Once pid 1 has
 * hung up it runs nothing but its own _exit: moved to the parent cgroup, it lets the cgroup go
 * now rather than after the kernel has taken its namespaces down (milliseconds of RCU grace
 * periods), and `cordon run` exits without waiting for it, as it does with no cgroup. */
static bool oneshot_leave_cgroup(struct ns_impl *impl) {
  for (size_t i = 0; i < CONFINE_CG_V1_COUNT; i++)
    if (impl->cgroups.v1[i])
      return false;
  pid_t pid1 = ns_oneshot_pid1_finishing(impl->ended);
  return pid1 > 0 && impl->cgroups.v2 && confine_cgroup_move_to_parent(impl->cgroups.v2, pid1) == 0;
}

static int stop_everything(struct cordon_session *s, struct cordon_error **err) {
  struct ns_impl *impl = s->impl;
  struct ns_impl *loaded = NULL;
  if (!impl) {
    loaded = impl = ns_impl_new();
    if (!impl)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "session");
    if (!s->backend_state) {
      ns_impl_free(loaded);
      return 0; /* nothing was started: nothing to stop */
    }
    /* A state that fails validation (tampered with from a sandbox that could reach it) is
     * never acted on: it could name another process or cgroup. */
    if (ns_load_state(s, impl, err) < 0) {
      ns_impl_free(loaded);
      return -1;
    }
  }
  /* A live process with the recorded pid and start time that is not our holder: the state
   * was rewritten to name it (a recycled pid cannot have the same start time). */
  if (impl->holder_pid > 0 && proc_start_time(impl->holder_pid) == impl->holder_start &&
      !holder_is_ours(impl)) {
    ns_impl_free(loaded);
    return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                            "ns state of session %s names process %d, which is not its holder: "
                            "refusing to act on it",
                            s->id, (int)impl->holder_pid);
  }
  holder_kill(impl);
  /* An ended one-shot sandbox's pid 1 leaves its cgroups only once it has exited, unless it
   * can be moved out first (oneshot_leave_cgroup). */
  if (cgroups_in_use(&impl->cgroups) && !oneshot_leave_cgroup(impl)) {
    ns_oneshot_free(impl->ended);
    impl->ended = NULL;
  }
  confine_cgroups_kill(&impl->cgroups);
  int r = confine_cgroups_remove(&impl->cgroups, err);
  /* Without its socket's file the holder ends itself (it watches it); the runtime directory
   * itself goes with the session (session.c). */
  if (s->state_dir && !impl->one_shot) {
    _cleanup_free_ char *sock = NULL;
    if (ns_socket_path(s, &sock, NULL) == 0)
      unlink(sock);
  }
  ns_impl_free(loaded);
  return r;
}

static int ns_create(struct cordon_session *s, const struct cordon_manifest *m,
                     struct cordon_error **err) {
  return ns_start(s, m, NULL, err);
}

static int ns_resume(struct cordon_session *s, const struct cordon_manifest *m,
                     const char *snapshot_id, struct cordon_error **err) {
  return ns_start(s, m, snapshot_id, err);
}

static int ns_ready(struct cordon_session *s, struct cordon_error **err) {
  struct ns_impl *impl = s->impl;
  if (!impl || impl->ready_fd < 0)
    return 0;
  int ready_fd = impl->ready_fd;
  impl->ready_fd = -1;
  return ns_holder_wait(impl->holder_pid, ready_fd, err);
}

/* ---- attach, destroy, shutdown --------------------------------------------------------------- */

static int ns_attach(struct cordon_session *s, struct cordon_error **err) {
  struct ns_impl *impl = ns_impl_new();
  if (!impl)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "session");
  if (ns_load_state(s, impl, err) < 0) {
    ns_impl_free(impl);
    return -1;
  }
  free(s->home);
  s->home = strdup(CORDON_SANDBOX_HOME);
  /* A dead holder does not stop read/write/ls (the workspace is on the host); exec says why. */
  if (impl->one_shot) {
    if (asprintf(&impl->dead, "session %s was created for one command (one-shot)", s->id) < 0)
      impl->dead = NULL;
  } else if (impl->holder_pid == 0) {
    if (asprintf(&impl->dead, "session %s was never finished (its creator was killed); destroy it",
                 s->id) < 0)
      impl->dead = NULL;
  } else if (!holder_is_ours(impl) &&
             asprintf(
                 &impl->dead,
                 "the sandbox of session %s is gone (its holder, pid %d, has exited); destroy the "
                 "session and create a new one",
                 s->id, (int)impl->holder_pid) < 0)
    impl->dead = NULL;
  s->impl = impl;
  return 0;
}

static int ns_destroy(struct cordon_session *s, struct cordon_error **err) {
  return stop_everything(s, err);
}

static int ns_shutdown(struct cordon_session *s, struct cordon_error **err) {
  return stop_everything(s, err);
}

static void ns_release(struct cordon_session *s) {
  ns_impl_free(s->impl);
  s->impl = NULL;
}

/* ---- files ---------------------------------------------------------------------------------- */

/* The host path of the workspace for read/write/ls. For an overlay session that is the merged
 * view in the holder's mount namespace: its root is opened and the holder's start time checked
 * after the open, so a recycled pid never lends us another process's root; *view_fd keeps it
 * open and the path goes through it. */
static int workspace_view(struct cordon_session *s, int *view_fd, char **path,
                          struct cordon_error **err) {
  struct ns_impl *impl = s->impl;
  *view_fd = -1;
  if (!impl || !impl->overlay) {
    *path = strdup(s->workspace);
    return *path ? 0 : cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "workspace");
  }
  char root[64];
  snprintf(root, sizeof(root), "/proc/%d/root", (int)impl->holder_pid);
  int fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0 || !holder_is_ours(impl)) {
    if (fd >= 0)
      close(fd);
    return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0,
                            "the workspace of session %s lives in its sandbox, which is gone "
                            "(holder pid %d); snapshot or destroy the session",
                            s->id, (int)impl->holder_pid);
  }
  if (asprintf(path, "/proc/self/fd/%d%s", fd, s->root) < 0) {
    close(fd);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "workspace");
  }
  *view_fd = fd;
  return 0;
}

static int ns_read(struct cordon_session *s, const char *path, unsigned char **data, size_t *length,
                   struct cordon_error **err) {
  _cleanup_close_ int view_fd = -1;
  _cleanup_free_ char *ws = NULL;
  if (workspace_view(s, &view_fd, &ws, err) < 0)
    return -1;
  return workspace_read(ws, path, data, length, err);
}

static int ns_write(struct cordon_session *s, const char *path, const void *data, size_t length,
                    unsigned mode, struct cordon_error **err) {
  struct ns_impl *impl = s->impl;
  _cleanup_close_ int view_fd = -1;
  _cleanup_free_ char *ws = NULL;
  if (workspace_view(s, &view_fd, &ws, err) < 0)
    return -1;
  SANDBOX_OWNER_BEGIN(impl);
  int r = workspace_write(ws, path, data, length, mode, err);
  SANDBOX_OWNER_END();
  return r;
}

static int ns_ls(struct cordon_session *s, const char *path, struct cordon_dirent **entries,
                 size_t *count, struct cordon_error **err) {
  _cleanup_close_ int view_fd = -1;
  _cleanup_free_ char *ws = NULL;
  if (workspace_view(s, &view_fd, &ws, err) < 0)
    return -1;
  return workspace_ls(ws, path, entries, count, err);
}

/* ---- snapshots ------------------------------------------------------------------------------ */

/* Whether a directory has no entries at all (-1 when it cannot be read). */
static int dir_is_empty(const char *path) {
  _cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  char buf[256];
  for (;;) {
    long n = sys_getdents64(fd, buf, sizeof(buf));
    if (n < 0)
      return -1;
    if (n == 0)
      return 1;
    for (long off = 0; off < n;) {
      const char *name = buf + off + 19; /* struct linux_dirent64: d_name after 19 bytes */
      unsigned short reclen;
      memcpy(&reclen, buf + off + 16, sizeof(reclen));
      if (strcmp(name, ".") != 0 && strcmp(name, "..") != 0)
        return 0;
      off += reclen;
    }
  }
}

static int ns_snapshot(struct cordon_session *s, char **snapshot_id, struct cordon_error **err) {
  struct ns_impl *impl = s->impl;
  if (!impl || !impl->overlay)
    return workspace_snapshot(s, NULL, snapshot_id, err);
  _cleanup_free_ char *upper_dir = NULL;
  if (asprintf(&upper_dir, "%s/upper", s->state_dir) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "snapshot");
  /* Nothing in the upper layer: the tree is the base's, and so is its id (an id is a pure
   * function of the tree), with no manifest to read. A race of candidates that change nothing
   * pays nothing here. */
  if (dir_is_empty(upper_dir) == 1) {
    *snapshot_id = strdup(impl->from_snapshot);
    return *snapshot_id ? 0 : cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "snapshot");
  }
  /* Symlinks the sandbox made point at its own view of the workspace (s->root). */
  const char *const aliases[] = {s->root, NULL};
  /* The overlay is mounted by root in the initial user namespace without "userxattr": its
   * markers are trusted.overlay.*, which the sandbox cannot set (overlayfs escapes them);
   * user.overlay.* it can set, and those are content. */
  struct cordon_snapshot_options o = {.root_aliases = aliases,
                                      .max_bytes = s->max_snapshot_bytes,
                                      .overlay_xattrs = CORDON_OVERLAY_XATTRS_TRUSTED};
  struct cordon_cas *cas = NULL;
  if (cordon_cas_open_project(s->ctx, &cas, err) < 0)
    return -1;
  char id[CORDON_DIGEST_HEX_SIZE];
  /* The base's manifest plus what the upper layer changed. */
  int r = cordon_snapshot_take_overlay(cas, impl->from_snapshot, upper_dir, &o, id, NULL, err);
  cordon_cas_close(cas);
  if (r < 0)
    return -1;
  /* A session resumed from this snapshot (a race's judge) links what it shares with our base
   * instead of copying it. Only a hint: failing to leave it costs time, nothing else. */
  _cleanup_free_ char *bases = NULL;
  if (asprintf(&bases, "%s/bases", cordon_context_state_dir(s->ctx)) >= 0) {
    struct cordon_error *ignored = NULL;
    cordon_snapshot_note_parent(bases, id, impl->from_snapshot, &ignored);
    cordon_error_free(ignored);
  }
  *snapshot_id = strdup(id);
  return *snapshot_id ? 0 : cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "snapshot");
}

/* ---- exec: the launcher ------------------------------------------------------------------- */

struct ns_launch {
  struct ns_impl *impl;
  int conn;
  bool ended;       /* the exit status arrived (or the connection broke) */
  int exec_failure; /* 126/127: the sandbox could not execve the command */
};

/* What a client needs, from the session's identity only: its runtime directory (checked: ours,
 * 0700), the socket's path (compared with what the state records) and the secret. */
static int prepare_client(struct cordon_session *s, struct ns_impl *impl,
                          struct cordon_error **err) {
  if (impl->auth)
    return 0;
  _cleanup_free_ char *sock = NULL;
  if (ns_socket_path(s, &sock, err) < 0)
    return -1;
  if (!impl->socket_recorded || strcmp(impl->socket_recorded, sock) != 0)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                            "session %s: its state records the socket %s, but the session's "
                            "socket is %s (state tampered with, or another CORDON_RUNTIME_DIR / "
                            "XDG_RUNTIME_DIR): refused",
                            s->id, impl->socket_recorded ? impl->socket_recorded : "(none)", sock);
  impl->run_fd = session_rundir(s, false, err);
  if (impl->run_fd < 0)
    return -1;
  _cleanup_free_ unsigned char *secret = NULL;
  size_t len = 0;
  int r = rundir_read_private(impl->run_fd, SECRET_NAME, NS_AUTH_SECRET_LEN, &secret, &len, err);
  if (r == 0 && len != NS_AUTH_SECRET_LEN)
    r = cordon_error_set(err, CORDON_ERR_INVALID, 0, "session %s: its secret is not %d bytes",
                         s->id, NS_AUTH_SECRET_LEN);
  if (r == 0)
    r = crypto_hmac_new(secret, len, &impl->auth, err);
  if (secret)
    OPENSSL_cleanse(secret, len);
  return r < 0 ? cordon_error_prefix(err, "session %s", s->id) : 0;
}

/* Connect to the holder: the socket's file must be a socket of ours (no link followed), its
 * listener the recorded holder (SO_PEERCRED pid, whose start time and cgroup are checked),
 * and it must prove the session's secret before anything of the command is sent. */
static int connect_holder(struct ns_impl *impl, struct cordon_error **err) {
  struct stat st;
  if (fstatat(impl->run_fd, SOCKET_NAME, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, errno,
                            "cannot reach the sandbox holder (pid %d)", (int)impl->holder_pid);
  if (!S_ISSOCK(st.st_mode) || st.st_uid != geteuid())
    return cordon_error_set(err, CORDON_ERR_DENIED, 0,
                            "the session socket is not a socket of the current user: refused");
  _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "socket");
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  snprintf(addr.sun_path, sizeof(addr.sun_path), "/proc/self/fd/%d/%s", impl->run_fd, SOCKET_NAME);
  int r;
  do
    r = connect(fd, (struct sockaddr *)&addr, sizeof(addr));
  while (r < 0 && errno == EINTR);
  if (r < 0)
    return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, errno,
                            "cannot reach the sandbox holder (pid %d)", (int)impl->holder_pid);
  struct ucred cred = {0};
  socklen_t len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.pid != impl->holder_pid ||
      !holder_is_ours(impl))
    return cordon_error_set(err, CORDON_ERR_DENIED, 0,
                            "the session socket is served by pid %d, not by the sandbox holder "
                            "(pid %d): refused",
                            (int)cred.pid, (int)impl->holder_pid);
  if (ns_auth_client(fd, impl->auth, NS_AUTH_TIMEOUT_MS, err) < 0)
    return -1;
  return steal_fd(&fd);
}

static int launch_start(void *data, const struct exec_spec *spec, const int stdio_fds[3],
                        int *exit_fd, struct cordon_error **err) {
  struct ns_launch *l = data;
  _cleanup_free_ unsigned char *buf = NULL;
  size_t len = 0;
  static const char *const empty[] = {NULL};
  /* No timeout in the request: the runner keeps time here and sends the kill byte. */
  if (exec_wire_encode(&ns_protocol, spec->cwd, spec->argv, spec->envp ? spec->envp : empty, 0,
                       &buf, &len, err) < 0)
    return -1;
  l->conn = connect_holder(l->impl, err);
  if (l->conn < 0)
    return -1;
  if (exec_wire_send_with_fds(l->conn, buf, len, stdio_fds, EXEC_WIRE_STDIO_FDS) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot send the exec request");
  struct exec_wire_reply reply;
  int r = exec_wire_read_reply(l->conn, &ns_protocol, START_TIMEOUT_MS, &reply, err);
  if (r <= 0) {
    l->ended = true;
    if (r < 0)
      return cordon_error_prefix(err, "the sandbox did not start %s (holder pid %d)", spec->argv[0],
                                 (int)l->impl->holder_pid);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, EPIPE,
                            "the sandbox did not start %s (holder pid %d)", spec->argv[0],
                            (int)l->impl->holder_pid);
  }
  if (reply.type == EXEC_WIRE_FAILED) {
    l->ended = true;
    if (reply.a == NS_STAGE_CHDIR)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, reply.b, "cannot run %s in %s", spec->argv[0],
                              spec->cwd);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, reply.b, "the sandbox could not set up %s",
                            spec->argv[0]);
  }
  if (reply.type != EXEC_WIRE_RUNNING)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, EPROTO,
                            "unexpected reply '%c' from the sandbox", (char)reply.type);
  *exit_fd = fcntl(l->conn, F_DUPFD_CLOEXEC, 3);
  if (*exit_fd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "dup");
  return 0;
}

static int launch_reap(void *data, int *exit_code, int *term_signal, struct cordon_error **err) {
  struct ns_launch *l = data;
  struct exec_wire_reply reply;
  int r = exec_wire_read_reply(l->conn, &ns_protocol, -1, &reply, err);
  l->ended = true;
  if (r < 0)
    return -1;
  if (r == 0 || (reply.type != EXEC_WIRE_EXITED && reply.type != EXEC_WIRE_EXEC_FAILED))
    return cordon_error_set(err, CORDON_ERR_SYSTEM, r == 0 ? EPIPE : EPROTO,
                            "the sandbox ended the command without a status (was the session "
                            "destroyed?)");
  if (reply.type == EXEC_WIRE_EXEC_FAILED) {
    l->exec_failure = reply.a;
    *exit_code = reply.a;
    *term_signal = 0;
    return 0;
  }
  *exit_code = reply.a;
  *term_signal = reply.b;
  return 0;
}

static void launch_kill_tree(void *data) {
  struct ns_launch *l = data;
  if (l->conn < 0 || l->ended)
    return; /* after the status, the holder has already removed the tree */
  exec_wire_send_kill(l->conn);
}

static void launch_cleanup(void *data) {
  struct ns_launch *l = data;
  if (l->conn >= 0)
    close(l->conn); /* the holder kills whatever is left when we hang up */
  l->conn = -1;
}

/* ---- exec: the one-shot launcher --------------------------------------------------------- */

struct oneshot_launch {
  struct ns_impl *impl;
  struct ns_pending *pending;
  struct ns_oneshot_command cmd;
  struct ns_oneshot *sandbox;
  int exec_failure; /* 126/127: the sandbox could not execve the command */
};

static int oneshot_start(void *data, const struct exec_spec *spec, const int stdio_fds[3],
                         int *exit_fd, struct cordon_error **err) {
  struct oneshot_launch *l = data;
  static const char *const empty[] = {NULL};
  l->cmd = (struct ns_oneshot_command){
      .argv = spec->argv,
      .envp = spec->envp ? spec->envp : empty,
      .cwd = spec->cwd,
      .stdio = {stdio_fds[0], stdio_fds[1], stdio_fds[2]},
  };
  return ns_oneshot_start(&l->pending->cfg, &l->cmd, &l->sandbox, exit_fd, err);
}

static int oneshot_reap(void *data, int *exit_code, int *term_signal, struct cordon_error **err) {
  struct oneshot_launch *l = data;
  int r = ns_oneshot_reap(l->sandbox, exit_code, term_signal, err);
  if (r == 0)
    l->exec_failure = ns_oneshot_exec_failure(l->sandbox);
  return r;
}

static void oneshot_kill_tree(void *data) {
  struct oneshot_launch *l = data;
  ns_oneshot_kill(l->sandbox);
}

/* The sandbox is reaped later (impl->ended): see ns_oneshot_reap. */
static void oneshot_cleanup(void *data) {
  struct oneshot_launch *l = data;
  ns_oneshot_free(l->impl->ended);
  l->impl->ended = l->sandbox;
  l->sandbox = NULL;
}

static int ns_exec_launch(struct cordon_session *s, struct ns_impl *impl,
                          const struct exec_spec *spec, struct cordon_exec_result *res,
                          struct cordon_error **err);

static int ns_exec(struct cordon_session *s, const struct cordon_exec_request *req,
                   struct cordon_exec_result *res, struct cordon_error **err) {
  struct ns_impl *impl = s->impl;
  if (!impl)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "session %s is not attached", s->id);
  if (impl->one_shot && !impl->pending)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                            "session %s was created for one command, which has run", s->id);
  if (impl->dead)
    return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0, "%s", impl->dead);
  /* cwd: relative means under the workspace; absolute is a path inside the sandbox. */
  _cleanup_free_ char *cwd = NULL;
  if (!req->cwd || !*req->cwd)
    cwd = strdup(s->root);
  else if (req->cwd[0] == '/')
    cwd = strdup(req->cwd);
  else if (asprintf(&cwd, "%s/%s", s->root, req->cwd) < 0)
    cwd = NULL;
  if (!cwd)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "exec");
  struct exec_spec spec = exec_spec_from_request(req, cwd);
  /* An OOM kill is a SIGKILL like any other: the memory cgroup's counter tells them apart. */
  uint64_t oom_before = confine_cgroups_oom_kills(&impl->cgroups);
  int r = ns_exec_launch(s, impl, &spec, res, err);
  /* 137 without a signal: a shell whose child the OOM killer took. */
  bool killed = res->term_signal == SIGKILL || res->exit_code == 128 + SIGKILL;
  if (r == 0 && killed && !res->timed_out && confine_cgroups_oom_kills(&impl->cgroups) > oom_before)
    res->oom_killed = true;
  return r;
}

/* Run spec in the one-shot sandbox being built, or through the session's holder. */
static int ns_exec_launch(struct cordon_session *s, struct ns_impl *impl,
                          const struct exec_spec *spec, struct cordon_exec_result *res,
                          struct cordon_error **err) {
  if (impl->pending) {
    struct oneshot_launch l = {.impl = impl, .pending = impl->pending};
    const struct exec_launcher launcher = {
        .data = &l,
        .start = oneshot_start,
        .reap = oneshot_reap,
        .kill_tree = oneshot_kill_tree,
        .cleanup = oneshot_cleanup,
    };
    int r = exec_run_with(spec, &launcher, res, err);
    ns_pending_free(impl->pending);
    impl->pending = NULL;
    if (r == 0)
      res->exec_failure = l.exec_failure;
    return r;
  }
  if (prepare_client(s, impl, err) < 0)
    return -1;
  struct ns_launch l = {.impl = impl, .conn = -1};
  const struct exec_launcher launcher = {
      .data = &l,
      .start = launch_start,
      .reap = launch_reap,
      .kill_tree = launch_kill_tree,
      .cleanup = launch_cleanup,
  };
  int r = exec_run_with(spec, &launcher, res, err);
  if (r == 0)
    res->exec_failure = l.exec_failure;
  return r;
}

const struct cordon_backend cordon_backend_ns = {
    .abi_version = CORDON_BACKEND_ABI_VERSION,
    .name = "ns",
    .summary = "Linux namespaces + seccomp + cgroups: a fresh root, no capabilities, "
               "non-root uid (the default)",
    .capabilities = CORDON_CAP_FILE_RW | CORDON_CAP_EXEC | CORDON_CAP_NETWORK |
                    CORDON_CAP_SNAPSHOT | CORDON_CAP_PERSISTENT_VOLUMES | CORDON_CAP_CALLER_STDIO,
    .tier = CORDON_TIER_CONTAINER,
    /* Limits it cannot set on this host (rootless without a delegated cgroup) it refuses by
     * name at create. restricted: lo only, and the host-side proxy (egress.h). */
    .enforces = CORDON_FEATURE_READ_ONLY_PATHS | CORDON_FEATURE_HIDDEN_PATHS |
                CORDON_FEATURE_HOST_GRANTS | CORDON_FEATURE_MEMORY | CORDON_FEATURE_PIDS |
                CORDON_FEATURE_CPU | CORDON_FEATURE_NOFILE | CORDON_FEATURE_FSIZE |
                CORDON_FEATURE_TMP_SIZE | CORDON_FEATURE_NET_NONE | CORDON_FEATURE_NET_LOOPBACK |
                CORDON_FEATURE_NET_RESTRICTED,
    .available = ns_available,
    .create = ns_create,
    .resume = ns_resume,
    .attach = ns_attach,
    .destroy = ns_destroy,
    .shutdown = ns_shutdown,
    .release = ns_release,
    .read = ns_read,
    .write = ns_write,
    .ls = ns_ls,
    .exec = ns_exec,
    .snapshot = ns_snapshot,
    .ready = ns_ready,
};

/* ---- gc -------------------------------------------------------------------------------------- */

void ns_gc_entries_free(struct ns_gc_entry *entries, size_t count) {
  for (size_t i = 0; entries && i < count; i++) {
    free(entries[i].session);
    free(entries[i].reason);
    free(entries[i].error);
  }
  free(entries);
}

/* One more (zeroed) entry at the end of *entries; NULL when out of memory. */
static struct ns_gc_entry *gc_entry_add(struct ns_gc_entry **entries, size_t *count) {
  struct ns_gc_entry *grown = realloc(*entries, (*count + 1) * sizeof(*grown));
  if (!grown)
    return NULL;
  *entries = grown;
  memset(&grown[*count], 0, sizeof(grown[0]));
  return &grown[(*count)++];
}

/* The cgroups of sessions of any project whose directory went without a destroy: the holder
 * has ended itself (it watches its socket's file), leaving its cgroups empty. */
static int gc_orphan_cgroups(bool dry_run, struct ns_gc_entry **entries, size_t *count,
                             struct cordon_error **err) {
  struct confine_cgroup_orphan *found = NULL;
  size_t n = 0;
  if (confine_cgroups_sweep(CGROUP_PREFIX, dry_run, &found, &n, err) < 0)
    return -1;
  int r = 0;
  for (size_t i = 0; i < n; i++) {
    struct ns_gc_entry *g = gc_entry_add(entries, count);
    if (!g) {
      r = cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "gc");
      break;
    }
    const char *base = strrchr(found[i].dir, '/');
    g->session = strdup(base ? base + 1 + strlen(CGROUP_PREFIX) : found[i].dir);
    if (asprintf(&g->reason, "its directory %s is gone (its sandbox ended), its cgroup %s is empty",
                 found[i].owner, found[i].dir) < 0)
      g->reason = NULL;
    g->error = steal_ptr(&found[i].error);
    g->removed = !dry_run && !g->error;
  }
  confine_cgroup_orphans_free(found, n);
  return r;
}

/* The private runtime directories (socket, secret, environment) of sessions, of any project
 * and backend, whose directory went without a destroy. */
static int gc_runtime_dirs(bool dry_run, struct ns_gc_entry **entries, size_t *count,
                           struct cordon_error **err) {
  char **gone = NULL;
  if (rundir_gc(dry_run, &gone, err) < 0) {
    strv_free(gone);
    return -1;
  }
  int r = 0;
  for (size_t i = 0; gone[i]; i++) {
    struct ns_gc_entry *g = gc_entry_add(entries, count);
    if (!g) {
      r = cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "gc");
      break;
    }
    const char *base = strrchr(gone[i], '/');
    g->session = strdup(base ? base + 1 : gone[i]);
    if (asprintf(&g->reason, "its directory %s is gone, its runtime directory goes too", gone[i]) <
        0)
      g->reason = NULL;
    g->removed = !dry_run;
  }
  strv_free(gone);
  return r;
}

int ns_gc(struct cordon_context *ctx, const struct cordon_registry *reg, bool dry_run,
          struct ns_gc_entry **entries, size_t *count, struct cordon_error **err) {
  *entries = NULL;
  *count = 0;
  char **ids = NULL;
  if (cordon_session_list(ctx, &ids, err) < 0)
    return -1;
  char boot[64];
  fs_boot_id(boot, sizeof(boot));
  int r = 0;
  for (size_t i = 0; ids[i] && r == 0; i++) {
    struct cordon_session *s = NULL;
    struct cordon_error *e = NULL;
    if (cordon_session_open(ctx, reg, ids[i], &s, &e) < 0) {
      cordon_error_free(e); /* not ours to judge: `session destroy` names its problem */
      continue;
    }
    /* Another backend's session: its impl is not ours to read. */
    const struct ns_impl *impl = s->backend == &cordon_backend_ns ? s->impl : NULL;
    if (!impl || !impl->one_shot || impl->owner_pid <= 0 ||
        (!strcmp(impl->owner_boot, boot) &&
         proc_start_time(impl->owner_pid) == impl->owner_start)) {
      cordon_session_close(s);
      continue;
    }
    struct ns_gc_entry *g = gc_entry_add(entries, count);
    if (!g) {
      cordon_session_close(s);
      r = cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "gc");
      break;
    }
    g->session = strdup(ids[i]);
    if (asprintf(&g->reason, "the cordon process that made it for one command (pid %d) is gone",
                 (int)impl->owner_pid) < 0)
      g->reason = NULL;
    if (dry_run) {
      cordon_session_close(s);
      continue;
    }
    if (cordon_session_destroy(s, &e) < 0) {
      g->error = strdup(e && e->message ? e->message : "destroy failed");
      cordon_error_free(e);
    } else {
      g->removed = true;
    }
  }
  cordon_strv_free(ids);
  if (r == 0)
    r = gc_orphan_cgroups(dry_run, entries, count, err);
  return r < 0 ? r : gc_runtime_dirs(dry_run, entries, count, err);
}
