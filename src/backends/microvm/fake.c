/* The fake monitor: deterministic and in-process, for tests of everything above the shim
 * (session state, workspace, snapshots, exit codes, the CLI). Boot starts nothing and only
 * records that it happened; exec runs the command ON THE HOST, as the caller, in the workspace
 * (a guest path under the workspace root is mapped to the host directory), through the same
 * process runner as worktree. It isolates nothing: `cordon backends` says so when it is the
 * chosen monitor. KVM asked of it is still checked, so the refusal rules can be tested here. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/microvm/microvm.h"
#include "base/cleanup.h"
#include "base/fs.h"
#include "exec/runner.h"

#define FAKE_STATE "{\"monitor\":\"fake\"}"

static int fake_preflight(const struct microvm_config *cfg, struct microvm_preflight *out,
                          struct cordon_error **err) {
  int r = 0;
  out->accel = MICROVM_ACCEL_TCG; /* it emulates nothing; never claims KVM unasked */
  if (cfg && cfg->accel == MICROVM_ACCEL_KVM) {
    r = microvm_preflight_kvm(out);
    out->accel = MICROVM_ACCEL_KVM;
  }
  return r < 0 ? cordon_error_set(err, CORDON_ERR_SYSTEM, -r, "preflight") : 0;
}

static int fake_boot(const struct microvm_config *cfg, struct microvm_vm *vm,
                     struct cordon_error **err) {
  (void)cfg;
  vm->monitor = &microvm_monitor_fake;
  vm->vmm_pid = 0;
  vm->state = strdup(FAKE_STATE);
  return vm->state ? 0 : cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "fake boot");
}

static int fake_attach(const struct microvm_config *cfg, const char *state, struct microvm_vm *vm,
                       struct cordon_error **err) {
  (void)state;
  return fake_boot(cfg, vm, err);
}

/* The workspace-relative form of the request's working directory: NULL/"" and relative paths
 * as they are, a guest path at or under the workspace root without that root. Anything else
 * would need a guest filesystem, which the fake does not have. */
static int guest_cwd(const struct microvm_config *cfg, const char *cwd, const char **rel,
                     struct cordon_error **err) {
  *rel = cwd ? cwd : "";
  if ((*rel)[0] != '/')
    return 0;
  const char *root = cfg->root ? cfg->root : MICROVM_DEFAULT_ROOT;
  size_t n = strlen(root);
  while (n > 1 && root[n - 1] == '/')
    n--;
  if (strncmp(cwd, root, n) == 0 && (cwd[n] == 0 || cwd[n] == '/')) {
    *rel = cwd + n + (cwd[n] == '/');
    return 0;
  }
  return cordon_error_set(err, CORDON_ERR_DENIED, 0,
                          "working directory %s: the fake monitor has no guest filesystem "
                          "outside the workspace",
                          cwd);
}

static int fake_exec(struct microvm_vm *vm, const struct microvm_config *cfg,
                     const struct cordon_exec_request *req, struct cordon_exec_result *res,
                     struct cordon_error **err) {
  (void)vm;
  const char *rel = NULL;
  if (guest_cwd(cfg, req->cwd, &rel, err) < 0)
    return -1;
  _cleanup_close_ int root = open(cfg->workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root < 0)
    return cordon_error_set(err, CORDON_ERR_NOT_FOUND, errno, "workspace %s", cfg->workspace);
  _cleanup_close_ int dir =
      fs_open_beneath(root, rel, O_PATH | O_DIRECTORY, 0, "the workspace", err);
  if (dir < 0)
    return cordon_error_prefix(err, "working directory");
  char link[64], cwd[PATH_MAX];
  snprintf(link, sizeof(link), "/proc/self/fd/%d", dir);
  ssize_t n = readlink(link, cwd, sizeof(cwd) - 1);
  if (n < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "working directory");
  cwd[n] = 0;
  struct exec_spec spec = exec_spec_from_request(req, cwd);
  return exec_run(&spec, res, err);
}

static int fake_shutdown(struct microvm_vm *vm, struct cordon_error **err) {
  (void)vm;
  (void)err;
  return 0; /* every exec's process tree is killed when it ends: nothing keeps running */
}

const struct microvm_monitor microvm_monitor_fake = {
    .name = "fake",
    .summary = "no isolation, for tests: commands run on the host in the workspace",
    .preflight = fake_preflight,
    .boot = fake_boot,
    .attach = fake_attach,
    .exec = fake_exec,
    .shutdown = fake_shutdown,
};
