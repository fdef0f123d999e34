/* The `gvisor` backend: a session is a gVisor sandbox (`runsc`, ptrace platform: no KVM needed)
 * whose kernel is gVisor's user-space Sentry, not the host's. Everything the sandbox needs on
 * the host lives in the session's runtime directory (protocol/rundir.h), never in the project:
 *
 *   state/     runsc's state root (--root)
 *   bundle/    config.json (spec.c); its root is shared (shared_rootfs: empty, read-only: mount
 *              points and the merged-usr links, the system directories bound over it read-only)
 *   control/   the status records of execs, bound at GVISOR_CONTROL_TARGET
 *
 * and, shared by every session (shared_rootfs, shared_file), in cordon's runtime directory: the
 * rootfs skeleton, the sandbox's /etc/passwd and /etc/group, and the empty file bound over hidden
 * files.
 *
 * The files there are written atomically but not durably (no fsync: the runtime directory holds
 * nothing that outlives the sandbox, and each fsync costs a cold run milliseconds).
 *
 * An exec is `runsc exec` of cordon-gvisor-exec (helper.c), which runs the command as the
 * sandbox user, kills its whole tree at its end or timeout, and reports how it ended in a
 * status record; the exit code is taken from that record, never from runsc. read, write, ls
 * and snapshot work on the host side of the workspace (protocol/workspace.c), so a snapshot's
 * id is the same as ns's for the same tree. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cordon/session.h>

#include "backends/builtin.h"
#include "backends/gvisor/gvisor-paths.h"
#include "backends/gvisor/spec.h"
#include "base/cleanup.h"
#include "base/fs.h"
#include "base/strv.h"
#include "base/syscalls.h"
#include "base/private-dirs.h"
#include "confine/policy.h"
#include "crypto/digest.h"
#include "confine/private.h"
#include "confine/resolve.h"
#include "exec/runner.h"
#include "protocol/persist.h"
#include "protocol/rundir.h"
#include "protocol/workspace.h"

/* How long runsc may take to start or remove a sandbox (ptrace platform, a loaded host). */
#define RUNSC_TIMEOUT 120.0
/* After an exec's own timeout, how long the host waits for the wrapper before killing runsc. */
#define HOST_TIMEOUT_GRACE 10.0
/* A one-shot exec boots its sandbox first (one_shot_argv): more grace for the boot. */
#define ONE_SHOT_BOOT_GRACE 30.0

static const char *find_runsc(void) {
  static const char *const candidates[] = {"/usr/bin/runsc", "/usr/sbin/runsc",
                                           "/usr/local/bin/runsc", "/usr/local/sbin/runsc"};
  const char *env = getenv("CORDON_RUNSC");
  if (env && *env)
    return access(env, X_OK) == 0 ? env : NULL;
  for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++)
    if (access(candidates[i], X_OK) == 0)
      return candidates[i];
  return NULL;
}

static const char *find_helper(void) {
  const char *env = getenv("CORDON_GVISOR_HELPER");
  if (env && *env)
    return env;
  if (access(CORDON_GVISOR_HELPER_BUILD, X_OK) == 0)
    return CORDON_GVISOR_HELPER_BUILD;
  return CORDON_GVISOR_HELPER_INSTALLED;
}

static int gvisor_available(const struct cordon_backend *self, char **reason) {
  (void)self;
  const char *why = NULL;
  if (!find_runsc())
    why = "runsc is not installed (Debian package runsc, or set CORDON_RUNSC)";
  else if (geteuid() != 0)
    why = "runsc needs root to build its sandbox";
  else if (access(find_helper(), X_OK) != 0)
    why = "cordon-gvisor-exec is not installed";
  if (!why)
    return 1;
  *reason = strdup(why);
  return 0;
}

static int session_path(struct cordon_session *s, const char *file, char **out,
                        struct cordon_error **err) {
  return rundir_path(cordon_context_state_dir(s->ctx), s->id, file, out, err);
}

/* The container's id in runsc's state root: the session id is unique in it. */
static char *container_id(struct cordon_session *s) {
  char *id = NULL;
  return asprintf(&id, "cordon-%s", s->id) < 0 ? NULL : id;
}

/* The head of every runsc command line: the binary, the session's state root, and the global
 * flags every call shares (runsc reads them at each call, so create, exec and delete agree).
 *
 * --ignore-cgroups: the spec sets no linux.resources (--memory and --cpus are refused, --pids is
 * the Sentry's RLIMIT_NPROC), so the cgroups runsc would make (one per v1 hierarchy, at the root
 * of each: a mkdir, joins, restores and an rmdir in every hierarchy, per sandbox) limit nothing;
 * they would only move the sandbox and its gofer out of the caller's cgroups, and out of
 * whatever limit an operator put on those. Without them runsc's tree stays where cordon started
 * it: in the caller's cgroups (and, for a one-shot run or an exec, in the runner's own cgroup,
 * exec/runner.c, which kills it whole). The isolation is the same or stronger, and a cold run is
 * tens of milliseconds shorter on a loaded host (docs/design.md, "gvisor's speed"). */
static int runsc_head(struct cordon_session *s, char ***argv, struct cordon_error **err) {
  const char *binary = find_runsc();
  if (!binary)
    return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0, "gvisor: runsc is not installed");
  _cleanup_free_ char *state = NULL, *root = NULL;
  if (session_path(s, "state", &state, err) < 0)
    return -1;
  if (asprintf(&root, "--root=%s", state) < 0 || strv_push(argv, binary) < 0 ||
      strv_push(argv, root) < 0 || strv_push(argv, "--ignore-cgroups") < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "runsc");
  return 0;
}

/* Run runsc with the session's state root; its stderr goes into the error. */
static int runsc(struct cordon_session *s, const char *const *args, bool quiet,
                 struct cordon_error **err) {
  _cleanup_(strv_freep) char **argv = NULL;
  if (runsc_head(s, &argv, err) < 0)
    return -1;
  for (const char *const *a = args; *a; a++)
    if (strv_push(&argv, *a) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "runsc");
  const char *const envp[] = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                              NULL};
  /* stdin an empty pipe, not the runner's /dev/null: runsc is never handed a host file
   * (docs/security.md, "The caller's stdio"). */
  struct exec_spec spec = {.argv = (const char *const *)argv,
                           .envp = envp,
                           .stdin_data = "",
                           .max_output = 4096,
                           .timeout = RUNSC_TIMEOUT};
  struct cordon_exec_result res = {0};
  if (exec_run(&spec, &res, err) < 0)
    return -1;
  int r = 0;
  if (res.exit_code != 0 && !quiet)
    r = cordon_error_set(err, CORDON_ERR_SYSTEM, 0, "session %s: runsc %s failed (exit %d): %.*s",
                         s->id, args[0], res.exit_code, (int)res.stderr_length,
                         res.stderr_data ? (const char *)res.stderr_data : "");
  else if (res.exit_code != 0)
    r = -1;
  cordon_exec_result_clear(&res);
  return r;
}

/* The reaper of a detached sandbox: a process of its own session, child subreaper, that starts
 * runsc, hands runsc's exit status back through status_fd, and then reaps whatever runsc left
 * (the sandbox and its gofer, reparented to it) until none remains. Without it they are
 * reparented to the host's init, and `runsc delete` polls a killed sandbox that stays a zombie
 * until init reaps it: seconds under an init that reaps lazily. It keeps no fd of cordon's (a
 * lock, a listening socket) beyond what runsc is given. Never returns. */
static void __attribute__((noreturn))
reap_detached(char **argv, int empty, int log, int status_fd) {
  setsid();
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0 || dup2(empty, 0) < 0 || dup2(log, 1) < 0 ||
      dup2(log, 2) < 0 || dup2(status_fd, 3) < 0)
    _exit(125);
  sys_close_range(4, ~0u, 0);
  pid_t runsc = fork();
  if (runsc == 0) {
    close(3);
    execv(argv[0], argv);
    _exit(127);
  }
  int status = 0;
  if (runsc < 0)
    status = 125 << 8;
  else
    while (waitpid(runsc, &status, 0) < 0 && errno == EINTR)
      ;
  ssize_t ignored = write(3, &status, sizeof(status));
  (void)ignored;
  close(3);
  signal(SIGINT, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
    ;
  _exit(0);
}

/* `runsc run --detach`: not through the process runner, which kills what a command leaves
 * behind; the sandbox must outlive the call, under its reaper (reap_detached). Its stderr goes
 * to a file in the runtime directory (the sandbox keeps the fds it was given, so a pipe would
 * never reach its end). */
static int runsc_detached(struct cordon_session *s, int rundir, const char *const *args,
                          struct cordon_error **err) {
  _cleanup_(strv_freep) char **argv = NULL;
  if (runsc_head(s, &argv, err) < 0)
    return -1;
  int r = 0;
  for (const char *const *a = args; r == 0 && *a; a++)
    r = strv_push(&argv, *a);
  if (r < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "runsc");
  _cleanup_close_ int log =
      openat(rundir, "runsc.log", O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (log < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "session %s: runsc log", s->id);
  /* stdin is an empty pipe of its own, stdout and stderr the log, never a shared file: runsc
   * hands its stdio to the sandbox's user (fchown), which made the host's /dev/null nobody's. */
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "pipe");
  _cleanup_close_ int empty = pipefd[0];
  close(pipefd[1]);
  if (pipe2(pipefd, O_CLOEXEC) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "pipe");
  _cleanup_close_ int status_read = pipefd[0];
  pid_t reaper = fork();
  if (reaper < 0) {
    close(pipefd[1]);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "fork");
  }
  if (reaper == 0)
    reap_detached(argv, empty, log, pipefd[1]);
  close(pipefd[1]);
  /* runsc's exit status, within the bound; the reaper itself lives on with the sandbox. */
  int status = 0;
  struct pollfd p = {.fd = status_read, .events = POLLIN};
  int ready;
  while ((ready = poll(&p, 1, (int)(RUNSC_TIMEOUT * 1000))) < 0 && errno == EINTR)
    ;
  ssize_t n = ready > 0 ? read(status_read, &status, sizeof(status)) : -1;
  if (ready == 0) {
    kill(-reaper, SIGKILL); /* its session: runsc and what it started */
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ETIMEDOUT,
                            "session %s: runsc %s did not finish in %.0f s", s->id, args[2],
                            RUNSC_TIMEOUT);
  }
  if (n == (ssize_t)sizeof(status) && WIFEXITED(status) && WEXITSTATUS(status) == 0)
    return 0;
  char message[512] = {0};
  ssize_t m = pread(log, message, sizeof(message) - 1, 0);
  if (m > 0 && message[m - 1] == '\n')
    message[m - 1] = 0;
  return cordon_error_set(err, CORDON_ERR_SYSTEM, 0,
                          "session %s: runsc could not start the sandbox: %s", s->id,
                          m > 0 ? message : "no message");
}

/* ---- the bundle ---------------------------------------------------------------------------- */

/* mkdir -p of rel beneath dir (all components made by us, no link followed). */
static int mkdirs_beneath(const char *dir, const char *rel, struct cordon_error **err) {
  _cleanup_free_ char *copy = strdup(rel);
  if (!copy)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "rootfs");
  _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot open %s", dir);
  for (char *part = strtok(copy, "/"); part; part = strtok(NULL, "/")) {
    if (mkdirat(fd, part, 0755) < 0 && errno != EEXIST)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot create %s in %s", part, dir);
    int next = openat(fd, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot open %s in %s", part, dir);
    close(fd);
    fd = next;
  }
  return 0;
}

/* The rootfs: a mount point (or, for a merged-usr link like /bin -> usr/bin, the same link) for
 * each system directory present on the host; *binds gets the directories to bind and *plan one
 * line per entry ("d PATH" or "l PATH TARGET"), which names the tree. rootfs NULL: nothing is
 * made, only *binds and *plan filled. */
static int make_rootfs(const char *rootfs, const struct cordon_policy *policy, const char *root,
                       char ***binds, char ***plan, struct cordon_error **err) {
  if (rootfs && mkdir(rootfs, 0755) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot create %s", rootfs);
  const char *const *sys =
      policy->system_paths ? policy->system_paths : confine_default_system_paths;
  for (; *sys; sys++) {
    struct stat st;
    if ((*sys)[0] != '/' || lstat(*sys, &st) < 0)
      continue; /* only where it exists on the host */
    _cleanup_free_ char *at = NULL, *line = NULL;
    if (asprintf(&at, "%s%s", rootfs ? rootfs : "", *sys) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "rootfs");
    if (S_ISLNK(st.st_mode)) {
      char target[4096];
      ssize_t n = readlink(*sys, target, sizeof(target) - 1);
      if (n > 0 && target[0] != '/') { /* relative links only: they stay inside the root */
        target[n] = 0;
        if (asprintf(&line, "l %s %s", *sys, target) < 0 || strv_push(plan, line) < 0)
          return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "rootfs");
        if (rootfs && symlink(target, at) < 0)
          return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot create %s", at);
      }
      continue;
    }
    if (!S_ISDIR(st.st_mode))
      continue;
    if (asprintf(&line, "d %s", *sys) < 0 || strv_push(plan, line) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "rootfs");
    if ((rootfs && mkdirs_beneath(rootfs, *sys + 1, err) < 0) || strv_push(binds, *sys) < 0)
      return -1;
  }
  _cleanup_free_ char *root_line = NULL;
  if (asprintf(&root_line, "w %s", root) < 0 || strv_push(plan, root_line) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "rootfs");
  if (!rootfs)
    return 0;
  const char *const made[] = {"proc", "dev", "tmp", "home/sandbox", GVISOR_CONTROL_TARGET + 1,
                              NULL};
  for (const char *const *m = made; *m; m++)
    if (mkdirs_beneath(rootfs, *m, err) < 0)
      return -1;
  /* The wrapper is a file bound over a file: its mount point must exist (the root is read-only). */
  _cleanup_free_ char *helper = NULL;
  if (asprintf(&helper, "%s%s", rootfs, GVISOR_HELPER_TARGET) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "rootfs");
  _cleanup_close_ int helper_fd =
      open(helper, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0755);
  if (helper_fd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot create %s", helper);
  return mkdirs_beneath(rootfs, root + 1, err);
}

/* The rootfs is the same for every session with the same system directories and workspace path:
 * empty mount points and links, read-only to every sandbox (the spec's root is). It is made once
 * in cordon's runtime directory, as gvisor-rootfs-<digest of its plan> (made under a temporary
 * name, then renamed into place: a rootfs under its final name is whole), and shared; `cordon
 * gc` passes it by (not a session's name). Making and removing a dozen directories per session
 * cost a cold run tens of milliseconds on a loaded disk. *path gets the rootfs. */
static int shared_rootfs(const struct cordon_policy *policy, const char *root, char ***binds,
                         char **path, struct cordon_error **err) {
  _cleanup_(strv_freep) char **plan = NULL;
  if (make_rootfs(NULL, policy, root, binds, &plan, err) < 0)
    return -1;
  size_t length = 0;
  for (char **l = plan; l && *l; l++)
    length += strlen(*l) + 1;
  _cleanup_free_ char *text = calloc(length + 1, 1), *runtime = NULL, *hex = NULL;
  char digest[CRYPTO_SHA256_HEX_LEN + 1];
  if (!text)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "rootfs");
  for (char **l = plan; l && *l; l++)
    strcat(strcat(text, *l), "\n");
  if (crypto_sha256_hex(text, strlen(text), digest, err) < 0 ||
      private_runtime_dir(&runtime, err) < 0 || fs_random_hex(8, &hex, err) < 0)
    return -1;
  _cleanup_free_ char *final = NULL, *temp = NULL;
  if (asprintf(&final, "%s/gvisor-rootfs-%.32s", runtime, digest) < 0 ||
      asprintf(&temp, "%s.tmp-%s", final, hex) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "rootfs");
  struct stat st;
  if (lstat(final, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid()) {
    *path = steal_ptr(&final);
    return 0;
  }
  _cleanup_(strv_freep) char **ignored_binds = NULL, **ignored_plan = NULL;
  if (make_rootfs(temp, policy, root, &ignored_binds, &ignored_plan, err) < 0) {
    fs_remove_tree(temp, NULL);
    return -1;
  }
  if (rename(temp, final) < 0) {
    int e = errno;
    fs_remove_tree(temp, NULL);
    /* Another session made it first: theirs is whole, and the same. */
    if ((e != EEXIST && e != ENOTEMPTY) || lstat(final, &st) < 0 || !S_ISDIR(st.st_mode))
      return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "cannot create %s", final);
  }
  *path = steal_ptr(&final);
  return 0;
}

/* The policy's paths as the spec needs them: each resolved beneath the workspace (ns's and
 * docker's rules, confine/resolve.h: a path through a symlink that leaves the workspace is
 * refused, so no host tree is ever bound in through a planted link; a link that stays inside
 * gives its canonical target), hidden ones split by kind, and the directories between the
 * workspace root and each protected path, which the spec pins as mount points (a missing path
 * was refused already, by the hard-link check). */
struct policy_paths {
  char **read_only, **hidden_dirs, **hidden_files, **pinned;
};

static void policy_paths_clear(struct policy_paths *p) {
  strv_free(p->read_only);
  strv_free(p->hidden_dirs);
  strv_free(p->hidden_files);
  strv_free(p->pinned);
}

static int resolve_one(int ws_fd, const char *ws_real, const char *path, bool hidden,
                       struct policy_paths *out, char ***named, struct cordon_error **err) {
  const char *what = hidden ? "hidden path" : "read-only path";
  _cleanup_free_ char *norm = NULL;
  if (confine_normalize_workspace_path(path, what, &norm, err) < 0)
    return -1;
  struct confine_path rp = {0};
  if (confine_resolve_workspace_path(ws_fd, ws_real, norm, what, &rp, err) < 0)
    return -1;
  char ***list = !hidden                       ? &out->read_only
                 : rp.kind == CONFINE_KIND_DIR ? &out->hidden_dirs
                                               : &out->hidden_files;
  int r = strv_push(list, rp.path);
  if (r == 0 && named)
    r = strv_push(named, rp.path);
  confine_path_clear(&rp);
  return r < 0 ? cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "policy paths") : 0;
}

static int resolve_policy_paths(const char *workspace, const char *const *read_only,
                                const char *const *hidden, size_t n_policy_hidden,
                                struct policy_paths *out, struct cordon_error **err) {
  char ws_real[PATH_MAX];
  if (!realpath(workspace, ws_real))
    return cordon_error_set(err, CORDON_ERR_NOT_FOUND, errno, "workspace %s", workspace);
  _cleanup_close_ int ws_fd = open(ws_real, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (ws_fd < 0)
    return cordon_error_set(err, CORDON_ERR_NOT_FOUND, errno, "workspace %s", ws_real);
  for (const char *const *r = read_only; r && *r; r++)
    if (resolve_one(ws_fd, ws_real, *r, false, out, NULL, err) < 0)
      return -1;
  /* As on ns, the policy's own paths, canonical, are checked for other names (hard links);
   * cordon's private directories (after them in hidden) are not walked: nothing inside can name
   * them to link them. */
  _cleanup_(strv_freep) char **named = NULL;
  for (size_t i = 0; hidden && hidden[i]; i++)
    if (resolve_one(ws_fd, ws_real, hidden[i], true, out, i < n_policy_hidden ? &named : NULL,
                    err) < 0)
      return -1;
  if (confine_check_hard_links(ws_fd, (const char *const *)out->read_only,
                               (const char *const *)named, err) < 0)
    return -1;
  return confine_protected_ancestors((const char *const *)out->read_only,
                                     (const char *const *)out->hidden_dirs,
                                     (const char *const *)out->hidden_files, &out->pinned, err);
}

/* The ns and docker rules for the workspace's protected paths: no read-only or hidden file stays
 * reachable through a hard link (checked on the canonical paths: resolve_policy_paths), the
 * workspace is none of cordon's private directories, and
 * cordon's own state (the project's .cordon/, the keys, the state home, other projects' .cordon/
 * beneath the workspace) is always hidden. *hidden gets the policy's hidden paths and those.
 * owned: the workspace is the one cordon made in the session's state directory. */
static int protect_workspace(struct cordon_session *s, const struct cordon_policy *p, bool owned,
                             char ***hidden, struct cordon_error **err) {
  _cleanup_close_ int ws = open(s->workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (ws < 0)
    return cordon_error_set(err, CORDON_ERR_NOT_FOUND, errno, "workspace %s", s->workspace);
  _cleanup_(strv_freep) char **private_dirs = NULL, **beneath = NULL;
  if (confine_private_set(cordon_context_state_dir(s->ctx), &private_dirs, err) < 0 ||
      /* The owned workspace lives in the session's state directory: cordon made it. */
      (!owned && confine_check_not_private(s->workspace, "workspace",
                                           (const char *const *)private_dirs, err) < 0) ||
      confine_private_beneath((const char *const *)private_dirs, s->workspace, true, &beneath,
                              err) < 0)
    return -1;
  for (const char *const *h = p->hidden; h && *h; h++)
    if (strv_push(hidden, *h) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "hidden paths");
  for (char **b = beneath; b && *b; b++) {
    bool covered = false;
    for (const char *const *h = p->hidden; h && *h; h++)
      covered = covered || confine_path_covers(*h, *b);
    if (!covered && strv_push(hidden, *b) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "hidden paths");
  }
  return 0;
}

/* A small read-only file every sandbox binds the same: made once in cordon's runtime directory as
 * PREFIX-<digest of its mode and content> (written under a temporary name, renamed into place)
 * and shared, as the rootfs is: a file made and removed per session is an inode made and evicted
 * per cold run, which costs milliseconds on a loaded disk. One whose type, owner, mode or size
 * does not match is replaced. *path gets it. */
static int shared_file(const char *prefix, const char *content, mode_t mode, char **path,
                       struct cordon_error **err) {
  _cleanup_free_ char *keyed = NULL, *runtime = NULL, *name = NULL;
  char digest[CRYPTO_SHA256_HEX_LEN + 1];
  size_t length = strlen(content);
  if (asprintf(&keyed, "%o\n%s", (unsigned)mode, content) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "%s", prefix);
  if (crypto_sha256_hex(keyed, strlen(keyed), digest, err) < 0 ||
      private_runtime_dir(&runtime, err) < 0)
    return -1;
  if (asprintf(&name, "%s-%.32s", prefix, digest) < 0 || asprintf(path, "%s/%s", runtime, name) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "%s", prefix);
  struct stat st;
  if (lstat(*path, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
      (st.st_mode & 07777) == mode && (size_t)st.st_size == length && st.st_nlink == 1)
    return 0;
  _cleanup_close_ int dir = open(runtime, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot open %s", runtime);
  return fs_write_replace_at(dir, name, content, length, mode, false, err);
}

/* /etc/passwd and /etc/group of the sandbox: only its own ids, the sandbox user named cordon
 * with its private home (the same names ns gives); the same for every session (shared_file). */
static int identity_files(char **passwd, char **group, struct cordon_error **err) {
  _cleanup_free_ char *users = NULL, *groups = NULL;
  if (asprintf(&users,
               "root:x:0:0:root:/root:/usr/sbin/nologin\n"
               "cordon:x:%u:%u:cordon sandbox:%s:/bin/sh\n"
               "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
               CONFINE_SANDBOX_UID, CONFINE_SANDBOX_GID, CORDON_SANDBOX_HOME) < 0)
    users = NULL;
  if (asprintf(&groups, "root:x:0:\ncordon:x:%u:\nnogroup:x:65534:\n", CONFINE_SANDBOX_GID) < 0)
    groups = NULL;
  if (!users || !groups)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "passwd");
  if (shared_file("gvisor-passwd", users, 0444, passwd, err) < 0 ||
      shared_file("gvisor-group", groups, 0444, group, err) < 0)
    return -1;
  return 0;
}

static int write_bundle(struct cordon_session *s, const struct cordon_manifest *m, int rundir,
                        struct cordon_error **err) {
  _cleanup_free_ char *bundle = NULL, *rootfs = NULL, *control = NULL, *empty = NULL;
  if (session_path(s, "bundle", &bundle, err) < 0 || session_path(s, "control", &control, err) < 0)
    return -1;

  if (mkdirat(rundir, "bundle", 0700) < 0 || mkdirat(rundir, "state", 0700) < 0 ||
      mkdirat(rundir, "control", 0700) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "session %s: runtime directory", s->id);
  /* Bound, read-only, over hidden files: mode 0, so reading one is refused, as on ns. */
  if (shared_file("gvisor-empty", "", 0, &empty, err) < 0)
    return -1;
  /* The control directory belongs to uid 0 of the sandbox (the wrapper), mode 0700: the command,
   * uid 1000, can neither write a status record nor replace one. */
  if (fchownat(rundir, "control", GVISOR_WRAPPER_HOST_ID, GVISOR_WRAPPER_HOST_ID,
               AT_SYMLINK_NOFOLLOW) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "session %s: control directory", s->id);
  struct stat owner;
  if (stat(s->workspace, &owner) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "workspace %s", s->workspace);
  if (owner.st_uid == GVISOR_WRAPPER_HOST_ID || owner.st_gid == GVISOR_WRAPPER_HOST_ID)
    return cordon_error_set(err, CORDON_ERR_UNSUPPORTED, 0,
                            "gvisor: the workspace %s is owned by the overflow id %u, which the "
                            "sandbox keeps for its wrapper",
                            s->workspace, GVISOR_WRAPPER_HOST_ID);
  _cleanup_free_ char *passwd = NULL, *group = NULL;
  if (identity_files(&passwd, &group, err) < 0)
    return -1;
  _cleanup_(strv_freep) char **binds = NULL, **hidden = NULL;
  _cleanup_(policy_paths_clear) struct policy_paths paths = {0};
  if (protect_workspace(s, &m->policy, !m->workspace, &hidden, err) < 0 ||
      shared_rootfs(&m->policy, s->root, &binds, &rootfs, err) < 0 ||
      resolve_policy_paths(s->workspace, m->policy.read_only, (const char *const *)hidden,
                           strv_length(m->policy.hidden), &paths, err) < 0)
    return -1;
  struct gvisor_spec_params params = {
      .rootfs = rootfs,
      .workspace = s->workspace,
      .root = s->root,
      .control = control,
      .helper = find_helper(),
      .empty_file = empty,
      .system_binds = binds,
      .policy = &m->policy,
      .pinned = paths.pinned,
      .read_only = paths.read_only,
      .hidden_dirs = paths.hidden_dirs,
      .hidden_files = paths.hidden_files,
      .owner_uid = owner.st_uid,
      .owner_gid = owner.st_gid,
      .passwd_file = passwd,
      .group_file = group,
  };
  _cleanup_(json_decrefp) json_t *spec = NULL;
  if (gvisor_spec(&params, &spec, err) < 0)
    return -1;
  /* A one-shot session's spec gets its process from its one exec (one_shot_argv), in this
   * process: kept here, it is written once, by that exec, with the command (it was written here,
   * read back there and written again). */
  if (s->one_shot) {
    json_decref(s->impl);
    s->impl = steal_ptr(&spec);
    return 0;
  }
  _cleanup_free_ char *text = json_dumps(spec, JSON_INDENT(2));
  _cleanup_close_ int bundle_fd = openat(rundir, "bundle", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (!text || bundle_fd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno ? errno : ENOMEM, "bundle");
  return fs_write_replace_at(bundle_fd, "config.json", text, strlen(text), 0600, false, err);
}

/* ---- sessions ------------------------------------------------------------------------------- */

static int refuse_unsupported(const struct cordon_manifest *m, struct cordon_error **err) {
  if (m->user_root)
    return cordon_error_set(err, CORDON_ERR_UNSUPPORTED, 0,
                            "gvisor: --user root is not offered (commands run as uid 0 of gVisor "
                            "with no capabilities)");
  if (m->n_volumes)
    return cordon_error_set(err, CORDON_ERR_UNSUPPORTED, 0, "gvisor: volumes are not offered");
  if (m->monitor)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "gvisor: --monitor is for microvm only");
  if (m->repo)
    return cordon_error_set(err, CORDON_ERR_UNSUPPORTED, 0,
                            "gvisor: give a workspace, not a repository");
  return 0;
}

static int start_sandbox(struct cordon_session *s, const struct cordon_manifest *m,
                         const char *snapshot_id, struct cordon_error **err) {
  free(s->root);
  s->root = strdup(m->root ? m->root : "/workspace");
  free(s->home);
  s->home = strdup(CORDON_SANDBOX_HOME);
  _cleanup_free_ char *id = container_id(s), *bundle = NULL, *network = NULL;
  if (!s->root || !s->home || !id)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "session");
  json_t *state = json_pack("{s:s, s:b}", "container", id, "owned_workspace", !m->workspace);
  if (state && snapshot_id)
    json_object_set_new(state, "from_snapshot", json_string(snapshot_id));
  if (state && s->one_shot) {
    json_object_set_new(state, "one_shot", json_true());
    json_object_set_new(state, "network", json_string(gvisor_network(m->policy.egress)));
  }
  /* Every exec's wrapper sets the file-size limit (the default when none is given, as on ns)
   * as the command's RLIMIT_FSIZE, which gVisor enforces (see wrapper_argv). */
  if (state)
    json_object_set_new(
        state, "fsize",
        json_integer((json_int_t)(m->policy.limits.fsize_bytes ? m->policy.limits.fsize_bytes
                                                               : CORDON_DEFAULT_FSIZE_BYTES)));
  /* Every exec's wrapper sets it as the command's RLIMIT_NPROC (see wrapper_argv). */
  if (state && m->policy.limits.pids)
    json_object_set_new(state, "pids", json_integer((json_int_t)m->policy.limits.pids));
  free(s->backend_state);
  s->backend_state = state ? json_dumps(state, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
  json_decref(state);
  if (!s->backend_state)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "session state");
  if (workspace_write_manifest_files(s->workspace, m, err) < 0)
    return -1;
  /* The session's own runtime directory: the session layer may have made it already (for the
   * environment of --env), and owns its fd. */
  int session_run = session_rundir(s, true, err);
  if (session_run < 0)
    return -1;
  _cleanup_close_ int rundir = openat(session_run, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (rundir < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "runtime directory");
  if (write_bundle(s, m, rundir, err) < 0 || session_path(s, "bundle", &bundle, err) < 0)
    return -1;
  if (s->one_shot)
    return 0; /* booted by its one exec, with the command (one_shot_argv) */
  if (asprintf(&network, "--network=%s", gvisor_network(m->policy.egress)) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "runsc");
  const char *const run[] = {"--platform=ptrace", network, "run", "--detach",
                             "--bundle",          bundle,  id,    NULL};
  return runsc_detached(s, rundir, run, err);
}

static int gvisor_create(struct cordon_session *s, const struct cordon_manifest *m,
                         struct cordon_error **err) {
  if (refuse_unsupported(m, err) < 0)
    return -1;
  if (m->workspace) {
    char resolved[4096];
    struct stat st;
    if (!realpath(m->workspace, resolved) || stat(resolved, &st) < 0 || !S_ISDIR(st.st_mode))
      return cordon_error_set(err, CORDON_ERR_NOT_FOUND, errno ? errno : ENOTDIR, "workspace %s",
                              m->workspace);
    s->workspace = strdup(resolved);
  } else if (asprintf(&s->workspace, "%s/workspace", s->state_dir) < 0) {
    s->workspace = NULL;
  } else if (mkdir(s->workspace, 0755) < 0 || chmod(s->workspace, 0755) < 0) {
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot create %s", s->workspace);
  }
  if (!s->workspace)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "workspace");
  return start_sandbox(s, m, NULL, err);
}

static int gvisor_resume(struct cordon_session *s, const struct cordon_manifest *m,
                         const char *snapshot_id, struct cordon_error **err) {
  if (refuse_unsupported(m, err) < 0)
    return -1;
  if (m->workspace)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                            "a session resumed from a snapshot gets a fresh workspace");
  if (asprintf(&s->workspace, "%s/workspace", s->state_dir) < 0) {
    s->workspace = NULL;
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "workspace");
  }
  if (workspace_restore(s, snapshot_id, s->workspace, err) < 0)
    return -1;
  return start_sandbox(s, m, snapshot_id, err);
}

static int gvisor_attach(struct cordon_session *s, struct cordon_error **err) {
  free(s->home);
  s->home = strdup(CORDON_SANDBOX_HOME);
  struct stat st;
  if (stat(s->workspace, &st) < 0 || !S_ISDIR(st.st_mode))
    return cordon_error_set(err, CORDON_ERR_NOT_FOUND, errno ? errno : ENOTDIR, "workspace %s",
                            s->workspace);
  return s->home ? 0 : cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "home");
}

/* Whether runsc's state root holds anything (a container that was started and not removed). */
static bool state_root_used(struct cordon_session *s) {
  _cleanup_free_ char *state = NULL;
  if (session_path(s, "state", &state, NULL) < 0)
    return true;
  return fs_dir_has_entries(state);
}

/* Kill and delete the sandbox; a sandbox already gone is fine. A one-shot sandbox that `runsc
 * run` removed at its end costs no further runsc call. */
static int stop_sandbox(struct cordon_session *s) {
  _cleanup_free_ char *id = container_id(s);
  if (!id)
    return -1;
  if (!state_root_used(s))
    return 0;
  const char *const del[] = {"delete", "--force", id, NULL};
  runsc(s, del, true, NULL);
  return 0;
}

static int gvisor_shutdown(struct cordon_session *s, struct cordon_error **err) {
  (void)err;
  return stop_sandbox(s);
}

/* The one-shot spec write_bundle kept, if its exec never came. */
static void gvisor_release(struct cordon_session *s) {
  json_decref(s->impl);
  s->impl = NULL;
}

static int gvisor_destroy(struct cordon_session *s, struct cordon_error **err) {
  stop_sandbox(s);
  /* The owned workspace lives in the state directory, which the library removes. */
  return rundir_remove(cordon_context_state_dir(s->ctx), s->id, err);
}

static int gvisor_read(struct cordon_session *s, const char *path, unsigned char **data,
                       size_t *length, struct cordon_error **err) {
  return workspace_read(s->workspace, path, data, length, err);
}

static int gvisor_write(struct cordon_session *s, const char *path, const void *data, size_t length,
                        unsigned mode, struct cordon_error **err) {
  return workspace_write(s->workspace, path, data, length, mode, err);
}

static int gvisor_ls(struct cordon_session *s, const char *path, struct cordon_dirent **entries,
                     size_t *count, struct cordon_error **err) {
  return workspace_ls(s->workspace, path, entries, count, err);
}

static int gvisor_snapshot(struct cordon_session *s, char **snapshot_id,
                           struct cordon_error **err) {
  return workspace_snapshot(s, NULL, snapshot_id, err);
}

/* ---- exec ---------------------------------------------------------------------------------- */

/* Whether the session's sandbox is booted by its exec (start_sandbox recorded it). */
static bool is_one_shot(struct cordon_session *s) {
  json_t *state = s->backend_state ? json_loads(s->backend_state, 0, NULL) : NULL;
  bool one_shot = json_is_true(json_object_get(state, "one_shot"));
  json_decref(state);
  return one_shot;
}

/* The status record (helper.c's format): "KIND N". Missing: the wrapper never finished. */
static int read_status(struct cordon_session *s, const char *token, char kind[16], int *value,
                       struct cordon_error **err) {
  _cleanup_free_ char *control = NULL;
  if (session_path(s, "control", &control, err) < 0)
    return -1;
  _cleanup_close_ int dir = open(control, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "session %s: control directory", s->id);
  _cleanup_close_ int fd = openat(dir, token, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  char buf[64] = {0};
  ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
  unlinkat(dir, token, 0);
  kind[0] = 0;
  if (n <= 0 || sscanf(buf, "%15s %d", kind, value) != 2)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, 0,
                            "session %s: the command's status was not reported (the sandbox "
                            "stopped or was killed?)",
                            s->id);
  return 0;
}

/* The wrapper's command line (helper.c): status record, timeout, cwd, environment, the pids
 * limit, then the command. */
static int wrapper_argv(struct cordon_session *s, const struct cordon_exec_request *req,
                        const char *token, char ***argv, struct cordon_error **err) {
  _cleanup_free_ char *status = NULL, *timeout = NULL, *cwd = NULL;
  const char *c = req->cwd;
  if (!c || !*c)
    cwd = strdup(s->root);
  else if (c[0] == '/')
    cwd = strdup(c);
  else if (asprintf(&cwd, "%s/%s", s->root, c) < 0)
    cwd = NULL;
  if (!cwd || asprintf(&status, "%s/%s", GVISOR_CONTROL_TARGET, token) < 0 ||
      asprintf(&timeout, "%lld", (long long)(req->timeout > 0 ? req->timeout * 1000 + 0.5 : 0)) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "exec");
  const char *const head[] = {GVISOR_HELPER_TARGET, status, timeout, cwd, NULL};
  int r = 0;
  for (const char *const *h = head; r == 0 && *h; h++)
    r = strv_push(argv, *h);
  for (const char *const *e = req->env; r == 0 && e && *e; e++)
    r = strv_push(argv, "--env") < 0 ? -1 : strv_push(argv, *e);
  /* --pids: gVisor's Sentry enforces RLIMIT_NPROC on the sandbox user's processes (a host pids
   * cgroup would count the Sentry's own threads and stubs, and the Sentry dies at the limit
   * instead of fork failing). All execs run as that user, so the limit spans the session. */
  json_t *state = s->backend_state ? json_loads(s->backend_state, 0, NULL) : NULL;
  json_int_t pids = json_integer_value(json_object_get(state, "pids"));
  json_int_t fsize = json_integer_value(json_object_get(state, "fsize"));
  json_decref(state);
  char nproc[32], fsize_text[32];
  snprintf(nproc, sizeof(nproc), "%lld", (long long)pids);
  snprintf(fsize_text, sizeof(fsize_text), "%lld", (long long)fsize);
  if (r == 0 && pids > 0)
    r = strv_push(argv, "--nproc") < 0 ? -1 : strv_push(argv, nproc);
  if (r == 0 && fsize > 0)
    r = strv_push(argv, "--fsize") < 0 ? -1 : strv_push(argv, fsize_text);
  r = r < 0 ? r : strv_push(argv, "--");
  for (const char *const *a = req->argv; r == 0 && *a; a++)
    r = strv_push(argv, *a);
  return r < 0 ? cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "exec") : 0;
}

/* The wrapper runs as uid 0 of the sandbox with the capabilities it needs to become the sandbox
 * user for the command and to kill the command's tree: more than the command, so it alone
 * writes the record. */
static const char *const wrapper_caps[] = {"CAP_SETUID", "CAP_SETGID", "CAP_KILL", NULL};

/* In a running sandbox: `runsc exec` of the wrapper. */
static int exec_argv(struct cordon_session *s, char *const *wrapper, char ***argv,
                     struct cordon_error **err) {
  _cleanup_free_ char *id = container_id(s);
  if (!id)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "exec");
  int r = strv_push(argv, "exec") < 0 || strv_push(argv, "--user") < 0 || strv_push(argv, "0:0") < 0
              ? -1
              : 0;
  for (const char *const *c = wrapper_caps; r == 0 && *c; c++)
    r = strv_push(argv, "--cap") < 0 ? -1 : strv_push(argv, *c);
  r = r < 0 ? r : strv_push(argv, id);
  for (char *const *w = wrapper; r == 0 && *w; w++)
    r = strv_push(argv, *w);
  return r < 0 ? cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "exec") : 0;
}

/* A one-shot session has no sandbox yet: the wrapper becomes the container's own process (pid 1,
 * uid 0 with the wrapper's capabilities) and `runsc run` boots the sandbox with it, in the
 * foreground. No pause process, no second runsc call: one boot, as `runsc run` of the bundle. */
static int one_shot_argv(struct cordon_session *s, char *const *wrapper, char ***argv,
                         struct cordon_error **err) {
  _cleanup_free_ char *id = container_id(s), *bundle = NULL, *network = NULL, *config = NULL;
  if (session_path(s, "bundle", &bundle, err) < 0)
    return -1;
  json_t *state = s->backend_state ? json_loads(s->backend_state, 0, NULL) : NULL;
  const char *net = json_string_value(json_object_get(state, "network"));
  int r = !id || asprintf(&network, "--network=%s", net ? net : "none") < 0 ||
                  asprintf(&config, "%s/config.json", bundle) < 0
              ? -1
              : 0;
  json_decref(state);
  if (r < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "exec");
  /* The spec write_bundle kept (a one-shot session is made and run by one process); else the
   * bundle's, should one have been written. */
  json_error_t jerr;
  _cleanup_(json_decrefp) json_t *spec =
      s->impl ? steal_ptr(&s->impl) : json_load_file(config, 0, &jerr);
  json_t *process = json_object_get(spec, "process");
  json_t *args = json_array(), *caps = json_array();
  for (char *const *w = wrapper; args && *w; w++)
    json_array_append_new(args, json_string(*w));
  for (const char *const *c = wrapper_caps; caps && *c; c++)
    json_array_append_new(caps, json_string(*c));
  json_t *sets = json_object_get(process, "capabilities");
  if (!process || !sets || !args || !caps) {
    json_decref(args);
    json_decref(caps);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, 0, "session %s: bundle %s", s->id, config);
  }
  json_object_set_new(process, "args", args);
  json_object_set(sets, "bounding", caps);
  json_object_set(sets, "effective", caps);
  json_object_set_new(sets, "permitted", caps);
  _cleanup_free_ char *text = json_dumps(spec, JSON_INDENT(2));
  _cleanup_close_ int bundle_fd = open(bundle, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (!text || bundle_fd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno ? errno : ENOMEM, "bundle");
  if (fs_write_replace_at(bundle_fd, "config.json", text, strlen(text), 0600, false, err) < 0)
    return -1;
  const char *const run[] = {"--platform=ptrace", network, "run", "--bundle", bundle, id, NULL};
  for (const char *const *a = run; *a; a++)
    if (strv_push(argv, *a) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "exec");
  return 0;
}

/* A one-shot run is over once its status record is whole: "KIND N\n", written in one write
 * after the wrapper killed the command's tree, its output already in the runner's pipes. runsc
 * then shuts its sandbox down gracefully, 8 to 21 ms here that the caller would wait for; the
 * runner kills the runner's cgroup instead (runsc, the Sentry, the gofer: --ignore-cgroups
 * keeps them all there) and waits until it is empty, so nothing of the run is left when the
 * exec returns. An inotify watch on the control directory wakes the check. */
struct record_watch {
  int inotify;
  int control;
  const char *token;
};

static bool record_whole(void *data) {
  const struct record_watch *w = data;
  char events[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
  while (read(w->inotify, events, sizeof(events)) > 0)
    ;
  _cleanup_close_ int fd = openat(w->control, w->token, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  char line[64];
  ssize_t n = fd >= 0 ? read(fd, line, sizeof(line)) : -1;
  return n > 0 && line[n - 1] == '\n';
}

/* The watch, or -1 (the run then ends with runsc, as it would anyway). */
static int record_watch_open(struct cordon_session *s, struct record_watch *w) {
  _cleanup_free_ char *control = NULL;
  if (session_path(s, "control", &control, NULL) < 0)
    return -1;
  w->control = open(control, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  w->inotify = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (w->control < 0 || w->inotify < 0 ||
      inotify_add_watch(w->inotify, control, IN_MODIFY | IN_CLOSE_WRITE | IN_ONLYDIR) < 0) {
    fs_close_reset(&w->control);
    fs_close_reset(&w->inotify);
    return -1;
  }
  return 0;
}

static int gvisor_exec(struct cordon_session *s, const struct cordon_exec_request *req,
                       struct cordon_exec_result *res, struct cordon_error **err) {
  double started = fs_now();
  _cleanup_free_ char *token = NULL;
  _cleanup_(strv_freep) char **argv = NULL;
  if (fs_random_hex(8, &token, err) < 0 || runsc_head(s, &argv, err) < 0)
    return -1;
  _cleanup_(strv_freep) char **wrapper = NULL;
  bool one_shot = is_one_shot(s);
  if (wrapper_argv(s, req, token, &wrapper, err) < 0 ||
      (one_shot ? one_shot_argv(s, wrapper, &argv, err) : exec_argv(s, wrapper, &argv, err)) < 0)
    return -1;
  const char *const envp[] = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                              NULL};
  struct exec_spec spec = {
      .argv = (const char *const *)argv,
      .envp = envp,
      /* Never /dev/null (the runner's default): runsc hands its stdio to the sandbox's user
       * (fchown), and the host's /dev/null became nobody's. An empty stdin is an empty pipe. */
      .stdin_data = req->stdin_data ? req->stdin_data : "",
      .stdin_length = req->stdin_length,
      .max_output = req->max_output,
      .timeout = req->timeout > 0
                     ? req->timeout + HOST_TIMEOUT_GRACE + (one_shot ? ONE_SHOT_BOOT_GRACE : 0)
                     : 0,
  };
  struct record_watch watch = {.inotify = -1, .control = -1, .token = token};
  struct exec_early_end early = {.check = record_whole, .data = &watch};
  if (one_shot && record_watch_open(s, &watch) == 0) {
    early.fd = watch.inotify;
    spec.early_end = &early;
  }
  int ran = exec_run(&spec, res, err);
  fs_close_reset(&watch.inotify);
  fs_close_reset(&watch.control);
  if (ran < 0)
    return -1;
  /* Killed whole: what runsc kept of the sandbox is its state root, no process; removing it
   * here spares the destroy a `runsc delete` (state_root_used). */
  _cleanup_free_ char *state = NULL;
  if (early.ended_early && session_path(s, "state", &state, NULL) == 0)
    fs_remove_tree(state, NULL);
  bool host_killed = res->timed_out;
  char kind[16];
  int value = 0;
  if (read_status(s, token, kind, &value, err) < 0 && !host_killed) {
    cordon_exec_result_clear(res);
    return -1;
  }
  res->timed_out = false;
  res->term_signal = 0;
  res->exec_failure = 0;
  if (!strcmp(kind, "identity")) {
    cordon_exec_result_clear(res);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, value,
                            "session %s: the exec wrapper could not become the sandbox user",
                            s->id);
  }
  if (!strcmp(kind, "chdir")) {
    cordon_exec_result_clear(res);
    return cordon_error_set(err, CORDON_ERR_NOT_FOUND, value, "cannot run %s in %s", req->argv[0],
                            req->cwd && *req->cwd ? req->cwd : s->root);
  }
  if (host_killed || !strcmp(kind, "timeout")) {
    res->timed_out = true;
    res->exit_code = 137;
    res->term_signal = 9;
  } else if (!strcmp(kind, "signal")) {
    res->exit_code = 128 + value;
    res->term_signal = value;
  } else if (!strcmp(kind, "execfail") && (value == 126 || value == 127)) {
    res->exit_code = value;
    res->exec_failure = value;
  } else {
    res->exit_code = value & 0xff;
  }
  res->duration = fs_now() - started;
  return 0;
}

/* --memory stays refused: runsc can put the sandbox in a host memory cgroup (linux.cgroupsPath
 * with linux.resources.memory, v1 here), but gVisor's memory is the Sentry's, so the host's OOM
 * killer picks the Sentry (runsc-sandbox) itself: the whole sandbox dies and the command's
 * status record with it, rather than the command alone ending with SIGKILL; the Sentry's
 * oom_score_adj cannot be lowered from outside its user namespace, and this runsc has no
 * memory limit of its own. */
const struct cordon_backend cordon_backend_gvisor = {
    .abi_version = CORDON_BACKEND_ABI_VERSION,
    .name = "gvisor",
    .summary = "gVisor sandbox (runsc, ptrace platform): a userspace kernel between the "
               "command and the host",
    .capabilities = CORDON_CAP_FILE_RW | CORDON_CAP_EXEC | CORDON_CAP_NETWORK | CORDON_CAP_SNAPSHOT,
    .tier = CORDON_TIER_CONTAINER,
    .enforces = CORDON_FEATURE_READ_ONLY_PATHS | CORDON_FEATURE_HIDDEN_PATHS |
                CORDON_FEATURE_NET_LOOPBACK | CORDON_FEATURE_PIDS | CORDON_FEATURE_FSIZE,
    .available = gvisor_available,
    .create = gvisor_create,
    .resume = gvisor_resume,
    .attach = gvisor_attach,
    .destroy = gvisor_destroy,
    .release = gvisor_release,
    .shutdown = gvisor_shutdown,
    .read = gvisor_read,
    .write = gvisor_write,
    .ls = gvisor_ls,
    .exec = gvisor_exec,
    .snapshot = gvisor_snapshot,
};
