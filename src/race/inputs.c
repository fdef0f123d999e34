/* A race's inputs (see inputs.h): the shared manifest and each candidate's own files, env and
 * patch, placed through the session API (so every backend that races takes them) and sealed
 * in the receipt as digests: a receipt binds what each candidate was given without carrying
 * the bytes, the host paths or the secret values themselves. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "crypto/digest.h"
#include "race/inputs.h"
#include "race/patch.h"

/* ---- placing a candidate's inputs -------------------------------------------------------- */

/* The permission bits path has now, so that patching a script keeps it executable; 0 (the
 * write's default, 0644) when they cannot be read. */
static unsigned current_mode(struct cordon_session *s, const char *path) {
  const char *slash = strrchr(path, '/');
  _cleanup_free_ char *dir = slash ? strndup(path, (size_t)(slash - path)) : strdup(".");
  const char *name = slash ? slash + 1 : path;
  struct cordon_dirent *entries = NULL;
  size_t n = 0;
  struct cordon_error *e = NULL;
  unsigned mode = 0;
  if (dir && cordon_session_ls(s, dir, &entries, &n, &e) == 0)
    for (size_t i = 0; i < n; i++)
      if (!strcmp(entries[i].name, name))
        mode = entries[i].mode & 07777u;
  cordon_error_free(e);
  cordon_dirents_free(entries, n);
  return mode;
}

static int apply_patch(struct cordon_session *s, const struct cordon_race_inputs *in,
                       const char **reason, char *detail, size_t detail_size,
                       struct cordon_error **err) {
  struct race_patch patch;
  const char *why = NULL;
  if (race_patch_parse(in->patch, in->patch_length, &patch, &why) < 0) {
    *reason = CORDON_RACE_FAILURE_PATCH;
    snprintf(detail, detail_size, "%s", why);
    return 1;
  }
  int r = 0;
  for (size_t i = 0; i < patch.n_files && r == 0; i++) {
    const struct race_patch_file *f = &patch.files[i];
    unsigned char *old = NULL;
    size_t old_length = 0;
    struct cordon_error *read_err = NULL;
    bool exists = cordon_session_read(s, f->path, &old, &old_length, &read_err) == 0;
    cordon_error_free(read_err);
    char *now = NULL;
    size_t now_length = 0;
    if (f->creates == exists) {
      why = exists ? "it creates a file that exists" : "it changes a file that does not exist";
      r = 1;
    } else if (race_patch_apply(f, (const char *)old, old_length, &now, &now_length, &why) < 0) {
      r = 1;
    } else if (cordon_session_write(s, f->path, now, now_length,
                                    exists ? current_mode(s, f->path) : 0, err) < 0) {
      r = cordon_error_prefix(err, "patch %s", f->path);
    }
    if (r == 1) {
      *reason = CORDON_RACE_FAILURE_PATCH;
      snprintf(detail, detail_size, "%s: %s", f->path, why);
    }
    free(old);
    free(now);
  }
  race_patch_clear(&patch);
  return r;
}

int race_inputs_place(struct cordon_session *s, const struct cordon_race_inputs *in,
                      const char **reason, char *detail, size_t detail_size,
                      struct cordon_error **err) {
  if (!in)
    return 0;
  for (size_t i = 0; i < in->n_files; i++) {
    const struct cordon_file_spec *f = &in->files[i];
    if (cordon_session_write(s, f->path, f->content, f->length, f->mode, err) < 0)
      return cordon_error_prefix(err, "candidate file %s", f->path);
  }
  return in->patch ? apply_patch(s, in, reason, detail, detail_size, err) : 0;
}

/* ---- the receipt ----------------------------------------------------------------------------- */

static int set_digest(json_t *obj, const char *key, const void *data, size_t length) {
  char hex[CRYPTO_SHA256_HEX_LEN + 1];
  struct cordon_error *e = NULL;
  if (crypto_sha256_hex(data, length, hex, &e) < 0) {
    cordon_error_free(e);
    return -1;
  }
  return json_object_set_new(obj, key, json_string(hex));
}

/* {NAME: sha256(VALUE)}: the names are not secret, the values may be. A name given twice
 * keeps its last value, as the environment does. */
static json_t *env_json(const char *const *env) {
  json_t *j = json_object();
  for (size_t i = 0; j && env && env[i]; i++) {
    const char *eq = strchr(env[i], '=');
    _cleanup_free_ char *name = eq ? strndup(env[i], (size_t)(eq - env[i])) : NULL;
    if (!name || set_digest(j, name, eq + 1, strlen(eq + 1)) < 0) {
      json_decref(j);
      return NULL;
    }
  }
  return j;
}

static json_t *files_json(const struct cordon_file_spec *files, size_t n) {
  json_t *j = json_object();
  for (size_t i = 0; j && i < n; i++)
    if (set_digest(j, files[i].path, files[i].content, files[i].length) < 0) {
      json_decref(j);
      return NULL;
    }
  return j;
}

static int compare_strings(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* One list of egress rules, canonical: each entry as the proxy compares it (a domain
 * lower-cased, one trailing dot dropped), sorted, duplicates once. */
static json_t *rule_list_json(const char *const *list, bool domains) {
  size_t n = 0;
  while (list && list[n])
    n++;
  json_t *j = json_array();
  char **copy = calloc(n + 1, sizeof(*copy));
  for (size_t i = 0; j && copy && i < n; i++) {
    if (!(copy[i] = strdup(list[i])))
      goto fail;
    size_t len = strlen(copy[i]);
    if (domains) {
      for (char *c = copy[i]; *c; c++)
        if (*c >= 'A' && *c <= 'Z')
          *c = (char)(*c - 'A' + 'a');
      if (len > 1 && copy[i][len - 1] == '.')
        copy[i][len - 1] = 0;
    }
  }
  if (!j || !copy)
    goto fail;
  qsort(copy, n, sizeof(*copy), compare_strings);
  for (size_t i = 0; i < n; i++)
    if ((i == 0 || strcmp(copy[i], copy[i - 1])) && json_array_append_new(j, json_string(copy[i])))
      goto fail;
  for (size_t i = 0; i < n; i++)
    free(copy[i]);
  free(copy);
  return j;
fail:
  for (size_t i = 0; copy && i < n; i++)
    free(copy[i]);
  free(copy);
  json_decref(j);
  return NULL;
}

/* Egress restricted's rules, so that a receipt says what the candidates (and judges: they
 * share the manifest) could reach: {allow_domains, allow_cidrs, resolve}, each canonical;
 * empty lists left out. */
static json_t *egress_json(const struct cordon_egress_rules *rules) {
  json_t *j = json_object();
  if (!j || !rules)
    return j;
  json_t *domains = rule_list_json(rules->allow_domains, true);
  json_t *cidrs = rule_list_json(rules->allow_cidrs, false);
  json_t *pins = rule_list_json(rules->resolve, false);
  int r = (domains && json_array_size(domains) ? json_object_set(j, "allow_domains", domains) : 0) |
          (cidrs && json_array_size(cidrs) ? json_object_set(j, "allow_cidrs", cidrs) : 0) |
          (pins && json_array_size(pins) ? json_object_set(j, "resolve", pins) : 0);
  bool failed = r != 0 || !domains || !cidrs || !pins;
  json_decref(domains);
  json_decref(cidrs);
  json_decref(pins);
  if (failed) {
    json_decref(j);
    return NULL;
  }
  return j;
}

/* Set key to value unless value is an empty object/array (nothing to bind); steals value. */
static int set_nonempty(json_t *obj, const char *key, json_t *value) {
  if (!value)
    return -1;
  if (json_object_size(value) == 0 && json_array_size(value) == 0) {
    json_decref(value);
    return 0;
  }
  return json_object_set_new(obj, key, value);
}

json_t *race_manifest_receipt(const struct cordon_manifest *m) {
  const struct cordon_limits *l = &m->policy.limits;
  json_t *j = json_pack("{s:s, s:{s:f, s:I, s:I, s:I, s:I, s:I}}", "net",
                        cordon_egress_name(m->policy.egress), "limits", "cpus", l->cpus,
                        "fsize_bytes", (json_int_t)l->fsize_bytes, "memory_bytes",
                        (json_int_t)l->memory_bytes, "nofile", (json_int_t)l->nofile, "pids",
                        (json_int_t)l->pids, "tmp_bytes", (json_int_t)l->tmp_bytes);
  json_t *allow = json_array();
  if (!j || !allow)
    goto fail;
  /* Granted host paths by digest: a receipt holds no host path, but binds which were granted. */
  for (size_t i = 0; m->policy.allow_ro && m->policy.allow_ro[i]; i++) {
    char hex[CRYPTO_SHA256_HEX_LEN + 1];
    struct cordon_error *e = NULL;
    if (crypto_sha256_hex(m->policy.allow_ro[i], strlen(m->policy.allow_ro[i]), hex, &e) < 0 ||
        json_array_append_new(allow, json_string(hex)) < 0) {
      cordon_error_free(e);
      goto fail;
    }
  }
  if (set_nonempty(j, "allow_ro", steal_ptr(&allow)) < 0 ||
      set_nonempty(j, "env", env_json(m->env)) < 0 ||
      set_nonempty(j, "files", files_json(m->files, m->n_files)) < 0 ||
      set_nonempty(j, "egress", egress_json(m->egress_rules)) < 0 ||
      (m->image && json_object_set_new(j, "image", json_string(m->image)) < 0))
    goto fail;
  return j;
fail:
  json_decref(allow);
  json_decref(j);
  return NULL;
}

int race_inputs_receipt(const struct cordon_race_inputs *inputs, size_t k, json_t **out) {
  *out = NULL;
  json_t *all = json_object();
  for (size_t i = 0; all && inputs && i < k; i++) {
    const struct cordon_race_inputs *in = &inputs[i];
    json_t *one = json_object();
    if (!one || set_nonempty(one, "env", env_json(in->env)) < 0 ||
        set_nonempty(one, "files", files_json(in->files, in->n_files)) < 0 ||
        (in->patch && set_digest(one, "patch", in->patch, in->patch_length) < 0)) {
      json_decref(one);
      goto fail;
    }
    char task_id[CORDON_RACE_TASK_ID_MAX];
    snprintf(task_id, sizeof(task_id), "candidate-%zu", i);
    if (set_nonempty(all, task_id, one) < 0)
      goto fail;
  }
  if (!all)
    return -1;
  if (json_object_size(all))
    *out = all;
  else
    json_decref(all);
  return 0;
fail:
  json_decref(all);
  return -1;
}

/* ---- checking a receipt's form ------------------------------------------------------------ */

static bool only_members(const json_t *o, const char *const *names, size_t n) {
  if (!json_is_object(o))
    return false;
  const char *key;
  json_t *v;
  json_object_foreach((json_t *)o, key, v) {
    bool known = false;
    for (size_t i = 0; i < n && !known; i++)
      known = !strcmp(key, names[i]);
    if (!known)
      return false;
  }
  return true;
}

static bool is_digest(const json_t *v) {
  return json_is_string(v) && crypto_is_sha256_hex(json_string_value(v));
}

/* A non-empty {name: digest} with names of at most 4096 bytes. */
static bool digest_map(const json_t *o) {
  if (!json_is_object(o) || json_object_size(o) == 0)
    return false;
  const char *key;
  json_t *v;
  json_object_foreach((json_t *)o, key, v) {
    if (!*key || strlen(key) > 4096 || !is_digest(v))
      return false;
  }
  return true;
}

static bool whole_number(const json_t *v) {
  if (!json_is_number(v))
    return false;
  double d = json_number_value(v);
  return d >= 0 && d <= 18446744073709551615.0 && d == (double)(uint64_t)d;
}

/* Absent, or a non-empty object of non-empty lists of strings (egress_json). */
static bool egress_valid(const json_t *e) {
  static const char *const members[] = {"allow_cidrs", "allow_domains", "resolve"};
  if (!e)
    return true;
  if (!only_members(e, members, 3) || json_object_size(e) == 0)
    return false;
  const char *key;
  const json_t *list;
  json_object_foreach((json_t *)e, key, list) {
    if (!json_is_array(list) || json_array_size(list) == 0)
      return false;
    for (size_t i = 0; i < json_array_size(list); i++)
      if (!json_is_string(json_array_get(list, i)))
        return false;
  }
  return true;
}

static const char *check_manifest(const json_t *m) {
  static const char *const members[] = {"allow_ro", "egress", "env", "files",
                                        "image",    "limits", "net"};
  static const char *const limits[] = {"cpus",   "fsize_bytes", "memory_bytes",
                                       "nofile", "pids",        "tmp_bytes"};
  if (!only_members(m, members, 7) || !json_object_get(m, "limits") || !json_object_get(m, "net"))
    return "the manifest must have limits and net, and only allow_ro, egress, env, files and "
           "image besides";
  enum cordon_egress egress;
  const char *net = json_string_value(json_object_get(m, "net"));
  if (!net || cordon_egress_parse(net, &egress) < 0)
    return "the manifest's net is not a network class";
  const json_t *l = json_object_get(m, "limits");
  if (!only_members(l, limits, 6) || json_object_size(l) != 6)
    return "the manifest's limits must be exactly cpus, fsize_bytes, memory_bytes, nofile, pids "
           "and tmp_bytes";
  for (size_t i = 0; i < 6; i++) {
    const json_t *v = json_object_get(l, limits[i]);
    if (i == 0 ? !(json_is_number(v) && json_number_value(v) >= 0) : !whole_number(v))
      return "the manifest's limits must be non-negative numbers";
  }
  const json_t *allow = json_object_get(m, "allow_ro");
  for (size_t i = 0; allow && i < json_array_size(allow); i++)
    if (!is_digest(json_array_get(allow, i)))
      return "the manifest's allow_ro must be a list of digests";
  if (allow && (!json_is_array(allow) || json_array_size(allow) == 0))
    return "the manifest's allow_ro must be a non-empty list of digests";
  const json_t *env = json_object_get(m, "env"), *files = json_object_get(m, "files");
  if ((env && !digest_map(env)) || (files && !digest_map(files)))
    return "the manifest's env and files must map names to digests";
  if (!egress_valid(json_object_get(m, "egress")))
    return "the manifest's egress must hold non-empty lists of strings: allow_domains, "
           "allow_cidrs, resolve";
  const json_t *image = json_object_get(m, "image");
  if (image && (!json_is_string(image) || json_string_length(image) == 0))
    return "the manifest's image must be a non-empty string";
  return NULL;
}

static const char *check_inputs(const json_t *inputs) {
  static const char *const members[] = {"env", "files", "patch"};
  if (!json_is_object(inputs) || json_object_size(inputs) == 0 ||
      json_object_size(inputs) > CORDON_RACE_MAX_K)
    return "inputs must be a non-empty object of candidates";
  const char *task;
  json_t *one;
  json_object_foreach((json_t *)inputs, task, one) {
    unsigned index;
    char tail;
    if (sscanf(task, "candidate-%u%c", &index, &tail) != 1 || index >= CORDON_RACE_MAX_K)
      return "inputs must be keyed by candidate task ids";
    const json_t *env = json_object_get(one, "env"), *files = json_object_get(one, "files"),
                 *patch = json_object_get(one, "patch");
    if (!only_members(one, members, 3) || json_object_size(one) == 0 || (env && !digest_map(env)) ||
        (files && !digest_map(files)) || (patch && !is_digest(patch)))
      return "a candidate's inputs must be env and files (names to digests) and a patch digest";
  }
  return NULL;
}

const char *race_inputs_check(const json_t *root) {
  const json_t *m = json_object_get(root, "manifest"), *in = json_object_get(root, "inputs");
  const char *why = m ? check_manifest(m) : NULL;
  return why ? why : in ? check_inputs(in) : NULL;
}
