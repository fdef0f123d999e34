/* An example backend plugin: a plain host directory, like `worktree` without git, loaded at
 * run time from CORDON_PLUGIN_PATH. It shows the whole contract a plugin meets: one exported
 * entry point returning the backend and the ABI version it was built against, and the policy
 * features it enforces (none: cordon refuses to hand it --ro, --hide, limits or a network class
 * unless enforcement is waived). It reuses cordon's own helpers (linked statically into this
 * object) for the workspace and the runner. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cordon/backend.h>

#include "protocol/workspace.h"
#include "exec/runner.h"

static int example_available(const struct cordon_backend *self, char **reason) {
  return 1;
}

static int example_create(struct cordon_session *s, const struct cordon_manifest *m,
                          struct cordon_error **err) {
  if (m->repo || m->workspace)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                            "the example backend makes its own directory");
  if (asprintf(&s->workspace, "%s/example-workspace", s->state_dir) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "workspace");
  if (mkdir(s->workspace, 0755) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "%s", s->workspace);
  free(s->root);
  s->root = strdup(s->workspace);
  s->backend_state = strdup("{\"kind\":\"example\"}");
  return workspace_write_manifest_files(s->workspace, m, err);
}

static int example_attach(struct cordon_session *s, struct cordon_error **err) {
  struct stat st;
  if (stat(s->workspace, &st) < 0)
    return cordon_error_set(err, CORDON_ERR_NOT_FOUND, errno, "%s", s->workspace);
  return 0;
}

static int example_nothing(struct cordon_session *s, struct cordon_error **err) {
  return 0;
}

static int example_read(struct cordon_session *s, const char *path, unsigned char **data,
                        size_t *length, struct cordon_error **err) {
  return workspace_read(s->workspace, path, data, length, err);
}

static int example_write(struct cordon_session *s, const char *path, const void *data,
                         size_t length, unsigned mode, struct cordon_error **err) {
  return workspace_write(s->workspace, path, data, length, mode, err);
}

static int example_ls(struct cordon_session *s, const char *path, struct cordon_dirent **entries,
                      size_t *count, struct cordon_error **err) {
  return workspace_ls(s->workspace, path, entries, count, err);
}

static int example_exec(struct cordon_session *s, const struct cordon_exec_request *req,
                        struct cordon_exec_result *res, struct cordon_error **err) {
  if (req->cwd && req->cwd[0] == '/')
    return cordon_error_set(err, CORDON_ERR_DENIED, 0, "cwd %s is outside the workspace", req->cwd);
  char *cwd = NULL;
  if (asprintf(&cwd, "%s/%s", s->workspace, req->cwd ? req->cwd : "") < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "cwd");
  struct exec_spec spec = {
      .argv = req->argv,
      .cwd = cwd,
      .envp = req->env,
      .stdin_data = req->stdin_data,
      .stdin_length = req->stdin_length,
      .max_output = req->max_output,
      .timeout = req->timeout,
  };
  int r = exec_run(&spec, res, err);
  free(cwd);
  return r;
}

static const struct cordon_backend example_backend = {
    .abi_version = CORDON_BACKEND_ABI_VERSION,
    .name = "example",
    .summary = "example plugin: a host directory, no isolation",
    .capabilities = CORDON_CAP_FILE_RW | CORDON_CAP_EXEC,
    .tier = CORDON_TIER_NONE,
    .enforces = 0, /* it confines nothing; its default egress is therefore open */
    .available = example_available,
    .create = example_create,
    .attach = example_attach,
    .destroy = example_nothing,
    .shutdown = example_nothing,
    .read = example_read,
    .write = example_write,
    .ls = example_ls,
    .exec = example_exec,
};

__attribute__((visibility("default"))) const struct cordon_backend *
cordon_plugin_entry(uint32_t *abi_version);

const struct cordon_backend *cordon_plugin_entry(uint32_t *abi_version) {
  *abi_version = CORDON_BACKEND_ABI_VERSION;
  return &example_backend;
}
