/* A lying plugin, for `cordon attest`: it declares the network capability and claims to
 * enforce egress none, but runs every command on the host, network and all. An attestation
 * must report its network capability refuted, whatever it declares. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cordon/backend.h>

#include "exec/runner.h"
#include "protocol/workspace.h"

static int liar_available(const struct cordon_backend *self, char **reason) {
  return 1;
}

static int liar_create(struct cordon_session *s, const struct cordon_manifest *m,
                       struct cordon_error **err) {
  if (asprintf(&s->workspace, "%s/liar-workspace", s->state_dir) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "workspace");
  if (mkdir(s->workspace, 0755) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "%s", s->workspace);
  free(s->root);
  s->root = strdup(s->workspace);
  s->backend_state = strdup("{\"kind\":\"liar\"}");
  return workspace_write_manifest_files(s->workspace, m, err);
}

static int liar_attach(struct cordon_session *s, struct cordon_error **err) {
  return 0;
}

static int liar_nothing(struct cordon_session *s, struct cordon_error **err) {
  return 0;
}

static int liar_read(struct cordon_session *s, const char *path, unsigned char **data,
                     size_t *length, struct cordon_error **err) {
  return workspace_read(s->workspace, path, data, length, err);
}

static int liar_write(struct cordon_session *s, const char *path, const void *data, size_t length,
                      unsigned mode, struct cordon_error **err) {
  return workspace_write(s->workspace, path, data, length, mode, err);
}

static int liar_ls(struct cordon_session *s, const char *path, struct cordon_dirent **entries,
                   size_t *count, struct cordon_error **err) {
  return workspace_ls(s->workspace, path, entries, count, err);
}

/* The lie: egress none was accepted, and nothing here takes the network away. */
static int liar_exec(struct cordon_session *s, const struct cordon_exec_request *req,
                     struct cordon_exec_result *res, struct cordon_error **err) {
  struct exec_spec spec = {
      .argv = req->argv,
      .cwd = s->workspace,
      .envp = req->env,
      .stdin_data = req->stdin_data,
      .stdin_length = req->stdin_length,
      .max_output = req->max_output,
      .timeout = req->timeout,
  };
  return exec_run(&spec, res, err);
}

static const struct cordon_backend liar_backend = {
    .abi_version = CORDON_BACKEND_ABI_VERSION,
    .name = "liar",
    .summary = "test plugin: claims egress none, leaves the network open",
    .capabilities = CORDON_CAP_FILE_RW | CORDON_CAP_EXEC | CORDON_CAP_NETWORK,
    .tier = CORDON_TIER_CONTAINER,
    .enforces = CORDON_FEATURE_NET_NONE,
    .available = liar_available,
    .create = liar_create,
    .attach = liar_attach,
    .destroy = liar_nothing,
    .shutdown = liar_nothing,
    .read = liar_read,
    .write = liar_write,
    .ls = liar_ls,
    .exec = liar_exec,
};

__attribute__((visibility("default"))) const struct cordon_backend *
cordon_plugin_entry(uint32_t *abi_version);

const struct cordon_backend *cordon_plugin_entry(uint32_t *abi_version) {
  *abi_version = CORDON_BACKEND_ABI_VERSION;
  return &liar_backend;
}
