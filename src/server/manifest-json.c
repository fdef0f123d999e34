/* A session's manifest from the API's JSON (manifest-json.h). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/exec-json.h"
#include "server/manifest-json.h"

__attribute__((format(printf, 2, 3))) static int refuse(char **why, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (vasprintf(why, fmt, ap) < 0)
    *why = NULL;
  va_end(ap);
  return -1;
}

int json_only_keys(json_t *object, const char *where, const char *const *allowed, char **why) {
  const char *key;
  json_t *value;
  json_object_foreach(object, key, value) {
    size_t i = 0;
    while (allowed[i] && strcmp(allowed[i], key))
      i++;
    if (!allowed[i])
      return refuse(why, "unknown field '%s%s%s'", where, *where ? "." : "", key);
  }
  return 0;
}

static int get_string(json_t *object, const char *key, const char **out, char **why) {
  json_t *v = json_object_get(object, key);
  if (!v || json_is_null(v))
    return 0;
  if (!json_is_string(v))
    return refuse(why, "'%s' must be a string", key);
  *out = json_string_value(v);
  return 0;
}

/* A list of strings as a NULL-terminated vector (NULL when absent). */
static int get_strings(json_t *object, const char *key, const char ***out, char **why) {
  json_t *v = json_object_get(object, key);
  if (!v || json_is_null(v))
    return 0;
  if (!json_is_array(v))
    return refuse(why, "'%s' must be a list of strings", key);
  const char **list = calloc(json_array_size(v) + 1, sizeof(*list));
  if (!list)
    return refuse(why, "out of memory");
  size_t i;
  json_t *item;
  json_array_foreach(v, i, item) {
    if (!json_is_string(item)) {
      free(list);
      return refuse(why, "'%s' must be a list of strings", key);
    }
    list[i] = json_string_value(item);
  }
  *out = list;
  return 0;
}

static int get_u64(json_t *object, const char *key, uint64_t *out, char **why) {
  json_t *v = json_object_get(object, key);
  if (!v || json_is_null(v))
    return 0;
  if (!json_is_integer(v) || json_integer_value(v) < 0)
    return refuse(why, "'%s' must be a non-negative integer", key);
  *out = (uint64_t)json_integer_value(v);
  return 0;
}

static int get_seconds(json_t *object, const char *key, double *out, char **why) {
  json_t *v = json_object_get(object, key);
  if (!v || json_is_null(v))
    return 0;
  if (!json_is_number(v) || json_number_value(v) < 0 || !isfinite(json_number_value(v)))
    return refuse(why, "'%s' must be a non-negative number", key);
  *out = json_number_value(v);
  return 0;
}

int json_env_parse(json_t *doc, const char ***env, size_t *n, char **why) {
  json_t *object = json_object_get(doc, "env");
  *env = NULL;
  *n = 0;
  if (!object || json_is_null(object))
    return 0;
  if (!json_is_object(object))
    return refuse(why, "'env' must be an object of strings");
  /* "KEY=VALUE" strings are built here and kept after the vector's NULL, freed with it. */
  size_t size = json_object_size(object), made = 0;
  const char **list = calloc(2 * size + 1, sizeof(*list));
  if (!list)
    return refuse(why, "out of memory");
  const char *key;
  json_t *value;
  int r = 0;
  json_object_foreach(object, key, value) {
    char *entry = NULL;
    if (!json_is_string(value) || !*key || strchr(key, '='))
      r = refuse(why, "'env.%s' must be a string under a name without '='", key);
    else if (asprintf(&entry, "%s=%s", key, json_string_value(value)) < 0)
      r = refuse(why, "out of memory");
    if (r < 0)
      break;
    list[made] = entry;
    list[size + 1 + made] = entry; /* the owned copy, past the terminator */
    made++;
  }
  if (r < 0) {
    for (size_t i = 0; i < made; i++)
      free((char *)list[i]);
    free(list);
    return -1;
  }
  *env = list;
  *n = size;
  return 0;
}

void json_env_free(const char **env, size_t n) {
  for (size_t i = 0; env && i < n; i++)
    free((char *)env[n + 1 + i]);
  free(env);
}

static int parse_files(json_t *doc, struct manifest_json *m, char **why) {
  json_t *files = json_object_get(doc, "files");
  if (!files || json_is_null(files))
    return 0;
  if (!json_is_array(files))
    return refuse(why, "'files' must be a list");
  m->files = calloc(json_array_size(files) + 1, sizeof(*m->files));
  if (!m->files)
    return refuse(why, "out of memory");
  size_t i;
  json_t *f;
  json_array_foreach(files, i, f) {
    static const char *const keys[] = {"path", "content", "mode", NULL};
    if (!json_is_object(f) || json_only_keys(f, "files[]", keys, why) < 0)
      return *why ? -1 : refuse(why, "'files' entries must be objects");
    const char *path = json_string_value(json_object_get(f, "path"));
    const char *content = json_string_value(json_object_get(f, "content"));
    json_t *mode = json_object_get(f, "mode");
    if (!path || (json_object_get(f, "content") && !content) ||
        (mode && (!json_is_integer(mode) || json_integer_value(mode) < 0 ||
                  json_integer_value(mode) > 07777)))
      return refuse(why, "'files[%zu]' needs path (string), content (base64), mode (integer)", i);
    unsigned char *data = NULL;
    size_t length = 0;
    if (exec_base64_decode(content ? content : "", &data, &length) < 0)
      return refuse(why, "'files[%zu].content' is not base64", i);
    m->files[i].path = path;
    m->files[i].content = data;
    m->files[i].length = length;
    m->files[i].mode = mode ? (unsigned)json_integer_value(mode) : 0;
    m->manifest.n_files = i + 1;
  }
  m->manifest.files = m->files;
  return 0;
}

static int parse_policy(json_t *doc, struct manifest_json *m, char **why) {
  static const char *const policy_keys[] = {"read_only", "hidden", "allow_ro", NULL};
  static const char *const limit_keys[] = {"memory_bytes", "pids",      "cpus", "nofile",
                                           "fsize_bytes",  "tmp_bytes", NULL};
  json_t *policy = json_object_get(doc, "policy");
  if (policy && !json_is_null(policy)) {
    if (!json_is_object(policy))
      return refuse(why, "'policy' must be an object");
    if (json_only_keys(policy, "policy", policy_keys, why) < 0 ||
        get_strings(policy, "read_only", &m->read_only, why) < 0 ||
        get_strings(policy, "hidden", &m->hidden, why) < 0 ||
        get_strings(policy, "allow_ro", &m->allow_ro, why) < 0)
      return -1;
  }
  struct cordon_policy *p = &m->manifest.policy;
  p->read_only = m->read_only;
  p->hidden = m->hidden;
  p->allow_ro = m->allow_ro;
  json_t *limits = json_object_get(doc, "limits");
  if (limits && !json_is_null(limits)) {
    if (!json_is_object(limits))
      return refuse(why, "'limits' must be an object");
    if (json_only_keys(limits, "limits", limit_keys, why) < 0 ||
        get_u64(limits, "memory_bytes", &p->limits.memory_bytes, why) < 0 ||
        get_u64(limits, "pids", &p->limits.pids, why) < 0 ||
        get_seconds(limits, "cpus", &p->limits.cpus, why) < 0 ||
        get_u64(limits, "nofile", &p->limits.nofile, why) < 0 ||
        get_u64(limits, "fsize_bytes", &p->limits.fsize_bytes, why) < 0 ||
        get_u64(limits, "tmp_bytes", &p->limits.tmp_bytes, why) < 0)
      return -1;
  }
  const char *net = NULL;
  if (get_string(doc, "net", &net, why) < 0)
    return -1;
  if (net) {
    int e = 0;
    if (cordon_egress_parse(net, (enum cordon_egress *)&e) < 0)
      return refuse(why, "'net' must be none, loopback, restricted or open, not '%s'", net);
    p->egress = (enum cordon_egress)e;
    m->egress_given = true;
  }
  json_t *require = json_object_get(doc, "require_enforcement");
  if (require && !json_is_boolean(require))
    return refuse(why, "'require_enforcement' must be true or false");
  p->require_enforcement = require ? json_is_true(require) : true;
  return 0;
}

static int parse_repo(json_t *doc, struct manifest_json *m, char **why) {
  static const char *const keys[] = {"source", "branch", "sparse", NULL};
  json_t *repo = json_object_get(doc, "repo");
  if (!repo || json_is_null(repo))
    return 0;
  if (!json_is_object(repo) || json_only_keys(repo, "repo", keys, why) < 0)
    return *why ? -1 : refuse(why, "'repo' must be an object");
  if (get_string(repo, "source", &m->repo.source, why) < 0 ||
      get_string(repo, "branch", &m->repo.branch, why) < 0 ||
      get_strings(repo, "sparse", &m->sparse, why) < 0)
    return -1;
  if (!m->repo.source)
    return refuse(why, "'repo.source' is required");
  m->repo.sparse_paths = m->sparse;
  m->manifest.repo = &m->repo;
  return 0;
}

int manifest_json_parse(json_t *doc, struct manifest_json *out, char **why) {
  static const char *const keys[] = {"backend",
                                     "from",
                                     "workspace",
                                     "root",
                                     "image",
                                     "repo",
                                     "files",
                                     "env",
                                     "limits",
                                     "net",
                                     "policy",
                                     "timeout_seconds",
                                     "require_enforcement",
                                     NULL};
  memset(out, 0, sizeof(*out));
  *why = NULL;
  if (json_only_keys(doc, "", keys, why) < 0 ||
      get_string(doc, "backend", &out->backend, why) < 0 ||
      get_string(doc, "from", &out->from, why) < 0 ||
      get_string(doc, "workspace", &out->manifest.workspace, why) < 0 ||
      get_string(doc, "root", &out->manifest.root, why) < 0 ||
      get_string(doc, "image", &out->manifest.image, why) < 0 ||
      get_seconds(doc, "timeout_seconds", &out->manifest.default_timeout, why) < 0 ||
      parse_repo(doc, out, why) < 0 || parse_files(doc, out, why) < 0 ||
      json_env_parse(doc, &out->env, &out->n_env, why) < 0 || parse_policy(doc, out, why) < 0)
    return -1;
  out->manifest.env = out->env;
  return 0;
}

void manifest_json_clear(struct manifest_json *m) {
  json_env_free(m->env, m->n_env);
  for (size_t i = 0; m->files && i < m->manifest.n_files; i++)
    free((void *)m->files[i].content);
  free(m->files);
  free(m->sparse);
  free(m->read_only);
  free(m->hidden);
  free(m->allow_ro);
  memset(m, 0, sizeof(*m));
}
