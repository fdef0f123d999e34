/* Sidecars (a loose blob's content type and metadata, <hex>.meta.json in its shard): their
 * bytes, and reading and checking them (for `cas info`, the single put and verify). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cordon/cas.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "store/sidecar.h"

int cas_sidecar_read(struct cordon_cas *cas, const unsigned char digest[CAS_DIGEST_LEN],
                     json_t **out, struct cordon_error **err) {
  char hex[CAS_HEX_LEN + 1], name[CAS_HEX_LEN + sizeof(CAS_SIDECAR_SUFFIX)];
  cas_hex(digest, hex);
  snprintf(name, sizeof(name), "%s%s", hex, CAS_SIDECAR_SUFFIX);
  *out = NULL;
  int shard = cas_shard_fd(cas, digest[0], false, err);
  if (shard == -2)
    return 0;
  if (shard < 0)
    return -1;
  struct stat st;
  if (fstatat(shard, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
    if (errno == ENOENT)
      return 0;
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "sidecar of %s", hex);
  }
  if (!S_ISREG(st.st_mode))
    return cordon_error_set(err, CORDON_ERR_INTEGRITY, 0,
                            "sidecar of %s is unreadable: it is %s, not a regular file", hex,
                            cas_kind_word(st.st_mode));
  _cleanup_close_ int fd =
      openat(shard, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0)
    return cordon_error_set(err, errno == ELOOP ? CORDON_ERR_INTEGRITY : CORDON_ERR_SYSTEM, errno,
                            "sidecar of %s", hex);
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
    return cordon_error_set(err, CORDON_ERR_INTEGRITY, 0,
                            "sidecar of %s is unreadable: not a regular file", hex);
  _cleanup_free_ unsigned char *text = NULL;
  size_t len = 0;
  if (fs_read_fd(fd, CAS_SIDECAR_MAX, &text, &len, err) < 0)
    return cordon_error_prefix(err, "sidecar of %s", hex);
  json_error_t jerr;
  json_t *doc = json_loadb((const char *)text, len, JSON_REJECT_DUPLICATES, &jerr);
  if (!json_is_object(doc)) {
    json_decref(doc);
    return cordon_error_set(err, CORDON_ERR_INTEGRITY, 0, "sidecar of %s is not a JSON object",
                            hex);
  }
  *out = doc;
  return 1;
}

/* Check a sidecar's fields against its blob. Returns NULL when fine, else a static reason. */
const char *cas_sidecar_problem(json_t *doc, const char *hex, uint64_t blob_size) {
  json_t *digest = NULL, *size = NULL, *type = NULL, *meta = NULL;
  json_error_t jerr;
  if (json_unpack_ex(doc, &jerr, JSON_STRICT, "{s:o, s:o, s:o, s?o}", "content_type", &type,
                     "digest", &digest, "size", &size, "metadata", &meta) < 0)
    return "unexpected or missing fields";
  if (!json_is_string(type))
    return "content_type is not a string";
  if (!json_is_string(digest) || strcmp(json_string_value(digest), hex) != 0)
    return "names another digest";
  if (!json_is_integer(size) || json_integer_value(size) < 0 ||
      (uint64_t)json_integer_value(size) != blob_size)
    return "size does not match the blob";
  if (meta && !json_is_object(meta))
    return "metadata is not an object";
  return NULL;
}

/* The sidecar's bytes: canonical-enough JSON (sorted keys, compact) and a newline. */
int cas_sidecar_text(const unsigned char digest[CAS_DIGEST_LEN], uint64_t size,
                     const char *content_type, const char *metadata_json, char **out,
                     size_t *out_len, struct cordon_error **err) {
  char hex[CAS_HEX_LEN + 1];
  cas_hex(digest, hex);
  json_t *meta = NULL;
  if (metadata_json) {
    json_error_t jerr;
    meta = json_loads(metadata_json, JSON_REJECT_DUPLICATES, &jerr);
    if (!json_is_object(meta)) {
      json_decref(meta);
      return cordon_error_set(err, CORDON_ERR_USAGE, 0, "metadata must be a JSON object: %s",
                              jerr.text[0] ? jerr.text : "not an object");
    }
  }
  json_t *doc = json_pack("{s:s, s:s, s:I}", "content_type",
                          content_type ? content_type : "application/octet-stream", "digest", hex,
                          "size", (json_int_t)size);
  if (doc && meta)
    json_object_set_new(doc, "metadata", meta);
  else
    json_decref(meta);
  char *text = doc ? json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
  json_decref(doc);
  if (!text)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "sidecar of %s", hex);
  size_t len = strlen(text);
  text[len] = '\n'; /* json_dumps leaves room: the NUL is replaced, length grows by one */
  *out = text;
  *out_len = len + 1;
  return 0;
}

/* True when the sidecar on disk already holds exactly these bytes. */
bool cas_sidecar_same(int shard, const char *name, const char *text, size_t len) {
  int fd = openat(shard, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0)
    return false;
  struct stat st;
  bool same = false;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size == len) {
    char *buf = malloc(len + 1);
    if (buf && cas_read_retry(fd, buf, len + 1) == (ssize_t)len && !memcmp(buf, text, len))
      same = true;
    free(buf);
  }
  close(fd);
  return same;
}
