/* The gvisor mechanism: the agent runs under gVisor's `runsc` (its ptrace platform, which needs
 * no KVM), which intercepts every system call in a user-space kernel. The policy is lowered
 * into an OCI bundle (agent_gvisor_spec, pure) in a fresh 0700 directory with its own runsc
 * state root, run in the foreground, and removed afterwards.
 *
 * runsc gets the gvisor backend's global flags (backends/gvisor/gvisor.c, runsc_head):
 * --ignore-cgroups, as the spec sets no linux.resources, so the cgroups runsc would make at the
 * root of every v1 hierarchy limit nothing and would only move the sandbox and its gofer out of
 * the caller's cgroups (and out of any limit an operator put on those). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/agent-exec.h"
#include "agent/gvisor.h"
#include "base/cleanup.h"
#include "base/fs.h"
#include "base/strv.h"
#include "confine/oci.h"
#include "confine/policy.h"
#include "exec/pipe-relay.h"
#include "exec/pty.h"

/* jansson's own scope-bound reference (json_auto_t's cleanup). */
#define _cleanup_json_ _cleanup_(json_decrefp)

const char *agent_gvisor_network(const char *net) {
  return oci_runsc_network(net && !strcmp(net, "open"));
}

static int bind_mount(json_t *mounts, const char *path, bool writable) {
  return oci_add_bind(mounts, path, path, writable);
}

/* Inside the project, the shared lowering (confine/oci.h, as the gvisor backend's): the project,
 * the pinned ancestors of its protected paths and the read-only re-binds, the masks, then
 * agent-visible on top of its masked parent. */
static int project_mounts(json_t *mounts, const struct agent_policy *policy,
                          const char *empty_file) {
  _cleanup_(strv_freep) char **pinned = NULL;
  if (confine_protected_ancestors((const char *const *)policy->read_only,
                                  (const char *const *)policy->hidden_dirs,
                                  (const char *const *)policy->hidden_files, &pinned, NULL) < 0)
    return -1;
  const struct oci_workspace ws = {
      .host = policy->project,
      .inside = policy->project,
      .pinned = pinned,
      .read_only = policy->read_only,
      .hidden_dirs = policy->hidden_dirs,
      .hidden_files = policy->hidden_files,
      .empty_file = empty_file,
      .visible = policy->agent_visible,
  };
  return oci_workspace_mounts(mounts, &ws);
}

static const char *const private_trees[] = {"/home", "/root",  "/run",    "/srv",
                                            "/mnt",  "/media", "/var/tmp"};
/* Top-level trees programs need to read: never masked. */
static const char *const system_tops[] = {"/bin",    "/sbin", "/lib", "/lib32", "/lib64",
                                          "/libx32", "/usr",  "/etc", "/opt",   "/proc",
                                          "/dev",    "/sys",  "/tmp", "/var",   "/boot"};

static bool listed(char *const *list, const char *name) {
  for (; list && *list; list++)
    if (!strcmp(*list, name))
      return true;
  return false;
}

/* Push the top-level directory of path ("/work" of "/work/a/b") unless listed or a system
 * tree; "/" itself has none. */
static int push_top(char ***masks, const char *path) {
  if (!path || path[0] != '/' || !path[1])
    return 0;
  const char *end = strchr(path + 1, '/');
  _cleanup_free_ char *top = strndup(path, end ? (size_t)(end - path) : strlen(path));
  if (!top)
    return -1;
  for (size_t i = 0; i < ARRAY_SIZE(system_tops); i++)
    if (!strcmp(top, system_tops[i]))
      return 0;
  return listed(*masks, top) ? 0 : strv_push(masks, top);
}

int agent_gvisor_mask_candidates(const struct agent_policy *policy, char ***out,
                                 struct cordon_error **err) {
  _cleanup_(strv_freep) char **masks = NULL;
  int r = 0;
  for (size_t i = 0; r == 0 && i < ARRAY_SIZE(private_trees); i++)
    r = strv_push(&masks, private_trees[i]);
  if (r == 0)
    r = push_top(&masks, policy->project);
  for (char **p = policy->allow_ro; r == 0 && p && *p; p++)
    r = push_top(&masks, *p);
  for (char **p = policy->allow_rw; r == 0 && p && *p; p++)
    r = push_top(&masks, *p);
  if (r < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "gvisor: masked trees");
  *out = steal_ptr(&masks);
  return 0;
}

static json_t *build_mounts(const struct agent_policy *policy,
                            const struct agent_gvisor_params *params) {
  const char *empty_file = params->empty_file;
  _cleanup_json_ json_t *mounts = json_array();
  char tmp_size[64];
  snprintf(tmp_size, sizeof(tmp_size), "size=%llu",
           (unsigned long long)(policy->tmp_bytes ? policy->tmp_bytes : 64ULL << 20));
  const char *const proc_opts[] = {"nosuid", "noexec", "nodev", NULL};
  const char *const tmp_opts[] = {"nosuid", "nodev", "mode=1777", tmp_size, NULL};
  if (!mounts || oci_add_mount(mounts, "/proc", "proc", "proc", proc_opts) < 0 ||
      oci_add_mount(mounts, "/tmp", "tmpfs", "tmpfs", tmp_opts) < 0)
    return NULL;
  /* Masks first: the grants and the project are bound back in on top of them. */
  const char *const mask_opts[] = {"nosuid", "nodev", "noexec", "mode=755", "size=64k", NULL};
  for (char *const *m = params->masks; m && *m; m++)
    if (oci_add_mount(mounts, *m, "tmpfs", "tmpfs", mask_opts) < 0)
      return NULL;
  for (char **p = policy->allow_ro; p && *p; p++)
    if (bind_mount(mounts, *p, false) < 0)
      return NULL;
  for (char **p = policy->allow_rw; p && *p; p++)
    if (bind_mount(mounts, *p, true) < 0)
      return NULL;
  if (project_mounts(mounts, policy, empty_file) < 0)
    return NULL;
  return steal_ptr(&mounts);
}

static json_t *build_process(const struct agent_launch *launch,
                             const struct agent_gvisor_params *params) {
  const struct agent_policy *policy = launch->policy;
  const char *const over[] = {"TMPDIR=/tmp", "TMP=/tmp", "TEMP=/tmp", NULL};
  _cleanup_(strv_freep) char **env = strv_env_merge((const char *const *)policy->env, over);
  if (!env)
    return NULL;
  return oci_process((const char *const *)launch->argv, (const char *const *)env,
                     policy->cwd ? policy->cwd : policy->project, params->uid, params->gid,
                     launch->tty);
}

int agent_gvisor_spec(const struct agent_launch *launch, const struct agent_gvisor_params *params,
                      json_t **out, struct cordon_error **err) {
  if (!launch->argv || !launch->argv[0])
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "gvisor: no command to run");
  json_t *process = build_process(launch, params);
  json_t *mounts = process ? build_mounts(launch->policy, params) : NULL;
  bool open = !strcmp(agent_gvisor_network(launch->policy->net), "host");
  return oci_spec(process, "/", "cordon-agent", mounts, oci_namespaces(false, open), out, err);
}

/* ---- running runsc ---- */

static int find_runsc(char **out, struct cordon_error **err) {
  if (agent_exec_resolve("runsc", getenv("PATH"), out, NULL) == 0)
    return 0;
  if (agent_exec_resolve("runsc", "/usr/local/sbin:/usr/sbin:/sbin", out, NULL) == 0)
    return 0;
  return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0,
                          "gvisor: runsc is not installed (Debian package runsc)");
}

static int gvisor_preflight(const struct agent_policy *policy, struct cordon_error **err) {
  (void)policy;
  _cleanup_free_ char *runsc = NULL;
  if (find_runsc(&runsc, err) < 0)
    return -1;
  if (geteuid() != 0)
    return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0,
                            "gvisor: runsc needs root to build its sandbox (run cordon as root, "
                            "or use --mechanism ns, bwrap or landlock)");
  return 0;
}

static int gvisor_unenforced(const struct agent_policy *policy, char ***out,
                             struct cordon_error **err) {
  (void)policy;
  *out = calloc(1, sizeof(char *)); /* everything in the policy is enforced */
  return *out ? 0 : cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "unenforced lines");
}

/* How runsc's stdio is given. runsc hands the stdio of a sandbox it starts to the sandbox's
 * user (fchown to gVisor's nobody, 65534): given the caller's own fds it changed the owner of
 * whatever they were on the host (the host's /dev/null under a test runner or a service, the
 * user's terminal, a file the output went to). So runsc only ever gets ends cordon made: the
 * slave of a pty of ours (relayed to the caller's terminal) or pipes of ours (relayed to the
 * caller's fds), or, for the quiet calls, pipes whose output is dropped. */
enum runsc_stdio { RUNSC_PIPES, RUNSC_TERMINAL, RUNSC_QUIET };

static void __attribute__((noreturn))
exec_child(const char *const *argv, const int fds[3], bool terminal) {
  for (int i = 0; i < 3; i++)
    if (dup2(fds[i], i) < 0)
      _exit(125);
  /* A session of its own with the pty as its terminal: a Ctrl-C the relay passes as a byte
   * becomes SIGINT to runsc, which forwards it to the agent (as at the caller's terminal). */
  if (terminal && (setsid() < 0 || ioctl(STDIN_FILENO, TIOCSCTTY, 0) < 0))
    _exit(125);
  execv(argv[0], (char *const *)argv);
  _exit(127);
}

/* Run argv with stdio of ours relayed to the caller's (never the caller's fds themselves);
 * its exit code (or 128+signal). */
static int run_program(const char *const *argv, enum runsc_stdio how, int *exit_code,
                       struct cordon_error **err) {
  struct exec_pty *pty = NULL;
  struct exec_pipe_relay *pipes = NULL;
  int fds[3];
  if (how == RUNSC_TERMINAL) {
    int size_fd = isatty(STDIN_FILENO) ? STDIN_FILENO : STDOUT_FILENO;
    if (exec_pty_open(STDIN_FILENO, STDOUT_FILENO, size_fd, &pty, err) < 0)
      return -1;
    fds[0] = fds[1] = fds[2] = exec_pty_slave(pty);
  } else {
    bool quiet = how == RUNSC_QUIET;
    if (exec_pipe_relay_open(quiet ? -1 : STDIN_FILENO, quiet ? -1 : STDOUT_FILENO,
                             quiet ? -1 : STDERR_FILENO, &pipes, err) < 0)
      return -1;
    exec_pipe_relay_child_fds(pipes, fds);
  }
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0)
    exec_child(argv, fds, how == RUNSC_TERMINAL);
  int r = -1;
  if (pid < 0) {
    cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "gvisor: fork");
  } else if ((pty ? exec_pty_start(pty, err) : exec_pipe_relay_start(pipes, err)) < 0) {
    kill(pid, SIGKILL);
    int ignored;
    agent_exec_wait(pid, &ignored, NULL);
  } else {
    r = agent_exec_wait(pid, exit_code, err);
  }
  exec_pty_free(pty);
  exec_pipe_relay_free(pipes);
  return r;
}

static int write_bundle(const struct agent_launch *launch, int bundle_fd, const char *empty_file,
                        struct cordon_error **err) {
  _cleanup_close_ int empty =
      openat(bundle_fd, "empty", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0);
  if (empty < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "gvisor: the bundle's empty file");
  _cleanup_(strv_freep) char **candidates = NULL, **masks = NULL;
  if (agent_gvisor_mask_candidates(launch->policy, &candidates, err) < 0)
    return -1;
  for (char **c = candidates; *c; c++) {
    struct stat st; /* a mask needs a real directory to cover (the root is read-only) */
    if (lstat(*c, &st) == 0 && S_ISDIR(st.st_mode) && strv_push(&masks, *c) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "gvisor: masked trees");
  }
  struct agent_gvisor_params params = {getuid(), getgid(), empty_file, masks};
  _cleanup_json_ json_t *spec = NULL;
  if (agent_gvisor_spec(launch, &params, &spec, err) < 0)
    return -1;
  _cleanup_free_ char *text = json_dumps(spec, JSON_INDENT(2));
  if (!text)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "gvisor: the OCI spec");
  return fs_write_atomic_at(bundle_fd, "config.json", text, strlen(text), 0600, err);
}

static int run_bundle(const struct agent_launch *launch, const char *bundle, int *exit_code,
                      struct cordon_error **err) {
  _cleanup_free_ char *runsc = NULL, *state = NULL, *empty = NULL, *id = NULL, *hex = NULL;
  if (find_runsc(&runsc, err) < 0 || fs_random_hex(8, &hex, err) < 0)
    return -1;
  if (asprintf(&state, "%s/state", bundle) < 0 || asprintf(&empty, "%s/empty", bundle) < 0 ||
      asprintf(&id, "cordon-agent-%s", hex) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "gvisor: bundle paths");
  _cleanup_close_ int bundle_fd = open(bundle, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (bundle_fd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "gvisor: %s", bundle);
  if (write_bundle(launch, bundle_fd, empty, err) < 0)
    return -1;
  _cleanup_free_ char *network = NULL, *root = NULL;
  if (asprintf(&network, "--network=%s", agent_gvisor_network(launch->policy->net)) < 0 ||
      asprintf(&root, "--root=%s", state) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "gvisor: runsc flags");
  const char *const run[] = {runsc,   root,  "--ignore-cgroups", "--platform=ptrace",
                             network, "run", "--bundle",         bundle,
                             id,      NULL};
  int r = run_program(run, launch->tty ? RUNSC_TERMINAL : RUNSC_PIPES, exit_code, err);
  /* A sandbox that outlived its process (runsc killed) would keep the bundle busy. `runsc run`
   * removes its container from the state root when it ends, so an empty state root costs no
   * further runsc start; killed before it recorded anything there, it has left nothing running
   * (agent-gvisor-host.bats kills it as it starts). */
  if (fs_dir_has_entries(state)) {
    int ignored;
    const char *const del[] = {runsc, root, "--ignore-cgroups", "delete", "--force", id, NULL};
    run_program(del, RUNSC_QUIET, &ignored, NULL);
  }
  return r;
}

static int gvisor_run(const struct agent_launch *launch, int *exit_code,
                      struct cordon_error **err) {
  if (gvisor_preflight(launch->policy, err) < 0)
    return -1;
  char bundle[] = "/tmp/cordon-gvisor-XXXXXX"; /* mkdtemp: 0700 */
  if (!mkdtemp(bundle))
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "gvisor: making the bundle directory");
  int r = run_bundle(launch, bundle, exit_code, err);
  struct cordon_error *cleanup_err = NULL;
  if (fs_remove_tree(bundle, &cleanup_err) < 0)
    cordon_error_free(cleanup_err); /* best effort: the agent's exit code is the result */
  return r;
}

const struct agent_mechanism agent_mechanism_gvisor = {
    .name = "gvisor",
    .preflight = gvisor_preflight,
    .unenforced = gvisor_unenforced,
    .run = gvisor_run,
};
