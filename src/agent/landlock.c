/* The landlock mechanism: unprivileged confinement of the agent on the host itself. A Landlock
 * ruleset only adds rights, beneath the trees it names, so this mechanism grants read+execute
 * on the system trees and allow_ro, everything on the project, allow_rw and a private tmp, and
 * denies the rest of the filesystem; it cannot take rights back beneath the writable project,
 * so read-only and hidden paths there (`.cordon/` too) are listed as NOT enforced rather than
 * pretended. Then no_new_privs, cordon's seccomp filter, and exec. The pure decisions sit at
 * the top (landlock.h), the system calls below. */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

#include "agent/agent-exec.h"
#include "agent/landlock.h"
#include "agent/mechanism.h"
#include "base/cleanup.h"
#include "base/fs.h"
#include "base/strv.h"
#include "base/syscalls.h"
#include "confine/seccomp.h"

#define READ_EXEC (AGENT_LL_EXECUTE | AGENT_LL_READ_FILE | AGENT_LL_READ_DIR)
#define DEVICE_RW (AGENT_LL_READ_FILE | AGENT_LL_WRITE_FILE | AGENT_LL_IOCTL_DEV)

/* Trees every program needs to load and run; their absence on a host is fine. */
static const char *const system_trees[] = {"/bin",    "/sbin", "/lib", "/lib32", "/lib64",
                                           "/libx32", "/usr",  "/etc", "/opt",   "/proc"};
/* Devices a program may open for writing without reaching anything of the host's. */
static const char *const rw_devices[] = {"/dev/null",    "/dev/zero", "/dev/full", "/dev/random",
                                         "/dev/urandom", "/dev/tty",  "/dev/ptmx", "/dev/pts"};

static uint64_t fs_rights_of_abi(int abi) {
  uint64_t rights = (AGENT_LL_MAKE_SYM << 1) - 1; /* ABI 1: bits 0..12 */
  if (abi >= 2)
    rights |= AGENT_LL_REFER;
  if (abi >= 3)
    rights |= AGENT_LL_TRUNCATE;
  if (abi >= 5)
    rights |= AGENT_LL_IOCTL_DEV;
  return rights;
}

void agent_landlock_handled_for(int abi, const char *net, struct agent_landlock_handled *out) {
  out->fs = fs_rights_of_abi(abi);
  /* Landlock's network rights cover TCP ports only: with no port granted, no TCP at all. */
  out->net = (abi >= 4 && net && strcmp(net, "open") != 0)
                 ? (AGENT_LL_NET_BIND_TCP | AGENT_LL_NET_CONNECT_TCP)
                 : 0;
  out->scoped = abi >= 6 ? (AGENT_LL_SCOPE_ABSTRACT_UNIX_SOCKET | AGENT_LL_SCOPE_SIGNAL) : 0;
}

static int grant_push(struct agent_landlock_grant **grants, size_t *count, size_t *capacity,
                      const char *path, uint64_t access, bool optional, struct cordon_error **err) {
  if (*count == *capacity) {
    size_t grown = *capacity ? *capacity * 2 : 32;
    struct agent_landlock_grant *bigger = realloc(*grants, grown * sizeof(**grants));
    if (!bigger)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "landlock rules");
    *grants = bigger;
    *capacity = grown;
  }
  (*grants)[(*count)++] = (struct agent_landlock_grant){path, access, optional};
  return 0;
}

int agent_landlock_grants(const struct agent_policy *policy, const char *tmp_dir, int abi,
                          struct agent_landlock_grant **out, size_t *count,
                          struct cordon_error **err) {
  uint64_t all = fs_rights_of_abi(abi);
  _cleanup_free_ struct agent_landlock_grant *grants = NULL;
  size_t n = 0, capacity = 0;
  int r = 0;
  for (size_t i = 0; r == 0 && i < ARRAY_SIZE(system_trees); i++)
    r = grant_push(&grants, &n, &capacity, system_trees[i], READ_EXEC, true, err);
  for (size_t i = 0; r == 0 && i < ARRAY_SIZE(rw_devices); i++)
    r = grant_push(&grants, &n, &capacity, rw_devices[i], DEVICE_RW & all, true, err);
  for (char **p = policy->allow_ro; r == 0 && p && *p; p++)
    r = grant_push(&grants, &n, &capacity, *p, READ_EXEC, false, err);
  if (r == 0)
    r = grant_push(&grants, &n, &capacity, policy->project, all, false, err);
  for (char **p = policy->allow_rw; r == 0 && p && *p; p++)
    r = grant_push(&grants, &n, &capacity, *p, all, false, err);
  if (r == 0 && tmp_dir)
    r = grant_push(&grants, &n, &capacity, tmp_dir, all, false, err);
  if (r < 0)
    return r;
  *out = steal_ptr(&grants);
  *count = n;
  return 0;
}

/* path == tree or path beneath tree (both absolute and canonical). */
static bool path_within(const char *path, const char *tree) {
  size_t n = strlen(tree);
  if (n == 1 && tree[0] == '/')
    return true;
  return strncmp(path, tree, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

int agent_landlock_check_project(const struct agent_policy *policy, const char *tmp_base,
                                 struct cordon_error **err) {
  const char *project = policy->project;
  if (path_within(project, tmp_base))
    return cordon_error_set(err, CORDON_ERR_DENIED, 0,
                            "landlock: the project %s lies under %s, the shared tree where the "
                            "agent's private tmp is made; Landlock cannot keep them apart: move "
                            "the project, or use --mechanism ns, bwrap or gvisor",
                            project, tmp_base);
  for (char **p = policy->allow_rw; p && *p; p++)
    if (path_within(project, *p))
      return cordon_error_set(err, CORDON_ERR_DENIED, 0,
                              "landlock: the project %s lies under the writable grant %s: "
                              "Landlock would grant writes around the project too; grant a "
                              "tree beside it",
                              project, *p);
  if (path_within(tmp_base, project))
    return cordon_error_set(err, CORDON_ERR_DENIED, 0,
                            "landlock: the project %s contains %s, the tree of temporary files",
                            project, tmp_base);
  for (size_t i = 0; i < ARRAY_SIZE(system_trees); i++)
    if (path_within(system_trees[i], project))
      return cordon_error_set(err, CORDON_ERR_DENIED, 0,
                              "landlock: the project %s contains the system tree %s, which the "
                              "agent may only read",
                              project, system_trees[i]);
  return 0;
}

static int line_push(char ***lines, struct cordon_error **err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int line_push(char ***lines, struct cordon_error **err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *line = NULL;
  int n = vasprintf(&line, fmt, ap);
  va_end(ap);
  if (n < 0 || strv_push_take(lines, line) < 0) {
    free(n < 0 ? NULL : line);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "unenforced lines");
  }
  return 0;
}

int agent_landlock_unenforced_lines(const struct agent_policy *policy, int abi, char ***out,
                                    struct cordon_error **err) {
  _cleanup_(strv_freep) char **lines = NULL;
  int r = 0;
  for (char **p = policy->hidden_dirs; r == 0 && p && *p; p++)
    r = line_push(&lines, err, "hidden path %s/ is NOT enforced under landlock", *p);
  for (char **p = policy->hidden_files; r == 0 && p && *p; p++)
    r = line_push(&lines, err, "hidden path %s is NOT enforced under landlock", *p);
  for (char **p = policy->read_only; r == 0 && p && *p; p++)
    r = line_push(&lines, err, "read-only path %s is NOT enforced under landlock", *p);
  if (r == 0 && policy->agent_visible)
    r = line_push(&lines, err, "read-only path %s is NOT enforced under landlock",
                  policy->agent_visible);
  if (r == 0 && policy->tmp_bytes)
    r = line_push(&lines, err,
                  "the private /tmp's size cap (%llu bytes) is NOT enforced under landlock "
                  "(TMPDIR points at a private directory; /tmp itself is not writable)",
                  (unsigned long long)policy->tmp_bytes);
  const char *net = policy->net ? policy->net : "none";
  if (r == 0 && strcmp(net, "open") != 0)
    r = line_push(&lines, err,
                  "network '%s' is only partly enforced under landlock: every socket but "
                  "AF_UNIX is refused (loopback too)",
                  net);
  if (r == 0)
    r = line_push(&lines, err,
                  "connecting to unix sockets by path (a container engine's, a desktop "
                  "session's) is NOT restricted under landlock (kernel ABI %d)",
                  abi);
  if (r < 0)
    return r;
  if (!lines && strv_push_take(&lines, NULL) < 0) /* an empty vector, not NULL */
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "unenforced lines");
  *out = steal_ptr(&lines);
  return 0;
}

/* ---- system calls ---- */

#ifndef LANDLOCK_CREATE_RULESET_VERSION
#define LANDLOCK_CREATE_RULESET_VERSION (1U << 0)
#endif
#define AGENT_LL_RULE_PATH_BENEATH 1
#define AGENT_LL_RULE_NET_PORT 2

/* The kernel's struct landlock_ruleset_attr as of ABI 6; older kernels take a prefix. */
struct ll_ruleset_attr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;
  uint64_t scoped;
};
struct ll_path_beneath_attr {
  uint64_t allowed_access;
  int32_t parent_fd;
} __attribute__((packed));

static int landlock_abi(void) {
  long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return abi < 0 ? -errno : (int)abi;
}

/* Also refuses a project Landlock cannot confine (agent_landlock_check_project): before
 * anything is recorded or started, the same as a missing mechanism. */
static int landlock_preflight(const struct agent_policy *policy, struct cordon_error **err) {
  int abi = landlock_abi();
  if (abi < 0)
    return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, -abi,
                            "landlock: the kernel offers no Landlock (boot with lsm=landlock)");
  if (!confine_seccomp_prebuilt())
    return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0,
                            "landlock: cordon's seccomp filter is not built in");
  return policy ? agent_landlock_check_project(policy, AGENT_LANDLOCK_TMP_BASE, err) : 0;
}

static int landlock_unenforced(const struct agent_policy *policy, char ***out,
                               struct cordon_error **err) {
  int abi = landlock_abi();
  return agent_landlock_unenforced_lines(policy, abi < 0 ? 0 : abi, out, err);
}

static int add_grant(int ruleset, const struct agent_landlock_grant *grant,
                     struct cordon_error **err) {
  _cleanup_close_ int fd = open(grant->path, O_PATH | O_CLOEXEC);
  if (fd < 0) {
    if (grant->optional && errno == ENOENT)
      return 0;
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "landlock: %s", grant->path);
  }
  struct stat st;
  if (fstat(fd, &st) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "landlock: %s", grant->path);
  struct ll_path_beneath_attr rule = {
      .allowed_access =
          S_ISDIR(st.st_mode) ? grant->access : (grant->access & AGENT_LL_FILE_RIGHTS),
      .parent_fd = fd,
  };
  if (syscall(SYS_landlock_add_rule, ruleset, AGENT_LL_RULE_PATH_BENEATH, &rule, 0) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "landlock: a rule for %s", grant->path);
  return 0;
}

/* A ruleset fd (close-on-exec, as every Landlock fd) with every grant of the policy. */
static int build_ruleset(const struct agent_policy *policy, const char *tmp_dir, int abi,
                         struct cordon_error **err) {
  struct agent_landlock_handled handled;
  agent_landlock_handled_for(abi, policy->net, &handled);
  struct ll_ruleset_attr attr = {handled.fs, handled.net, handled.scoped};
  size_t size = abi >= 6 ? sizeof(attr) : abi >= 4 ? 2 * sizeof(uint64_t) : sizeof(uint64_t);
  _cleanup_close_ int ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0);
  if (ruleset < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "landlock: creating the ruleset");
  _cleanup_free_ struct agent_landlock_grant *grants = NULL;
  size_t count = 0;
  if (agent_landlock_grants(policy, tmp_dir, abi, &grants, &count, err) < 0)
    return -1;
  for (size_t i = 0; i < count; i++)
    if (add_grant(ruleset, &grants[i], err) < 0)
      return -1;
  return steal_fd(&ruleset);
}

/* The forked child: from here on only async-signal-safe calls, and never exec unconfined. */
static _Noreturn void confine_and_exec(int ruleset, const struct confine_seccomp_program *net,
                                       const char *cwd, const char *program,
                                       const char *const *argv, char *const *env) {
  const char *failed = "close_range";
  /* Only stdio reaches the agent, whatever the caller left open without O_CLOEXEC. */
  if (sys_close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) < 0 && errno != ENOSYS && errno != EINVAL)
    goto fail;
  failed = "chdir";
  if (chdir(cwd) < 0)
    goto fail;
  failed = "no_new_privs";
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
    goto fail;
  failed = "landlock_restrict_self";
  if (syscall(SYS_landlock_restrict_self, ruleset, 0) < 0)
    goto fail;
  failed = "seccomp";
  if (confine_seccomp_attach(confine_seccomp_prebuilt()) < 0)
    goto fail;
  failed = "the socket filter";
  if (net->filter && confine_seccomp_attach(net) < 0)
    goto fail;
  if (net->filter && agent_landlock_x32_socket_filter() &&
      confine_seccomp_attach(agent_landlock_x32_socket_filter()) < 0)
    goto fail;
  execve(program, (char *const *)argv, env);
  failed = "exec";
fail:;
  /* No stdio after fork: plain writes of static strings (strerrordesc_np allocates nothing). */
  int saved = errno;
  const char *what = strerrordesc_np(saved);
  const char *parts[] = {"cordon: agent (landlock): ", failed, " failed: ", what ? what : "?",
                         "\n"};
  for (size_t i = 0; i < ARRAY_SIZE(parts); i++)
    if (write(STDERR_FILENO, parts[i], strlen(parts[i])) < 0)
      break;
  errno = saved;
  _exit(errno == ENOENT ? 127 : 126);
}

static void release_program(struct confine_seccomp_program *program) {
  free(program->filter);
}

static int make_private_tmp(char **out, struct cordon_error **err) {
  char *dir = strdup(AGENT_LANDLOCK_TMP_BASE "/cordon-agent-XXXXXX");
  if (!dir)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "private tmp");
  if (!mkdtemp(dir)) { /* mkdtemp makes it 0700 */
    int e = errno;
    free(dir);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "landlock: making the private tmp");
  }
  *out = dir;
  return 0;
}

static int run_in_tmp(const struct agent_launch *launch, const char *tmp_dir, int abi,
                      int *exit_code, struct cordon_error **err) {
  const struct agent_policy *policy = launch->policy;
  const char *over[4];
  _cleanup_free_ char *tmpdir = NULL, *tmp = NULL, *temp = NULL;
  if (asprintf(&tmpdir, "TMPDIR=%s", tmp_dir) < 0 || asprintf(&tmp, "TMP=%s", tmp_dir) < 0 ||
      asprintf(&temp, "TEMP=%s", tmp_dir) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "environment");
  over[0] = tmpdir, over[1] = tmp, over[2] = temp, over[3] = NULL;
  _cleanup_(strv_freep) char **env =
      strv_env_merge((const char *const *)policy->env, (const char *const *)over);
  if (!env)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "environment");
  _cleanup_free_ char *program = NULL;
  if (agent_exec_resolve(launch->argv[0], strv_env_get((const char *const *)env, "PATH"), &program,
                         err) < 0)
    return -1;
  _cleanup_close_ int ruleset = build_ruleset(policy, tmp_dir, abi, err);
  if (ruleset < 0)
    return -1;
  _cleanup_(release_program) struct confine_seccomp_program net = {0};
  bool open_net = policy->net && !strcmp(policy->net, "open");
  if (!open_net && agent_landlock_net_filter(&net, err) < 0)
    return -1;
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "landlock: fork");
  if (pid == 0)
    confine_and_exec(ruleset, &net, policy->cwd ? policy->cwd : policy->project, program,
                     launch->argv, env);
  return agent_exec_wait(pid, exit_code, err);
}

static int landlock_run(const struct agent_launch *launch, int *exit_code,
                        struct cordon_error **err) {
  if (!launch->argv || !launch->argv[0])
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "landlock: no command to run");
  if (landlock_preflight(launch->policy, err) < 0)
    return -1;
  _cleanup_free_ char *tmp_dir = NULL;
  if (make_private_tmp(&tmp_dir, err) < 0)
    return -1;
  int r = run_in_tmp(launch, tmp_dir, landlock_abi(), exit_code, err);
  /* Best effort: the agent's exit code is the result; a tmp left behind is 0700 and named. */
  struct cordon_error *cleanup_err = NULL;
  if (fs_remove_tree(tmp_dir, &cleanup_err) < 0)
    cordon_error_free(cleanup_err);
  return r;
}

const struct agent_mechanism agent_mechanism_landlock = {
    .name = "landlock",
    .preflight = landlock_preflight,
    .unenforced = landlock_unenforced,
    .run = landlock_run,
};
