/* The gate baseline's file form (docs/formats.md, "Gate baselines"): canonical JSON written
 * atomically under the project's .cordon/, read back strictly, and the audit event of a failed
 * gate. Encoding and decoding are pure. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include <cordon/audit.h>
#include <cordon/snapshot.h>

#include "agent/gate.h"
#include "base/cleanup.h"
#include "base/fs.h"
#include "crypto/jcs.h"
#include "snapshot/manifest.h"
#include "store/hash.h"

static const char *kind_name(enum agent_gate_kind kind) {
  switch (kind) {
  case AGENT_GATE_ABSENT: return "absent";
  case AGENT_GATE_DIRECTORY: return "directory";
  case AGENT_GATE_FILE: return "file";
  case AGENT_GATE_SYMLINK: return "symlink";
  case AGENT_GATE_SPECIAL: return "special";
  }
  return "absent";
}

static const char special_types[] = "psc"
                                    "b";
static const char *const special_names[] = {"fifo", "socket", "char", "block"};

static json_t *path_json(const struct agent_gate_path *p) {
  json_t *o = json_pack("{s:s, s:s}", "path", p->path, "kind", kind_name(p->kind));
  char mode[8];
  snprintf(mode, sizeof(mode), "%04o", p->mode);
  switch (p->kind) {
  case AGENT_GATE_DIRECTORY: json_object_set_new(o, "snapshot", json_string(p->id)); break;
  case AGENT_GATE_FILE:
    json_object_set_new(o, "sha256", json_string(p->id));
    json_object_set_new(o, "mode", json_string(mode));
    break;
  case AGENT_GATE_SYMLINK: json_object_set_new(o, "target", json_string(p->target)); break;
  case AGENT_GATE_SPECIAL: {
    const char *at = strchr(special_types, p->special);
    json_object_set_new(o, "type", json_string(special_names[at ? at - special_types : 0]));
    break;
  }
  case AGENT_GATE_ABSENT: break;
  }
  return o;
}

int agent_gate_encode(const struct agent_gate_baseline *baseline, char **out, size_t *length,
                      struct cordon_error **err) {
  json_t *paths = json_array();
  for (size_t i = 0; i < baseline->count; i++)
    json_array_append_new(paths, path_json(&baseline->paths[i]));
  json_t *doc = json_pack("{s:s, s:o}", "format", AGENT_GATE_FORMAT, "paths", paths);
  int rc = doc ? jcs_dump(doc, out, length, err)
               : cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "gate baseline");
  json_decref(doc);
  return rc;
}

static int invalid(struct cordon_error **err, size_t index, const char *what) {
  return cordon_error_set(err, CORDON_ERR_INVALID, 0, "gate baseline: paths[%zu] %s", index, what);
}

/* Exactly the members a kind has, of the right form. */
static int decode_path(json_t *o, size_t i, struct agent_gate_path *p, struct cordon_error **err) {
  const char *path = json_string_value(json_object_get(o, "path"));
  const char *kind = json_string_value(json_object_get(o, "kind"));
  if (!json_is_object(o) || !path || !kind)
    return invalid(err, i, "needs a path and a kind");
  _cleanup_free_ char *normal = NULL;
  if (fs_normalize_relative(path, &normal, NULL) < 0 || strcmp(normal, path) ||
      strlen(path) != json_string_length(json_object_get(o, "path")))
    return invalid(err, i, "has a path that is not normalised and project-relative");
  if (!(p->path = strdup(path)))
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "gate baseline");
  size_t members = 2;
  if (!strcmp(kind, "absent")) {
    p->kind = AGENT_GATE_ABSENT;
  } else if (!strcmp(kind, "directory") || !strcmp(kind, "file")) {
    bool dir = kind[0] == 'd';
    p->kind = dir ? AGENT_GATE_DIRECTORY : AGENT_GATE_FILE;
    const char *id = json_string_value(json_object_get(o, dir ? "snapshot" : "sha256"));
    if (!id || !cas_hex_valid(id))
      return invalid(err, i, dir ? "needs a snapshot id" : "needs a sha256");
    memcpy(p->id, id, 65);
    members++;
    if (!dir) {
      const char *mode = json_string_value(json_object_get(o, "mode"));
      char *end = NULL;
      unsigned long m = mode ? strtoul(mode, &end, 8) : 0;
      if (!mode || strlen(mode) != 4 || *end || m > 07777)
        return invalid(err, i, "needs a mode of four octal digits");
      p->mode = (unsigned)m;
      members++;
    }
  } else if (!strcmp(kind, "symlink")) {
    p->kind = AGENT_GATE_SYMLINK;
    const char *target = json_string_value(json_object_get(o, "target"));
    if (!target || !*target || !(p->target = strdup(target)))
      return invalid(err, i, "needs a target");
    members++;
  } else if (!strcmp(kind, "special")) {
    p->kind = AGENT_GATE_SPECIAL;
    const char *type = json_string_value(json_object_get(o, "type"));
    for (size_t t = 0; type && t < 4; t++)
      if (!strcmp(type, special_names[t]))
        p->special = special_types[t];
    if (!p->special)
      return invalid(err, i, "needs a type (fifo, socket, char, block)");
    members++;
  } else {
    return invalid(err, i, "has an unknown kind");
  }
  if (json_object_size(o) != members)
    return invalid(err, i, "has members its kind does not have");
  return 0;
}

int agent_gate_decode(const char *text, size_t length, struct agent_gate_baseline **out,
                      struct cordon_error **err) {
  *out = NULL;
  struct jcs_check check;
  if (jcs_check_canonical(text, length, NULL, 0, &check) < 0)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                            "gate baseline: not canonical JSON at byte %zu (edited?)",
                            check.error_offset);
  json_t *doc = NULL;
  if (jcs_parse(text, length, AGENT_GATE_MAX_FILE, "gate baseline", &doc, err) < 0)
    return -1;
  json_t *paths = json_object_get(doc, "format") ? json_object_get(doc, "paths") : NULL;
  const char *format = json_string_value(json_object_get(doc, "format"));
  if (!json_is_object(doc) || json_object_size(doc) != 2 || !format ||
      strcmp(format, AGENT_GATE_FORMAT) || !json_is_array(paths)) {
    json_decref(doc);
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "gate baseline: not a %s document",
                            AGENT_GATE_FORMAT);
  }
  struct agent_gate_baseline *b = calloc(1, sizeof(*b));
  size_t n = json_array_size(paths);
  if (!b || !(b->paths = calloc(n ? n : 1, sizeof(*b->paths)))) {
    free(b);
    json_decref(doc);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "gate baseline");
  }
  for (size_t i = 0; i < n; i++) {
    b->count++;
    if (decode_path(json_array_get(paths, i), i, &b->paths[i], err) < 0)
      goto fail;
    const char *prev = i ? b->paths[i - 1].path : NULL;
    if (prev &&
        snap_path_compare(prev, strlen(prev), b->paths[i].path, strlen(b->paths[i].path)) >= 0) {
      invalid(err, i, "is out of order or repeated");
      goto fail;
    }
  }
  json_decref(doc);
  *out = b;
  return 0;
fail:
  json_decref(doc);
  agent_gate_baseline_free(b);
  return -1;
}

/* Lexically: is path at or beneath dir (both absolute, normalised)? */
static bool beneath(const char *path, const char *dir) {
  size_t n = strlen(dir);
  return !strncmp(path, dir, n) && (path[n] == '/' || path[n] == 0);
}

int agent_gate_location(const char *project_dir, const char *given, char **out,
                        struct cordon_error **err) {
  *out = NULL;
  if (!given || !*given || !strcmp(given, ".") || !strcmp(given, ".."))
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "a baseline needs a file name");
  _cleanup_free_ char *project = realpath(project_dir, NULL);
  if (!project)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "project %s", project_dir);
  if (!strchr(given, '/')) {
    if (asprintf(out, "%s/%s/%s", project, AGENT_GATE_DIR, given) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "gate");
    return 0;
  }
  _cleanup_free_ char *dir = NULL, *base = NULL;
  fs_split_path(given, &dir, &base);
  _cleanup_free_ char *state = NULL, *real_dir = realpath(*dir ? dir : "/", NULL);
  if (!base || !*base || !strcmp(base, ".") || !strcmp(base, ".."))
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "baseline %s: not a file name", given);
  if (!real_dir)
    return cordon_error_set(err, CORDON_ERR_NOT_FOUND, errno, "baseline %s: directory %s", given,
                            dir);
  if (asprintf(&state, "%s/.cordon", project) < 0 || asprintf(out, "%s/%s", real_dir, base) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "gate");
  if (!beneath(real_dir, state)) {
    free(*out);
    *out = NULL;
    return cordon_error_set(err, CORDON_ERR_DENIED, 0,
                            "baseline %s lies outside %s: the agent could reach it (a bare "
                            "name goes to %s/)",
                            given, state, AGENT_GATE_DIR);
  }
  return 0;
}

int agent_gate_save(const struct agent_gate_baseline *baseline, const char *location,
                    struct cordon_error **err) {
  _cleanup_free_ char *text = NULL, *dir = NULL, *base = NULL;
  size_t length = 0;
  if (agent_gate_encode(baseline, &text, &length, err) < 0)
    return -1;
  fs_split_path(location, &dir, &base);
  if (fs_mkdir_p(dir, 0700, err) < 0)
    return -1;
  return fs_write_atomic(location, text, length, 0600, err);
}

int agent_gate_load(struct cordon_cas *cas, const char *location, struct agent_gate_baseline **out,
                    struct cordon_error **err) {
  _cleanup_free_ unsigned char *text = NULL;
  size_t length = 0;
  if (fs_read_file(location, AGENT_GATE_MAX_FILE, &text, &length, err) < 0)
    return cordon_error_prefix(err, "baseline %s", location);
  if (agent_gate_decode((const char *)text, length, out, err) < 0)
    return cordon_error_prefix(err, "%s", location);
  for (size_t i = 0; i < (*out)->count; i++) {
    const struct agent_gate_path *p = &(*out)->paths[i];
    struct cordon_snapshot_entry *entries = NULL;
    size_t count = 0;
    if (p->kind != AGENT_GATE_DIRECTORY)
      continue;
    if (cordon_snapshot_entries(cas, p->id, &entries, &count, err) < 0) {
      cordon_error_free(*err);
      *err = NULL;
      cordon_error_set(err, CORDON_ERR_INVALID, 0,
                       "%s: gate baseline: the snapshot of %s is not in this project's store "
                       "(tampered, or another project's baseline)",
                       location, p->path);
      agent_gate_baseline_free(*out);
      *out = NULL;
      return -1;
    }
    cordon_snapshot_entries_free(entries, count);
  }
  return 0;
}

int agent_gate_audit(struct cordon_context *ctx, const char *event,
                     const struct agent_gate_report *report, struct cordon_error **err) {
  json_t *changes = json_array();
  for (size_t i = 0; i < report->count; i++)
    json_array_append_new(changes, json_pack("{s:s, s:s}", "change",
                                             agent_gate_change_kind_name(report->changes[i].kind),
                                             "path", report->changes[i].path));
  json_t *details = json_pack("{s:o}", "changes", changes);
  _cleanup_free_ char *text = NULL;
  size_t length = 0;
  int rc = jcs_dump(details, &text, &length, err);
  json_decref(details);
  if (rc < 0)
    return -1;
  struct cordon_audit_log *log = NULL;
  if (cordon_audit_open_project(ctx, NULL, &log, err) < 0)
    return -1;
  struct cordon_audit_event ev = {.event = event,
                                  .actor = "cordon",
                                  .resource_type = "gate",
                                  .resource_id = "",
                                  .details_json = text};
  rc = cordon_audit_append(log, &ev, NULL, err);
  cordon_audit_close(log);
  return rc;
}
