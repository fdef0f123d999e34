/* Recipes and the override merge (pure). A recipe names a pool and the overrides it asks for;
 * pool_merge checks each override key, in byte order, against the schema and the pool's rules,
 * and folds the accepted ones into the template: scalars replace, env members replace by name,
 * and the lists that restrict or require (read_only, hidden, capabilities, credential_env) only
 * grow, so a recipe can never drop a protection the template holds. The effective manifest has
 * one fixed shape (every member present) so its hash depends on nothing but the two inputs. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <cordon/backend.h>

#include "base/cleanup.h"
#include "base/strv.h"
#include "crypto/jcs.h"
#include "pool/internal.h"
#include "pool/pool.h"

const char *pool_rule_name(enum pool_rule rule) {
  switch (rule) {
  case POOL_RULE_NONE: return "none";
  case POOL_RULE_INVALID_OVERRIDE: return "invalid_override";
  case POOL_RULE_FIELD_NOT_EXPOSED: return "field_not_exposed";
  case POOL_RULE_CAPABILITY_ABOVE_CEILING: return "capability_above_ceiling";
  case POOL_RULE_EGRESS_ABOVE_CEILING: return "egress_above_ceiling";
  case POOL_RULE_CREDENTIAL_NOT_ALLOWED: return "credential_not_allowed";
  case POOL_RULE_BACKEND_NOT_ALLOWED: return "backend_not_allowed";
  case POOL_RULE_POOL_MISMATCH: return "pool_mismatch";
  case POOL_RULE_POOL_RETIRED: return "pool_retired";
  case POOL_RULE_NO_BACKEND_AVAILABLE: return "no_backend_available";
  }
  return "unknown";
}

void pool_refusal_clear(struct pool_refusal *r) {
  if (!r)
    return;
  free(r->field);
  free(r->message);
  memset(r, 0, sizeof(*r));
}

void pool_recipe_clear(struct pool_recipe *r) {
  if (!r)
    return;
  free(r->pool);
  json_decref(r->overrides);
  memset(r, 0, sizeof(*r));
}

void pool_effective_clear(struct pool_effective *e) {
  if (!e)
    return;
  json_decref(e->manifest);
  free(e->canonical);
  memset(e, 0, sizeof(*e));
}

static int recipe_finish(struct pool_recipe *r, struct cordon_error **err) {
  return pool_hash_json(r->overrides, NULL, NULL, r->overrides_hash, err);
}

int pool_recipe_parse(const char *text, size_t length, struct pool_recipe *out,
                      struct cordon_error **err) {
  memset(out, 0, sizeof(*out));
  json_auto_t *doc = NULL;
  if (jcs_parse(text, length, POOL_MANIFEST_MAX, "recipe", &doc, err) < 0)
    return -1;
  if (!json_is_object(doc))
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "recipe: must be a JSON object");
  const char *key;
  json_t *v;
  json_object_foreach(doc, key, v) {
    if (strcmp(key, "pool") && strcmp(key, "overrides"))
      return cordon_error_set(err, CORDON_ERR_INVALID, 0, "recipe: %s: unknown field", key);
  }
  v = json_object_get(doc, "pool");
  if (!pool_json_plain_string(v) || !pool_name_valid(json_string_value(v)))
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "recipe: pool: must be a pool name");
  json_t *overrides = json_object_get(doc, "overrides");
  if (overrides && !json_is_object(overrides))
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "recipe: overrides: must be an object");
  struct pool_recipe r = {0};
  r.pool = strdup(json_string_value(v));
  r.overrides = overrides ? json_incref(overrides) : json_object();
  if (!r.pool || !r.overrides) {
    pool_recipe_clear(&r);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "recipe");
  }
  if (recipe_finish(&r, err) < 0) {
    pool_recipe_clear(&r);
    return -1;
  }
  *out = r;
  return 0;
}

int pool_recipe_empty(const char *pool, struct pool_recipe *out, struct cordon_error **err) {
  memset(out, 0, sizeof(*out));
  if (!pool_name_valid(pool))
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "pool name \"%s\" is not valid", pool);
  struct pool_recipe r = {.pool = strdup(pool), .overrides = json_object()};
  if (!r.pool || !r.overrides) {
    pool_recipe_clear(&r);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "recipe");
  }
  if (recipe_finish(&r, err) < 0) {
    pool_recipe_clear(&r);
    return -1;
  }
  *out = r;
  return 0;
}

int pool_refusal_set(struct pool_refusal *refusal, enum pool_rule rule, const char *field,
                     const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *message = NULL;
  if (vasprintf(&message, fmt, ap) < 0)
    message = NULL;
  va_end(ap);
  refusal->rule = rule;
  refusal->field = strdup(field);
  refusal->message = message;
  if (!refusal->field || !refusal->message) {
    pool_refusal_clear(refusal);
    return -ENOMEM;
  }
  return 1;
}

static int key_compare(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static bool in_strv(char *const *list, const char *s) {
  for (size_t i = 0; list && list[i]; i++)
    if (strcmp(list[i], s) == 0)
      return true;
  return false;
}

/* A sorted, unique JSON array of the strings in base and extra. */
static json_t *union_json(char *const *base, char *const *extra) {
  _cleanup_(strv_freep) char **all = strv_copy((const char *const *)base);
  if (!all)
    return NULL;
  for (size_t i = 0; extra && extra[i]; i++)
    if (!in_strv(all, extra[i]) && strv_push(&all, extra[i]) < 0)
      return NULL;
  strv_sort(all);
  json_t *a = json_array();
  for (size_t i = 0; a && all[i]; i++) {
    if (json_array_append_new(a, json_string(all[i])) < 0) {
      json_decref(a);
      return NULL;
    }
  }
  return a;
}

static json_t *strv_json(char *const *list) {
  json_t *a = json_array();
  for (size_t i = 0; a && list && list[i]; i++) {
    if (json_array_append_new(a, json_string(list[i])) < 0) {
      json_decref(a);
      return NULL;
    }
  }
  return a;
}

static json_t *env_json(char *const *env) {
  json_t *o = json_object();
  for (size_t i = 0; o && env && env[i]; i++) {
    const char *eq = strchr(env[i], '=');
    _cleanup_free_ char *name = strndup(env[i], (size_t)(eq - env[i]));
    if (!name || json_object_set_new(o, name, json_string(eq + 1)) < 0) {
      json_decref(o);
      return NULL;
    }
  }
  return o;
}

/* The accepted overrides, parsed. */
struct merged {
  const char *backend;
  json_t *env; /* the override's object, borrowed */
  char **credential_env;
  uint32_t capabilities;
  bool net_set;
  enum cordon_egress net;
  bool timeout_set;
  double timeout;
  bool memory_set;
  uint64_t memory;
  bool pids_set;
  uint64_t pids;
  const char *image;
  char **read_only;
  char **hidden;
};

static void merged_clear(struct merged *g) {
  strv_free(g->credential_env);
  strv_free(g->read_only);
  strv_free(g->hidden);
}

/* One override: 0 accepted (recorded in g), 1 refused, < 0 ENOMEM. */
static int check_override(const struct pool_manifest *m, const char *key, json_t *v,
                          struct merged *g, struct pool_refusal *refusal) {
  if (!pool_override_key_known(key))
    return pool_refusal_set(refusal, POOL_RULE_INVALID_OVERRIDE, key,
                            "\"%s\" is not an override key", key);
  if (!in_strv(m->exposed_fields, key))
    return pool_refusal_set(refusal, POOL_RULE_FIELD_NOT_EXPOSED, key,
                            "pool %s does not expose \"%s\" to recipes", m->name, key);
  const char *why = NULL;
  size_t bad = 0;
  if (strcmp(key, "backend") == 0) {
    if (!pool_json_plain_string(v) || !pool_backend_name_valid(json_string_value(v)))
      return pool_refusal_set(refusal, POOL_RULE_INVALID_OVERRIDE, key,
                              "backend must be a backend name");
    if (!in_strv(m->backend_allowlist, json_string_value(v)))
      return pool_refusal_set(refusal, POOL_RULE_BACKEND_NOT_ALLOWED, key,
                              "backend \"%s\" is not in pool %s's backend_allowlist",
                              json_string_value(v), m->name);
    g->backend = json_string_value(v);
  } else if (strcmp(key, "env") == 0) {
    if (!json_is_object(v) || json_object_size(v) > POOL_LIST_MAX)
      return pool_refusal_set(refusal, POOL_RULE_INVALID_OVERRIDE, key,
                              "env must be an object of strings");
    const char *name;
    json_t *value;
    json_object_foreach(v, name, value) {
      if (!pool_env_name_valid(name) || !pool_json_plain_string(value))
        return pool_refusal_set(refusal, POOL_RULE_INVALID_OVERRIDE, key,
                                "env: \"%s\" must be a variable name with a string value", name);
    }
    g->env = v;
  } else if (strcmp(key, "credential_env") == 0) {
    if (pool_json_strings(v, pool_env_name_valid, &g->credential_env, &why, &bad) < 0)
      return pool_refusal_set(refusal, POOL_RULE_INVALID_OVERRIDE, key, "credential_env %s", why);
    for (size_t i = 0; g->credential_env[i]; i++)
      if (!in_strv(m->credential_env_allowlist, g->credential_env[i]))
        return pool_refusal_set(
            refusal, POOL_RULE_CREDENTIAL_NOT_ALLOWED, key,
            "credential variable \"%s\" is not in pool %s's credential_env_allowlist",
            g->credential_env[i], m->name);
  } else if (strcmp(key, "capabilities") == 0) {
    const char *name = NULL;
    if (pool_json_capabilities(v, &g->capabilities, &name) < 0)
      return pool_refusal_set(refusal, POOL_RULE_INVALID_OVERRIDE, key,
                              name ? "capabilities: unknown or repeated capability \"%s\""
                                   : "capabilities must be an array of capability names%s",
                              name ? name : "");
    uint32_t over = g->capabilities & ~m->capability_ceiling;
    if (over)
      return pool_refusal_set(refusal, POOL_RULE_CAPABILITY_ABOVE_CEILING, key,
                              "capability \"%s\" is above pool %s's capability_ceiling",
                              cordon_capability_name((enum cordon_capability)(over & -over)),
                              m->name);
  } else if (strcmp(key, "net") == 0) {
    if (!pool_json_plain_string(v) || cordon_egress_parse(json_string_value(v), &g->net) < 0)
      return pool_refusal_set(refusal, POOL_RULE_INVALID_OVERRIDE, key,
                              "net must be one of none, loopback, restricted, open");
    if (g->net > m->network_egress_class)
      return pool_refusal_set(refusal, POOL_RULE_EGRESS_ABOVE_CEILING, key,
                              "egress \"%s\" is wider than pool %s's network_egress_class \"%s\"",
                              cordon_egress_name(g->net), m->name,
                              cordon_egress_name(m->network_egress_class));
    g->net_set = true;
  } else if (strcmp(key, "timeout_seconds") == 0) {
    if (!json_is_number(v) || !isfinite(json_number_value(v)) || json_number_value(v) < 0 ||
        json_number_value(v) > 31536000.0)
      return pool_refusal_set(refusal, POOL_RULE_INVALID_OVERRIDE, key,
                              "timeout_seconds must be a number of seconds, 0..31536000");
    g->timeout = json_number_value(v);
    g->timeout_set = true;
  } else if (strcmp(key, "memory") == 0 || strcmp(key, "pids") == 0) {
    bool is_memory = key[0] == 'm';
    if (!pool_json_uint(v, is_memory ? &g->memory : &g->pids))
      return pool_refusal_set(refusal, POOL_RULE_INVALID_OVERRIDE, key, "%s must be a whole number",
                              key);
    *(is_memory ? &g->memory_set : &g->pids_set) = true;
  } else if (strcmp(key, "image") == 0) {
    if (!pool_json_plain_string(v) || !*json_string_value(v))
      return pool_refusal_set(refusal, POOL_RULE_INVALID_OVERRIDE, key,
                              "image must be a non-empty string");
    g->image = json_string_value(v);
  } else { /* read_only, hidden */
    char ***target = strcmp(key, "read_only") == 0 ? &g->read_only : &g->hidden;
    if (pool_json_strings(v, pool_rel_path_valid, target, &why, &bad) < 0)
      return pool_refusal_set(refusal, POOL_RULE_INVALID_OVERRIDE, key,
                              "%s %s (workspace-relative paths, no ..)", key, why);
  }
  return 0;
}

#define SET(obj, key, value)                                                         \
  do {                                                                               \
    json_t *value_ = (value);                                                        \
    if (!value_ || json_object_set_new(obj, key, value_) < 0)                        \
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "effective manifest"); \
  } while (0)

static int build_effective(const struct pool_manifest *m, const struct merged *g, json_t *e,
                           struct cordon_error **err) {
  const struct pool_template *t = &m->template_;
  SET(e, "version", json_integer(1));
  SET(e, "pool", json_string(m->name));
  SET(e, "pool_hash", json_string(m->pool_hash));
  if (g->backend) {
    json_t *a = json_array();
    SET(e, "backend_allowlist", a);
    if (json_array_append_new(a, json_string(g->backend)) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "effective manifest");
  } else {
    SET(e, "backend_allowlist", strv_json(m->backend_allowlist));
  }
  SET(e, "root", json_string(t->root ? t->root : "/workspace"));
  json_t *env = env_json(t->env);
  SET(e, "env", env);
  if (g->env && json_object_update(env, g->env) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "effective manifest");
  SET(e, "credential_env", union_json(t->credential_env, g->credential_env));
  SET(e, "capabilities", pool_capabilities_json(t->capabilities | g->capabilities));
  SET(e, "net", json_string(cordon_egress_name(g->net_set ? g->net : t->net)));
  SET(e, "timeout_seconds", json_real(g->timeout_set ? g->timeout : t->timeout_seconds));
  SET(e, "memory", json_integer((json_int_t)(g->memory_set ? g->memory : t->memory)));
  SET(e, "pids", json_integer((json_int_t)(g->pids_set ? g->pids : t->pids)));
  const char *image = g->image ? g->image : t->image;
  SET(e, "image", image ? json_string(image) : json_null());
  SET(e, "read_only", union_json(t->read_only, g->read_only));
  SET(e, "hidden", union_json(t->hidden, g->hidden));
  return 0;
}

int pool_merge(const struct pool_manifest *m, const struct pool_recipe *recipe,
               struct pool_effective *out, struct pool_refusal *refusal,
               struct cordon_error **err) {
  memset(out, 0, sizeof(*out));
  memset(refusal, 0, sizeof(*refusal));
  if (strcmp(recipe->pool, m->name) != 0) {
    int r = pool_refusal_set(refusal, POOL_RULE_POOL_MISMATCH, "pool",
                             "the recipe names pool %s, not %s", recipe->pool, m->name);
    return r < 0 ? cordon_error_set(err, CORDON_ERR_SYSTEM, -r, "recipe") : r;
  }
  size_t n = json_object_size(recipe->overrides);
  _cleanup_free_ const char **keys = calloc(n + 1, sizeof(char *));
  if (!keys)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "recipe");
  size_t k = 0;
  const char *key;
  json_t *v;
  json_object_foreach(recipe->overrides, key, v) keys[k++] = key;
  qsort(keys, k, sizeof(char *), key_compare);

  struct merged g = {0};
  int r = 0;
  for (size_t i = 0; i < k && r == 0; i++)
    r = check_override(m, keys[i], json_object_get(recipe->overrides, keys[i]), &g, refusal);
  if (r != 0) {
    merged_clear(&g);
    return r < 0 ? cordon_error_set(err, CORDON_ERR_SYSTEM, -r, "recipe") : 1;
  }
  json_auto_t *e = json_object();
  if (!e || build_effective(m, &g, e, err) < 0) {
    merged_clear(&g);
    return e ? -1 : cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "effective manifest");
  }
  merged_clear(&g);
  if (pool_hash_json(e, &out->canonical, &out->canonical_length, out->hash, err) < 0)
    return -1;
  out->manifest = steal_ptr(&e);
  return 0;
}
