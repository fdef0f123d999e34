/* An effective manifest as the inputs of session creation (pure: the caller's environment is
 * passed in). Every confinement the effective manifest asks for is required (no waiver: a pool
 * never runs weaker than its contract), and credential variables are copied by name from the
 * caller's environment, never stored in any manifest, receipt or log. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/cleanup.h"
#include "base/strv.h"
#include "pool/internal.h"
#include "pool/pool.h"

void pool_session_inputs_clear(struct pool_session_inputs *in) {
  if (!in)
    return;
  free(in->backend);
  free(in->root);
  free(in->image);
  strv_free(in->env);
  strv_free(in->read_only);
  strv_free(in->hidden);
  memset(in, 0, sizeof(*in));
}

static const char *env_lookup(char *const *envp, const char *name) {
  size_t n = strlen(name);
  for (size_t i = 0; envp && envp[i]; i++)
    if (strncmp(envp[i], name, n) == 0 && envp[i][n] == '=')
      return envp[i] + n + 1;
  return NULL;
}

static int strings_of(const json_t *a, char ***out) {
  *out = calloc(json_array_size(a) + 1, sizeof(char *));
  if (!*out)
    return -1;
  size_t i;
  json_t *s;
  json_array_foreach(a, i, s) {
    if (!pool_json_plain_string(s) || !((*out)[i] = strdup(json_string_value(s))))
      return -1;
  }
  return 0;
}

int pool_session_inputs_build(const json_t *effective, const char *chosen_backend,
                              char *const *envp, struct pool_session_inputs *out,
                              struct cordon_error **err) {
  memset(out, 0, sizeof(*out));
  struct pool_session_inputs in = {0};
  const json_t *env = json_object_get(effective, "env");
  const json_t *creds = json_object_get(effective, "credential_env");
  const char *root = json_string_value(json_object_get(effective, "root"));
  const char *net = json_string_value(json_object_get(effective, "net"));
  const json_t *image = json_object_get(effective, "image");
  const json_t *timeout = json_object_get(effective, "timeout_seconds");
  uint64_t memory = 0, pids = 0;
  enum cordon_egress egress;
  if (!json_is_object(env) || !json_is_array(creds) || !root || !net ||
      cordon_egress_parse(net, &egress) < 0 || !json_is_number(timeout) ||
      !pool_json_uint(json_object_get(effective, "memory"), &memory) ||
      !pool_json_uint(json_object_get(effective, "pids"), &pids) ||
      !(json_is_null(image) || json_is_string(image)) ||
      !json_is_array(json_object_get(effective, "read_only")) ||
      !json_is_array(json_object_get(effective, "hidden")))
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "effective manifest: malformed");

  in.env = calloc(1, sizeof(char *));
  if (!in.env || !(in.backend = strdup(chosen_backend)) || !(in.root = strdup(root)) ||
      (json_is_string(image) && !(in.image = strdup(json_string_value(image)))) ||
      strings_of(json_object_get(effective, "read_only"), &in.read_only) < 0 ||
      strings_of(json_object_get(effective, "hidden"), &in.hidden) < 0)
    goto nomem;
  const char *key;
  json_t *value;
  json_object_foreach((json_t *)env, key, value) {
    char *entry = NULL;
    if (asprintf(&entry, "%s=%s", key, json_string_value(value)) < 0 ||
        strv_push_take(&in.env, entry) < 0)
      goto nomem;
  }
  size_t i;
  json_t *name;
  json_array_foreach(creds, i, name) {
    const char *n = json_string_value(name);
    const char *v = n ? env_lookup(envp, n) : NULL;
    if (!v) {
      pool_session_inputs_clear(&in);
      return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                              "credential variable %s is not set in the caller's environment",
                              n ? n : "?");
    }
    char *entry = NULL;
    if (asprintf(&entry, "%s=%s", n, v) < 0 || strv_push_take(&in.env, entry) < 0)
      goto nomem;
  }
  strv_sort(in.env);

  struct cordon_manifest *m = &in.manifest;
  m->root = in.root;
  m->image = in.image;
  m->env = (const char *const *)in.env;
  m->default_timeout = json_number_value(timeout);
  m->policy.egress = egress;
  m->policy.read_only = in.read_only[0] ? (const char *const *)in.read_only : NULL;
  m->policy.hidden = in.hidden[0] ? (const char *const *)in.hidden : NULL;
  m->policy.limits.memory_bytes = memory;
  m->policy.limits.pids = pids;
  m->policy.require_enforcement = true;
  *out = in;
  return 0;
nomem:
  pool_session_inputs_clear(&in);
  return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "session inputs");
}
