/* Warm slots (warm.h): the fit of a slot to a dispatch, pure; the records and their moves,
 * thin. */
#include "pool/warm.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "crypto/jcs.h"
#include "pool/pool.h"
#include "protocol/session-id.h"

#define WARM_RECORD_MAX 4096u

enum pool_warm_fit pool_warm_classify(const struct pool_warm_record *slot,
                                      const struct pool_warm_record *current) {
  if (strcmp(slot->pool_hash, current->pool_hash))
    return POOL_WARM_DRIFTED;
  bool same_manifest = !strcmp(slot->effective_manifest_hash, current->effective_manifest_hash);
  if (!strcmp(slot->overrides_hash, current->overrides_hash) && !same_manifest)
    return POOL_WARM_DRIFTED;
  if (same_manifest && !strcmp(slot->backend, current->backend))
    return POOL_WARM_MATCH;
  return POOL_WARM_OTHER;
}

#define FIELDS(X) \
  X(backend) X(effective_manifest_hash) X(overrides_hash) X(pool) X(pool_hash) X(session)

int pool_warm_record_format(const struct pool_warm_record *r, char **out,
                            struct cordon_error **err) {
  json_auto_t *doc = json_object();
#define SET(f)                                                     \
  if (!doc || json_object_set_new(doc, #f, json_string(r->f)) < 0) \
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "warm record");
  FIELDS(SET)
#undef SET
  size_t n;
  return jcs_dump(doc, out, &n, err);
}

static bool is_digest(const char *s) {
  if (strlen(s) != 64)
    return false;
  for (; *s; s++)
    if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
      return false;
  return true;
}

int pool_warm_record_parse(const char *text, size_t length, struct pool_warm_record *out,
                           struct cordon_error **err) {
  memset(out, 0, sizeof(*out));
  json_auto_t *doc = NULL;
  if (jcs_parse(text, length, WARM_RECORD_MAX, "warm slot record", &doc, err) < 0)
    return -1;
  if (!json_is_object(doc) || json_object_size(doc) != 6)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "warm slot record: wrong members");
#define GET(f)                                                                          \
  {                                                                                     \
    const char *v = json_string_value(json_object_get(doc, #f));                        \
    if (!v || !*v || strlen(v) >= sizeof(out->f))                                       \
      return cordon_error_set(err, CORDON_ERR_INVALID, 0, "warm slot record: bad " #f); \
    memcpy(out->f, v, strlen(v) + 1);                                                   \
  }
  FIELDS(GET)
#undef GET
  if (!cordon_session_id_valid(out->session) || !pool_name_valid(out->pool) ||
      !is_digest(out->pool_hash) || !is_digest(out->overrides_hash) ||
      !is_digest(out->effective_manifest_hash))
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "warm slot record: malformed values");
  return 0;
}

/* ---- effects ---- */

static int warm_dir(const char *state_dir, const char *pool, const char *part, int *out,
                    struct cordon_error **err) {
  *out = -1;
  if (!pool_name_valid(pool))
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "'%s' is not a pool name", pool);
  _cleanup_free_ char *path = NULL;
  if (asprintf(&path, "%s/pools/warm/%s/%s", state_dir, pool, part) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "warm slots");
  if (fs_mkdir_p(path, 0700, err) < 0)
    return -1;
  if ((*out = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot open %s", path);
  return 0;
}

int pool_warm_add(const char *state_dir, const struct pool_warm_record *r,
                  struct cordon_error **err) {
  _cleanup_close_ int ready = -1;
  _cleanup_free_ char *text = NULL;
  char name[80];
  if (!cordon_session_id_valid(r->session))
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "'%s' is not a session id", r->session);
  snprintf(name, sizeof(name), "%s.json", r->session);
  if (warm_dir(state_dir, r->pool, "ready", &ready, err) < 0 ||
      pool_warm_record_format(r, &text, err) < 0)
    return -1;
  return fs_write_atomic_at(ready, name, text, strlen(text), 0600, err);
}

void pool_warm_take_clear(struct pool_warm_take *t) {
  free(t->drifted);
  memset(t, 0, sizeof(*t));
}

/* Read ready/name; 0 with the record, 1 when it is gone or unreadable (skipped). */
static int read_record(int dirfd, const char *name, struct pool_warm_record *r) {
  _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  _cleanup_free_ unsigned char *data = NULL;
  size_t length = 0;
  struct cordon_error *ignored = NULL;
  int bad = fd < 0 || fs_read_fd(fd, WARM_RECORD_MAX, &data, &length, &ignored) < 0 ||
            pool_warm_record_parse((const char *)data, length, r, &ignored) < 0;
  cordon_error_free(ignored);
  return bad ? 1 : 0;
}

int pool_warm_take(const char *state_dir, const struct pool_warm_record *current,
                   struct pool_warm_take *out, struct cordon_error **err) {
  memset(out, 0, sizeof(*out));
  _cleanup_close_ int ready = -1, used = -1, quarantine = -1;
  if (warm_dir(state_dir, current->pool, "ready", &ready, err) < 0 ||
      warm_dir(state_dir, current->pool, "used", &used, err) < 0 ||
      warm_dir(state_dir, current->pool, "quarantine", &quarantine, err) < 0)
    return -1;
  int fd = dup(ready);
  DIR *dir = fd < 0 ? NULL : fdopendir(fd);
  if (!dir) {
    if (fd >= 0)
      close(fd);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot read warm slots");
  }
  struct dirent *de;
  int r = 0;
  while ((de = readdir(dir))) {
    struct pool_warm_record slot;
    if (de->d_name[0] == '.' || read_record(ready, de->d_name, &slot))
      continue;
    enum pool_warm_fit fit = pool_warm_classify(&slot, current);
    if (fit == POOL_WARM_OTHER || (fit == POOL_WARM_MATCH && out->found))
      continue;
    int to = fit == POOL_WARM_MATCH ? used : quarantine;
    /* The move is the claim: whoever renames it first has it. */
    if (renameat(ready, de->d_name, to, de->d_name) < 0) {
      if (errno == ENOENT)
        continue;
      r = cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot move warm slot %s", de->d_name);
      break;
    }
    if (fit == POOL_WARM_MATCH) {
      out->taken = slot;
      out->found = 1;
      continue;
    }
    struct pool_warm_record *grown =
        realloc(out->drifted, (out->n_drifted + 1) * sizeof(*out->drifted));
    if (!grown) {
      r = cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "warm slots");
      break;
    }
    out->drifted = grown;
    out->drifted[out->n_drifted++] = slot;
  }
  closedir(dir);
  return r;
}

int pool_warm_count(const char *state_dir, const char *pool, size_t *count,
                    struct cordon_error **err) {
  *count = 0;
  _cleanup_close_ int ready = -1;
  if (warm_dir(state_dir, pool, "ready", &ready, err) < 0)
    return -1;
  int fd = dup(ready);
  DIR *dir = fd < 0 ? NULL : fdopendir(fd);
  if (!dir) {
    if (fd >= 0)
      close(fd);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot read warm slots");
  }
  struct dirent *de;
  while ((de = readdir(dir)))
    if (de->d_name[0] != '.')
      (*count)++;
  closedir(dir);
  return 0;
}

int pool_warm_list(const char *state_dir, const char *pool, struct pool_warm_record **out,
                   size_t *n, struct cordon_error **err) {
  *out = NULL;
  *n = 0;
  if (!pool_name_valid(pool))
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "'%s' is not a pool name", pool);
  _cleanup_free_ char *path = NULL;
  if (asprintf(&path, "%s/pools/warm/%s/ready", state_dir, pool) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "warm slots");
  /* Looking creates nothing: no directory, no warm slot. */
  _cleanup_close_ int ready = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (ready < 0)
    return errno == ENOENT
               ? 0
               : cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot open %s", path);
  int fd = dup(ready);
  DIR *dir = fd < 0 ? NULL : fdopendir(fd);
  if (!dir) {
    if (fd >= 0)
      close(fd);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot read %s", path);
  }
  struct dirent *de;
  int r = 0;
  while ((de = readdir(dir))) {
    struct pool_warm_record slot;
    if (de->d_name[0] == '.' || read_record(ready, de->d_name, &slot))
      continue; /* taken meanwhile, or not a record */
    struct pool_warm_record *grown = realloc(*out, (*n + 1) * sizeof(**out));
    if (!grown) {
      r = cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "warm slots");
      break;
    }
    *out = grown;
    (*out)[(*n)++] = slot;
  }
  closedir(dir);
  if (r < 0) {
    free(*out);
    *out = NULL;
    *n = 0;
  }
  return r;
}
