/* The revocation list of API tokens (tokens.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include <jansson.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "protocol/tokens.h"

#define TOKENS_MAX_FILE (16u << 20)

bool tokens_jti_valid(const char *jti) {
  size_t n = strlen(jti);
  if (n == 0 || n > 128)
    return false;
  for (size_t i = 0; i < n; i++)
    if (!((jti[i] >= 'a' && jti[i] <= 'z') || (jti[i] >= 'A' && jti[i] <= 'Z') ||
          (jti[i] >= '0' && jti[i] <= '9') || jti[i] == '-' || jti[i] == '_'))
      return false;
  return true;
}

/* The list's array (a new empty one when there is no file yet). */
static int load_list(int dirfd, json_t **out, struct cordon_error **err) {
  _cleanup_close_ int fd = openat(dirfd, TOKENS_REVOKED_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno != ENOENT)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "open %s", TOKENS_REVOKED_FILE);
    *out = json_array();
    return *out ? 0 : cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "revocation list");
  }
  _cleanup_free_ unsigned char *data = NULL;
  size_t length = 0;
  if (fs_read_fd(fd, TOKENS_MAX_FILE, &data, &length, err) < 0)
    return -1;
  json_t *doc = json_loadb((const char *)data, length, JSON_REJECT_DUPLICATES, NULL);
  json_t *list = json_object_get(doc, "revoked");
  bool ok = json_is_object(doc) && json_object_size(doc) == 1 && json_is_array(list);
  size_t i;
  json_t *v;
  json_array_foreach(list, i, v) {
    if (!json_is_string(v))
      ok = false;
  }
  if (!ok) {
    json_decref(doc);
    return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                            "%s is malformed (expected {\"revoked\": [JTI, ...]})",
                            TOKENS_REVOKED_FILE);
  }
  *out = json_incref(list);
  json_decref(doc);
  return 0;
}

static bool list_has(const json_t *list, const char *jti) {
  size_t i;
  json_t *v;
  json_array_foreach(list, i, v) {
    if (!strcmp(json_string_value(v), jti))
      return true;
  }
  return false;
}

static int compare_strings(const void *a, const void *b) {
  return strcmp(json_string_value(*(json_t *const *)a), json_string_value(*(json_t *const *)b));
}

int tokens_revoke(const char *state_dir, const char *jti, bool *added, struct cordon_error **err) {
  if (!tokens_jti_valid(jti))
    return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                            "'%s' is not a token id (letters, digits, - and _)", jti);
  _cleanup_close_ int dirfd = open(state_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dirfd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "open %s", state_dir);
  _cleanup_close_ int lock =
      openat(dirfd, TOKENS_REVOKED_FILE ".lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (lock < 0 || flock(lock, LOCK_EX) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "lock %s", TOKENS_REVOKED_FILE);
  json_t *list = NULL;
  if (load_list(dirfd, &list, err) < 0)
    return -1;
  *added = !list_has(list, jti);
  int r = 0;
  if (*added) {
    json_array_append_new(list, json_string(jti));
    size_t n = json_array_size(list);
    json_t **items = calloc(n, sizeof(*items));
    json_t *sorted = json_array();
    for (size_t i = 0; items && i < n; i++)
      items[i] = json_array_get(list, i);
    if (items && sorted) {
      qsort(items, n, sizeof(*items), compare_strings);
      for (size_t i = 0; i < n; i++)
        json_array_append(sorted, items[i]);
    }
    json_t *doc = sorted ? json_pack("{s:o}", "revoked", sorted) : NULL;
    _cleanup_free_ char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    free(items);
    json_decref(doc);
    if (!text) {
      r = cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "revocation list");
    } else {
      size_t length = strlen(text);
      text[length] = 0;
      _cleanup_free_ char *line = NULL;
      if (asprintf(&line, "%s\n", text) < 0)
        r = cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "revocation list");
      else
        r = fs_write_atomic_at(dirfd, TOKENS_REVOKED_FILE, line, strlen(line), 0600, err);
    }
  }
  json_decref(list);
  return r;
}

int tokens_is_revoked(const char *state_dir, const char *jti, bool *revoked,
                      struct cordon_error **err) {
  _cleanup_close_ int dirfd = open(state_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dirfd < 0) {
    if (errno == ENOENT) {
      *revoked = false;
      return 0;
    }
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "open %s", state_dir);
  }
  json_t *list = NULL;
  if (load_list(dirfd, &list, err) < 0)
    return -1;
  *revoked = list_has(list, jti);
  json_decref(list);
  return 0;
}
