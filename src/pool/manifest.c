/* Pool manifests (pure): the one parser of a manifest's JSON, its validation (every refusal
 * names the field), its canonical form and pool_hash, and the helpers the module's other files
 * share (internal.h). The canonical form is RFC 8785 of the manifest as given, without any
 * pool_hash member: what the operator wrote is what is frozen and hashed. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <cordon/backend.h>

#include "base/cleanup.h"
#include "base/strv.h"
#include "crypto/digest.h"
#include "crypto/jcs.h"
#include "pool/internal.h"
#include "pool/pool.h"

const char *const pool_override_keys[] = {
    "backend", "env",  "credential_env", "capabilities", "net",    "timeout_seconds",
    "memory",  "pids", "image",          "read_only",    "hidden", NULL,
};

bool pool_override_key_known(const char *key) {
  for (size_t i = 0; pool_override_keys[i]; i++)
    if (strcmp(key, pool_override_keys[i]) == 0)
      return true;
  return false;
}

/* ---- shared helpers ------------------------------------------------------------------------ */

bool pool_json_uint(const json_t *v, uint64_t *out) {
  double d;
  if (json_is_integer(v)) {
    json_int_t i = json_integer_value(v);
    if (i < 0)
      return false;
    d = (double)i;
  } else if (json_is_real(v)) {
    d = json_real_value(v);
  } else {
    return false;
  }
  if (!isfinite(d) || d < 0 || d > 9007199254740992.0 || floor(d) != d)
    return false;
  *out = (uint64_t)d;
  return true;
}

bool pool_env_name_valid(const char *name) {
  size_t n = strlen(name);
  if (n == 0 || n > 128)
    return false;
  for (size_t i = 0; i < n; i++) {
    char c = name[i];
    bool alpha = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9'))
      return false;
  }
  return true;
}

static bool components_ok(const char *p, bool allow_dot) {
  while (*p) {
    const char *slash = strchr(p, '/');
    size_t n = slash ? (size_t)(slash - p) : strlen(p);
    if (n == 0)
      return false;
    if (n == 2 && p[0] == '.' && p[1] == '.')
      return false;
    if (n == 1 && p[0] == '.' && !allow_dot)
      return false;
    if (!slash)
      break;
    p = slash + 1;
    if (!*p)
      return false; /* a trailing slash */
  }
  return true;
}

bool pool_rel_path_valid(const char *path) {
  size_t n = strlen(path);
  if (n == 0 || n > 4096 || path[0] == '/')
    return false;
  if (strcmp(path, ".") == 0)
    return true;
  return components_ok(path, false);
}

bool pool_abs_path_valid(const char *path) {
  size_t n = strlen(path);
  if (n == 0 || n > 4096 || path[0] != '/')
    return false;
  if (n == 1)
    return true;
  return components_ok(path + 1, false);
}

bool pool_backend_name_valid(const char *name) {
  size_t n = strlen(name);
  if (n == 0 || n > 64)
    return false;
  for (size_t i = 0; i < n; i++) {
    char c = name[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (!ok && !(i > 0 && (c == '_' || c == '.' || c == '-')))
      return false;
  }
  return true;
}

bool pool_name_valid(const char *name) {
  size_t n = strlen(name);
  if (n == 0 || n > POOL_NAME_MAX)
    return false;
  for (size_t i = 0; i < n; i++) {
    char c = name[i];
    bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!alnum && !(i > 0 && (c == '_' || c == '.' || c == '-')))
      return false;
  }
  return true;
}

int pool_json_strings(const json_t *v, bool (*valid)(const char *), char ***out, const char **why,
                      size_t *bad_index) {
  *bad_index = 0;
  if (!json_is_array(v)) {
    *why = "must be an array of strings";
    return -1;
  }
  size_t n = json_array_size(v);
  if (n > POOL_LIST_MAX) {
    *why = "has too many entries (at most 256)";
    return -1;
  }
  _cleanup_(strv_freep) char **list = calloc(n + 1, sizeof(char *));
  if (!list) {
    *why = "out of memory";
    return -1;
  }
  for (size_t i = 0; i < n; i++) {
    const json_t *s = json_array_get(v, i);
    *bad_index = i;
    if (!json_is_string(s) || json_string_length(s) != strlen(json_string_value(s))) {
      *why = "must be an array of strings";
      return -1;
    }
    const char *text = json_string_value(s);
    if (!*text || (valid && !valid(text))) {
      *why = "has an invalid entry";
      return -1;
    }
    for (size_t j = 0; j < i; j++) {
      if (strcmp(list[j], text) == 0) {
        *why = "has a duplicate entry";
        return -1;
      }
    }
    list[i] = strdup(text);
    if (!list[i]) {
      *why = "out of memory";
      return -1;
    }
  }
  *out = steal_ptr(&list);
  return 0;
}

static const enum cordon_capability capability_order[] = {
    CORDON_CAP_FILE_RW, CORDON_CAP_EXEC,     CORDON_CAP_NETWORK,
    CORDON_CAP_GPU,     CORDON_CAP_SNAPSHOT, CORDON_CAP_PERSISTENT_VOLUMES,
};

int pool_json_capabilities(const json_t *v, uint32_t *out, const char **bad) {
  *bad = NULL;
  *out = 0;
  if (!json_is_array(v) || json_array_size(v) > POOL_LIST_MAX)
    return -1;
  size_t i;
  json_t *s;
  json_array_foreach(v, i, s) {
    if (!pool_json_plain_string(s))
      return -1;
    const char *name = json_string_value(s);
    uint32_t bit = 0;
    for (size_t k = 0; k < ARRAY_SIZE(capability_order); k++)
      if (strcmp(name, cordon_capability_name(capability_order[k])) == 0)
        bit = capability_order[k];
    if (!bit || (*out & bit)) {
      *bad = name;
      return -1;
    }
    *out |= bit;
  }
  return 0;
}

json_t *pool_capabilities_json(uint32_t caps) {
  json_t *a = json_array();
  for (size_t k = 0; a && k < ARRAY_SIZE(capability_order); k++) {
    if ((caps & capability_order[k]) &&
        json_array_append_new(a, json_string(cordon_capability_name(capability_order[k]))) < 0) {
      json_decref(a);
      return NULL;
    }
  }
  return a;
}

int pool_hash_json(const json_t *v, char **canonical, size_t *length, char hash[65],
                   struct cordon_error **err) {
  _cleanup_free_ char *bytes = NULL;
  size_t n = 0;
  if (jcs_dump(v, &bytes, &n, err) < 0)
    return -1;
  if (crypto_sha256_hex(bytes, n, hash, err) < 0)
    return -1;
  if (canonical)
    *canonical = steal_ptr(&bytes);
  if (length)
    *length = n;
  return 0;
}

bool pool_json_plain_string(const json_t *v) {
  return json_is_string(v) && json_string_length(v) == strlen(json_string_value(v));
}

/* ---- the manifest ---------------------------------------------------------------------------- */

void pool_manifest_clear(struct pool_manifest *m) {
  if (!m)
    return;
  free(m->name);
  strv_free(m->backend_allowlist);
  struct pool_template *t = &m->template_;
  free(t->root);
  strv_free(t->env);
  free(t->image);
  strv_free(t->read_only);
  strv_free(t->hidden);
  strv_free(t->credential_env);
  strv_free(m->exposed_fields);
  strv_free(m->credential_env_allowlist);
  free(m->canonical);
  memset(m, 0, sizeof(*m));
}

static int invalid(struct cordon_error **err, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int invalid(struct cordon_error **err, const char *field, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *what = NULL;
  if (vasprintf(&what, fmt, ap) < 0)
    what = NULL;
  va_end(ap);
  int r = cordon_error_set(err, CORDON_ERR_INVALID, 0, "pool manifest: %s: %s", field,
                           what ? what : "invalid");
  free(what);
  return r;
}

static int strings_field(const json_t *obj, const char *key, const char *field,
                         bool (*valid)(const char *), char ***out, struct cordon_error **err) {
  const json_t *v = json_object_get(obj, key);
  const char *why = NULL;
  size_t bad = 0;
  if (pool_json_strings(v, valid, out, &why, &bad) < 0) {
    if (json_is_array(v) && bad < json_array_size(v) && json_is_string(json_array_get(v, bad)) &&
        strcmp(why, "must be an array of strings"))
      return invalid(err, field, "%s: \"%s\"", why, json_string_value(json_array_get(v, bad)));
    return invalid(err, field, "%s", why);
  }
  return 0;
}

static int egress_field(const json_t *v, const char *field, enum cordon_egress *out,
                        struct cordon_error **err) {
  if (!pool_json_plain_string(v) || cordon_egress_parse(json_string_value(v), out) < 0)
    return invalid(err, field, "must be one of none, loopback, restricted, open");
  return 0;
}

static int env_field(const json_t *v, const char *field, char ***out, struct cordon_error **err) {
  if (!json_is_object(v))
    return invalid(err, field, "must be an object of strings");
  if (json_object_size(v) > POOL_LIST_MAX)
    return invalid(err, field, "has too many entries (at most 256)");
  _cleanup_(strv_freep) char **env = calloc(1, sizeof(char *));
  if (!env)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "pool manifest");
  const char *key;
  json_t *value;
  json_object_foreach((json_t *)v, key, value) {
    if (!pool_env_name_valid(key))
      return invalid(err, field, "invalid variable name \"%s\"", key);
    if (!json_is_string(value) || json_string_length(value) != strlen(json_string_value(value)))
      return invalid(err, field, "%s: must be a string without NUL", key);
    char *entry = NULL;
    if (asprintf(&entry, "%s=%s", key, json_string_value(value)) < 0 ||
        strv_push_take(&env, entry) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "pool manifest");
  }
  strv_sort(env);
  *out = steal_ptr(&env);
  return 0;
}

static const char *const template_keys[] = {
    "root",      "env",    "timeout_seconds", "image",          "net", "memory", "pids",
    "read_only", "hidden", "capabilities",    "credential_env", NULL,
};

static bool in_list(const char *const *list, const char *s) {
  for (size_t i = 0; list && list[i]; i++)
    if (strcmp(list[i], s) == 0)
      return true;
  return false;
}

/* Template members; the egress default depends on the ceiling, so it is applied by the
 * caller. */
static int parse_template(const json_t *t, struct pool_template *out, bool *net_given,
                          struct cordon_error **err) {
  if (!json_is_object(t))
    return invalid(err, "template", "must be an object");
  const char *key;
  json_t *v;
  json_object_foreach((json_t *)t, key, v) {
    if (!in_list(template_keys, key))
      return invalid(err, "template", "unknown field \"%s\"", key);
  }
  *net_given = false;
  if ((v = json_object_get(t, "root"))) {
    if (!pool_json_plain_string(v) || !pool_abs_path_valid(json_string_value(v)))
      return invalid(err, "template.root", "must be an absolute path without . or ..");
    if (!(out->root = strdup(json_string_value(v))))
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "pool manifest");
  }
  if ((v = json_object_get(t, "env"))) {
    if (env_field(v, "template.env", &out->env, err) < 0)
      return -1;
  } else if (!(out->env = calloc(1, sizeof(char *)))) {
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "pool manifest");
  }
  if ((v = json_object_get(t, "timeout_seconds"))) {
    if (!json_is_number(v) || !isfinite(json_number_value(v)) || json_number_value(v) < 0 ||
        json_number_value(v) > 31536000.0)
      return invalid(err, "template.timeout_seconds", "must be a number of seconds, 0..31536000");
    out->timeout_seconds = json_number_value(v);
  }
  if ((v = json_object_get(t, "image"))) {
    if (!json_is_string(v) || !*json_string_value(v) ||
        json_string_length(v) != strlen(json_string_value(v)))
      return invalid(err, "template.image", "must be a non-empty string");
    if (!(out->image = strdup(json_string_value(v))))
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "pool manifest");
  }
  if ((v = json_object_get(t, "net"))) {
    if (egress_field(v, "template.net", &out->net, err) < 0)
      return -1;
    *net_given = true;
  }
  if ((v = json_object_get(t, "memory")) && !pool_json_uint(v, &out->memory))
    return invalid(err, "template.memory", "must be a whole number of bytes");
  if ((v = json_object_get(t, "pids")) && !pool_json_uint(v, &out->pids))
    return invalid(err, "template.pids", "must be a whole number");
  static const char *const lists[] = {"read_only", "hidden", "credential_env"};
  char ***targets[] = {&out->read_only, &out->hidden, &out->credential_env};
  bool (*checks[])(const char *) = {pool_rel_path_valid, pool_rel_path_valid, pool_env_name_valid};
  for (size_t i = 0; i < ARRAY_SIZE(lists); i++) {
    char field[64];
    snprintf(field, sizeof(field), "template.%s", lists[i]);
    if (json_object_get(t, lists[i])) {
      if (strings_field(t, lists[i], field, checks[i], targets[i], err) < 0)
        return -1;
    } else if (!(*targets[i] = calloc(1, sizeof(char *)))) {
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "pool manifest");
    }
  }
  if ((v = json_object_get(t, "capabilities"))) {
    const char *bad = NULL;
    if (pool_json_capabilities(v, &out->capabilities, &bad) < 0)
      return bad ? invalid(err, "template.capabilities", "unknown or repeated capability \"%s\"",
                           bad)
                 : invalid(err, "template.capabilities", "must be an array of capability names");
  }
  return 0;
}

static const char *const manifest_keys[] = {
    "name",
    "backend_allowlist",
    "template",
    "exposed_fields",
    "max_concurrency",
    "capability_ceiling",
    "network_egress_class",
    "credential_env_allowlist",
    "pool_hash",
    NULL,
};

int pool_manifest_parse(const char *text, size_t length, struct pool_manifest *out,
                        struct cordon_error **err) {
  memset(out, 0, sizeof(*out));
  json_auto_t *doc = NULL;
  if (jcs_parse(text, length, POOL_MANIFEST_MAX, "pool manifest", &doc, err) < 0)
    return -1;
  if (!json_is_object(doc))
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "pool manifest: must be a JSON object");
  const char *key;
  json_t *v;
  json_object_foreach(doc, key, v) {
    if (!in_list(manifest_keys, key))
      return invalid(err, key, "unknown field");
  }
  for (size_t i = 0; manifest_keys[i]; i++)
    if (strcmp(manifest_keys[i], "pool_hash") && !json_object_get(doc, manifest_keys[i]))
      return invalid(err, manifest_keys[i], "missing");

  struct pool_manifest m = {0};
  json_auto_t *body = NULL;
  int r = -1;
  v = json_object_get(doc, "name");
  if (!pool_json_plain_string(v) || !pool_name_valid(json_string_value(v))) {
    invalid(err, "name", "must be 1-64 of [A-Za-z0-9_.-], the first alphanumeric");
    goto out;
  }
  if (!(m.name = strdup(json_string_value(v)))) {
    cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "pool manifest");
    goto out;
  }
  if (strings_field(doc, "backend_allowlist", "backend_allowlist", pool_backend_name_valid,
                    &m.backend_allowlist, err) < 0)
    goto out;
  if (!m.backend_allowlist[0]) {
    invalid(err, "backend_allowlist", "must name at least one backend");
    goto out;
  }
  bool net_given = false;
  if (parse_template(json_object_get(doc, "template"), &m.template_, &net_given, err) < 0)
    goto out;
  if (strings_field(doc, "exposed_fields", "exposed_fields", pool_override_key_known,
                    &m.exposed_fields, err) < 0)
    goto out;
  if (!pool_json_uint(json_object_get(doc, "max_concurrency"), &m.max_concurrency) ||
      m.max_concurrency < 1 || m.max_concurrency > 65536) {
    invalid(err, "max_concurrency", "must be a whole number, 1..65536");
    goto out;
  }
  const char *bad = NULL;
  if (pool_json_capabilities(json_object_get(doc, "capability_ceiling"), &m.capability_ceiling,
                             &bad) < 0) {
    if (bad)
      invalid(err, "capability_ceiling", "unknown or repeated capability \"%s\"", bad);
    else
      invalid(err, "capability_ceiling", "must be an array of capability names");
    goto out;
  }
  if (egress_field(json_object_get(doc, "network_egress_class"), "network_egress_class",
                   &m.network_egress_class, err) < 0)
    goto out;
  if (strings_field(doc, "credential_env_allowlist", "credential_env_allowlist",
                    pool_env_name_valid, &m.credential_env_allowlist, err) < 0)
    goto out;

  /* The template must fit under the ceilings it is offered beneath. */
  struct pool_template *t = &m.template_;
  if (!net_given)
    t->net = m.network_egress_class < CORDON_EGRESS_LOOPBACK ? m.network_egress_class
                                                             : CORDON_EGRESS_LOOPBACK;
  if (t->capabilities & ~m.capability_ceiling) {
    uint32_t over = t->capabilities & ~m.capability_ceiling;
    invalid(err, "template.capabilities", "\"%s\" is above capability_ceiling",
            cordon_capability_name((enum cordon_capability)(over & -over)));
    goto out;
  }
  if (t->net > m.network_egress_class) {
    invalid(err, "template.net", "\"%s\" is wider than network_egress_class \"%s\"",
            cordon_egress_name(t->net), cordon_egress_name(m.network_egress_class));
    goto out;
  }
  for (size_t i = 0; t->credential_env[i]; i++) {
    if (!in_list((const char *const *)m.credential_env_allowlist, t->credential_env[i])) {
      invalid(err, "template.credential_env", "\"%s\" is not in credential_env_allowlist",
              t->credential_env[i]);
      goto out;
    }
  }

  const json_t *given_hash = json_object_get(doc, "pool_hash");
  body = json_deep_copy(doc);
  if (!body) {
    cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "pool manifest");
    goto out;
  }
  json_object_del(body, "pool_hash");
  if (pool_hash_json(body, &m.canonical, &m.canonical_length, m.pool_hash, err) < 0)
    goto out;
  if (given_hash &&
      (!json_is_string(given_hash) || strcmp(json_string_value(given_hash), m.pool_hash) != 0)) {
    invalid(err, "pool_hash", "does not match the manifest (its hash is %s)", m.pool_hash);
    goto out;
  }
  if (pool_hash_json(json_object_get(doc, "template"), NULL, NULL, m.template_hash, err) < 0)
    goto out;
  *out = m;
  memset(&m, 0, sizeof(m));
  r = 0;
out:
  pool_manifest_clear(&m);
  return r;
}

json_t *pool_manifest_json(const struct pool_manifest *m) {
  json_t *doc = NULL;
  if (jcs_parse(m->canonical, m->canonical_length, 0, "pool manifest", &doc, NULL) < 0)
    return NULL;
  if (json_object_set_new(doc, "pool_hash", json_string(m->pool_hash)) < 0) {
    json_decref(doc);
    return NULL;
  }
  return doc;
}
