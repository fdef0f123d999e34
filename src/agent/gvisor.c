/* The gvisor mechanism: the agent runs under gVisor's `runsc` (its ptrace platform, which needs
 * no KVM), which intercepts every system call in a user-space kernel. The policy is lowered
 * into an OCI bundle (agent_gvisor_spec, pure) in a fresh 0700 directory with its own runsc
 * state root, run in the foreground, and removed afterwards. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/agent-exec.h"
#include "agent/gvisor.h"
#include "base/cleanup.h"
#include "base/fs.h"
#include "base/strv.h"

/* jansson's own scope-bound reference (json_auto_t's cleanup). */
#define _cleanup_json_ _cleanup_(json_decrefp)

const char *agent_gvisor_network(const char *net) {
  return net && !strcmp(net, "open") ? "host" : "none";
}

/* Append one mount; options is a NULL-terminated list. */
static int add_mount(json_t *mounts, const char *destination, const char *type, const char *source,
                     const char *const *options) {
  json_t *opts = json_array();
  for (size_t i = 0; opts && options[i]; i++)
    if (json_array_append_new(opts, json_string(options[i])) < 0)
      break;
  json_t *m = json_pack("{s:s, s:s, s:s, s:o*}", "destination", destination, "type", type, "source",
                        source, "options", opts);
  return m ? json_array_append_new(mounts, m) : -1;
}

static int bind_mount(json_t *mounts, const char *path, bool writable) {
  const char *const opts[] = {"rbind", writable ? "rw" : "ro", "nosuid", "nodev", NULL};
  return add_mount(mounts, path, "bind", path, opts);
}

static char *project_path(const char *project, const char *rel) {
  char *path = NULL;
  return asprintf(&path, "%s/%s", project, rel) < 0 ? NULL : path;
}

/* rel is tree or beneath it (project-relative, normalised). */
static bool path_within_rel(const char *rel, const char *tree) {
  size_t n = strlen(tree);
  return strncmp(rel, tree, n) == 0 && (rel[n] == '\0' || rel[n] == '/');
}

/* Inside the project, in the order the mounts must stack: the project, the read-only
 * re-binds, then the masks, then agent-visible on top of its masked parent. */
static int project_mounts(json_t *mounts, const struct agent_policy *policy,
                          const char *empty_file) {
  if (bind_mount(mounts, policy->project, true) < 0)
    return -1;
  for (char **p = policy->read_only; p && *p; p++) {
    _cleanup_free_ char *path = project_path(policy->project, *p);
    if (!path || bind_mount(mounts, path, false) < 0)
      return -1;
  }
  for (char **p = policy->hidden_dirs; p && *p; p++) {
    _cleanup_free_ char *path = project_path(policy->project, *p);
    /* No capabilities for the agent, so the mode holds: nothing in it can be listed or made.
     * The directory holding agent-visible keeps search rights so that mount is reachable. */
    bool holds_visible = policy->agent_visible && path_within_rel(policy->agent_visible, *p);
    const char *const opts[] = {
        "nosuid", "nodev", "noexec", holds_visible ? "mode=111" : "mode=000", "size=4k", NULL};
    if (!path || add_mount(mounts, path, "tmpfs", "tmpfs", opts) < 0)
      return -1;
  }
  for (char **p = policy->hidden_files; p && *p; p++) {
    _cleanup_free_ char *path = project_path(policy->project, *p);
    const char *const opts[] = {"bind", "ro", "nosuid", "nodev", "noexec", NULL};
    if (!path || add_mount(mounts, path, "bind", empty_file, opts) < 0)
      return -1;
  }
  if (policy->agent_visible) {
    _cleanup_free_ char *path = project_path(policy->project, policy->agent_visible);
    if (!path || bind_mount(mounts, path, false) < 0)
      return -1;
  }
  return 0;
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
  if (!mounts || add_mount(mounts, "/proc", "proc", "proc", proc_opts) < 0 ||
      add_mount(mounts, "/tmp", "tmpfs", "tmpfs", tmp_opts) < 0)
    return NULL;
  /* Masks first: the grants and the project are bound back in on top of them. */
  const char *const mask_opts[] = {"nosuid", "nodev", "noexec", "mode=755", "size=64k", NULL};
  for (char *const *m = params->masks; m && *m; m++)
    if (add_mount(mounts, *m, "tmpfs", "tmpfs", mask_opts) < 0)
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
  _cleanup_json_ json_t *args = json_array(), *env_json = json_array();
  if (!env || !args || !env_json)
    return NULL;
  for (size_t i = 0; launch->argv[i]; i++)
    if (json_array_append_new(args, json_string(launch->argv[i])) < 0)
      return NULL;
  for (size_t i = 0; env[i]; i++)
    if (json_array_append_new(env_json, json_string(env[i])) < 0)
      return NULL;
  /* Empty capability sets: uid 0 inside still cannot override file modes or mount. */
  return json_pack("{s:b, s:{s:I, s:I}, s:O, s:O, s:s, s:b, s:{s:[], s:[], s:[], s:[], s:[]}}",
                   "terminal", launch->tty, "user", "uid", (json_int_t)params->uid, "gid",
                   (json_int_t)params->gid, "args", args, "env", env_json, "cwd",
                   policy->cwd ? policy->cwd : policy->project, "noNewPrivileges", 1,
                   "capabilities", "bounding", "effective", "inheritable", "permitted", "ambient");
}

int agent_gvisor_spec(const struct agent_launch *launch, const struct agent_gvisor_params *params,
                      json_t **out, struct cordon_error **err) {
  if (!launch->argv || !launch->argv[0])
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "gvisor: no command to run");
  json_t *process = build_process(launch, params);
  json_t *mounts = process ? build_mounts(launch->policy, params) : NULL;
  json_t *namespaces = json_pack("[{s:s}, {s:s}, {s:s}, {s:s}]", "type", "pid", "type", "ipc",
                                 "type", "uts", "type", "mount");
  if (namespaces && strcmp(agent_gvisor_network(launch->policy->net), "host") != 0)
    json_array_append_new(namespaces, json_pack("{s:s}", "type", "network"));
  json_t *spec =
      (process && mounts && namespaces)
          ? json_pack("{s:s, s:o, s:{s:s, s:b}, s:s, s:o, s:{s:o}}", "ociVersion", "1.0.2",
                      "process", process, "root", "path", "/", "readonly", 1, "hostname",
                      "cordon-agent", "mounts", mounts, "linux", "namespaces", namespaces)
          : NULL;
  if (!spec) {
    /* json_pack's "o" steals even on failure, so only what it never saw is ours to drop. */
    if (!process || !mounts || !namespaces) {
      json_decref(process);
      json_decref(mounts);
      json_decref(namespaces);
    }
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "gvisor: building the OCI spec");
  }
  *out = spec;
  return 0;
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

/* Run argv with the caller's stdio; its exit code (or 128+signal). */
static int run_program(const char *const *argv, bool quiet, int *exit_code,
                       struct cordon_error **err) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "gvisor: fork");
  if (pid == 0) {
    if (quiet) {
      int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
      if (null >= 0)
        dup2(null, STDOUT_FILENO), dup2(null, STDERR_FILENO);
    }
    execv(argv[0], (char *const *)argv);
    _exit(127);
  }
  return agent_exec_wait(pid, exit_code, err);
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
  const char *const run[] = {runsc, root, "--platform=ptrace", network, "run", "--bundle", bundle,
                             id,    NULL};
  int r = run_program(run, false, exit_code, err);
  /* A sandbox that outlived its process (runsc killed) would keep the bundle busy. */
  int ignored;
  const char *const del[] = {runsc, root, "delete", "--force", id, NULL};
  run_program(del, true, &ignored, NULL);
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
