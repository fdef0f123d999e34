/* A candidate build's record (build.h, docs/formats.md "Build records"): its canonical JSON,
 * read back strictly, kept as <project>/.cordon/builds/<id>.json with a `build.recorded`
 * audit event. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <cordon/audit.h>

#include "agent/build.h"
#include "base/cleanup.h"
#include "base/fs.h"
#include "base/strv.h"
#include "crypto/digest.h"
#include "crypto/jcs.h"
#include "store/hash.h"

#define BUILD_RECORD_MAX ((size_t)16 << 20)

void agent_build_record_free(struct agent_build_record *r) {
  if (!r)
    return;
  for (size_t i = 0; i < r->count; i++)
    free(r->outputs[i].path);
  free(r->outputs);
  free(r->id);
  free(r->given);
  free(r->source_id);
  free(r->mechanism);
  strv_free(r->argv);
  strv_free(r->protect);
  free(r);
}

static json_t *strv_json(char *const *v) {
  json_t *a = json_array();
  for (size_t i = 0; v && v[i]; i++)
    json_array_append_new(a, json_string(v[i]));
  return a;
}

int agent_build_record_encode(const struct agent_build_record *r, char **out, size_t *length,
                              struct cordon_error **err) {
  json_t *outputs = json_array();
  for (size_t i = 0; i < r->count; i++)
    json_array_append_new(outputs, json_pack("{s:s, s:I, s:s}", "path", r->outputs[i].path, "size",
                                             (json_int_t)r->outputs[i].size, "sha256",
                                             r->outputs[i].sha256));
  json_t *doc = json_pack("{s:s, s:s, s:{s:s, s:s, s:s}, s:o, s:o, s:s, s:o}", "format",
                          AGENT_BUILD_FORMAT, "id", r->id, "source", "kind",
                          r->source == AGENT_BUILD_FROM_REV ? "rev" : "snapshot", "given", r->given,
                          "id", r->source_id, "argv", strv_json(r->argv), "protected",
                          strv_json(r->protect), "mechanism", r->mechanism, "outputs", outputs);
  int rc = doc ? jcs_dump(doc, out, length, err)
               : cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "build record");
  json_decref(doc);
  return rc;
}

int agent_build_id_check(const char *id, struct cordon_error **err) {
  size_t n = id ? strlen(id) : 0;
  bool ok = n == AGENT_BUILD_ID_HEX;
  for (size_t i = 0; ok && i < n; i++)
    ok = (id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f');
  if (!ok)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                            "'%s' is not a build id (%d lowercase hex digits)", id ? id : "",
                            AGENT_BUILD_ID_HEX);
  return 0;
}

static int bad(struct cordon_error **err, const char *what) {
  return cordon_error_set(err, CORDON_ERR_INVALID, 0, "build record: %s", what);
}

static int strv_of(json_t *a, char ***out) {
  if (!json_is_array(a))
    return -1;
  *out = calloc(json_array_size(a) + 1, sizeof(char *));
  for (size_t i = 0; *out && i < json_array_size(a); i++) {
    const char *s = json_string_value(json_array_get(a, i));
    if (!s || !((*out)[i] = strdup(s)))
      return -1;
  }
  return *out ? 0 : -1;
}

static int decode_outputs(json_t *a, struct agent_build_record *r, struct cordon_error **err) {
  if (!json_is_array(a))
    return bad(err, "outputs is not a list");
  if (!(r->outputs = calloc(json_array_size(a) + 1, sizeof(*r->outputs))))
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "build record");
  for (size_t i = 0; i < json_array_size(a); i++) {
    json_t *o = json_array_get(a, i);
    const char *path = json_string_value(json_object_get(o, "path"));
    const char *digest = json_string_value(json_object_get(o, "sha256"));
    json_t *size = json_object_get(o, "size");
    if (json_object_size(o) != 3 || !path || !digest || !cas_hex_valid(digest) ||
        !json_is_number(size) || json_number_value(size) < 0)
      return bad(err, "an output needs path, size and sha256");
    r->outputs[i].path = strdup(path);
    r->outputs[i].size = (uint64_t)json_number_value(size);
    memcpy(r->outputs[i].sha256, digest, 65);
    r->count++;
  }
  return 0;
}

int agent_build_record_decode(const char *text, size_t length, struct agent_build_record **out,
                              struct cordon_error **err) {
  *out = NULL;
  struct jcs_check check;
  if (jcs_check_canonical(text, length, NULL, 0, &check) < 0)
    return bad(err, "not canonical JSON (edited?)");
  json_t *doc = NULL;
  if (jcs_parse(text, length, BUILD_RECORD_MAX, "build record", &doc, err) < 0)
    return -1;
  struct agent_build_record *r = calloc(1, sizeof(*r));
  json_t *source = json_object_get(doc, "source");
  const char *format = json_string_value(json_object_get(doc, "format"));
  const char *id = json_string_value(json_object_get(doc, "id"));
  const char *kind = json_string_value(json_object_get(source, "kind"));
  const char *given = json_string_value(json_object_get(source, "given"));
  const char *source_id = json_string_value(json_object_get(source, "id"));
  const char *mechanism = json_string_value(json_object_get(doc, "mechanism"));
  int rc = -1;
  if (!r)
    cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "build record");
  else if (json_object_size(doc) != 7 || !format || strcmp(format, AGENT_BUILD_FORMAT) || !id ||
           agent_build_id_check(id, NULL) < 0 || !kind || !given || !source_id || !mechanism ||
           json_object_size(source) != 3 || (strcmp(kind, "rev") && strcmp(kind, "snapshot")))
    bad(err, "not a " AGENT_BUILD_FORMAT " document");
  else if (strv_of(json_object_get(doc, "argv"), &r->argv) < 0 ||
           strv_of(json_object_get(doc, "protected"), &r->protect) < 0)
    bad(err, "argv and protected must be lists of strings");
  else if (decode_outputs(json_object_get(doc, "outputs"), r, err) == 0) {
    r->id = strdup(id);
    r->source = kind[0] == 'r' ? AGENT_BUILD_FROM_REV : AGENT_BUILD_FROM_SNAPSHOT;
    r->given = strdup(given);
    r->source_id = strdup(source_id);
    r->mechanism = strdup(mechanism);
    rc = 0;
  }
  json_decref(doc);
  if (rc < 0)
    agent_build_record_free(r);
  else
    *out = r;
  return rc;
}

static int record_path(struct cordon_context *ctx, const char *id, char **out,
                       struct cordon_error **err) {
  if (asprintf(out, "%s/%s/%s.json", cordon_context_project_dir(ctx), AGENT_BUILD_DIR, id) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "build record");
  return 0;
}

int agent_build_record_save(struct cordon_context *ctx, const struct agent_build_record *r,
                            struct cordon_error **err) {
  _cleanup_free_ char *text = NULL, *path = NULL, *dir = NULL, *details = NULL;
  size_t length = 0;
  char digest[CRYPTO_SHA256_HEX_LEN + 1];
  if (agent_build_record_encode(r, &text, &length, err) < 0 ||
      record_path(ctx, r->id, &path, err) < 0 || crypto_sha256_hex(text, length, digest, err) < 0)
    return -1;
  if (asprintf(&dir, "%s/%s", cordon_context_project_dir(ctx), AGENT_BUILD_DIR) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "build record");
  if (fs_mkdir_p(dir, 0700, err) < 0 || fs_write_atomic(path, text, length, 0600, err) < 0)
    return -1;
  json_t *d = json_pack("{s:s, s:s, s:I}", "record_sha256", digest, "source", r->source_id,
                        "outputs", (json_int_t)r->count);
  size_t details_length = 0;
  int rc = jcs_dump(d, &details, &details_length, err);
  json_decref(d);
  struct cordon_audit_log *log = NULL;
  if (rc < 0 || cordon_audit_open_project(ctx, NULL, &log, err) < 0)
    return -1;
  struct cordon_audit_event ev = {.event = "build.recorded",
                                  .actor = "cordon",
                                  .resource_type = "build",
                                  .resource_id = r->id,
                                  .details_json = details};
  rc = cordon_audit_append(log, &ev, NULL, err);
  cordon_audit_close(log);
  return rc;
}

int agent_build_record_load(struct cordon_context *ctx, const char *id,
                            struct agent_build_record **out, struct cordon_error **err) {
  _cleanup_free_ char *path = NULL;
  _cleanup_free_ unsigned char *text = NULL;
  size_t length = 0;
  if (agent_build_id_check(id, err) < 0 || record_path(ctx, id, &path, err) < 0)
    return -1;
  if (fs_read_file(path, BUILD_RECORD_MAX, &text, &length, err) < 0) {
    if (*err && (*err)->errnum == ENOENT) {
      cordon_error_free(*err);
      *err = NULL;
      return cordon_error_set(err, CORDON_ERR_NOT_FOUND, ENOENT, "no build %s", id);
    }
    return -1;
  }
  if (agent_build_record_decode((const char *)text, length, out, err) < 0)
    return cordon_error_prefix(err, "%s", path);
  if (strcmp((*out)->id, id)) {
    agent_build_record_free(*out);
    *out = NULL;
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "%s: records another build", path);
  }
  return 0;
}
