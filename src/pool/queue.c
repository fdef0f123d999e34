/* The dispatch queue (queue.h): the dispatch document, pure; submission, claim by rename and
 * the result record, thin. */
#include "pool/queue.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/strv.h"
#include "crypto/digest.h"
#include "crypto/jcs.h"
#include "pool/pool.h"

#define DISPATCH_TYPE "cordon.pool.dispatch"

void pool_dispatch_clear(struct pool_dispatch *d) {
  if (!d)
    return;
  free(d->pool);
  strv_free(d->argv);
  json_decref(d->recipe);
  free(d->canonical);
  free(d->file);
  memset(d, 0, sizeof(*d));
}

static bool is_hex(const char *s, size_t n) {
  if (!s || strlen(s) != n)
    return false;
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
      return false;
  return true;
}

/* Fill out from a dispatch object already checked for shape; takes no reference to doc. */
static int dispatch_fill(json_t *doc, struct pool_dispatch *out, struct cordon_error **err) {
  json_t *argv = json_object_get(doc, "argv");
  size_t n = json_array_size(argv);
  out->argv = calloc(n + 1, sizeof(char *));
  out->pool = strdup(json_string_value(json_object_get(doc, "pool")));
  if (!out->argv || !out->pool)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "dispatch");
  for (size_t i = 0; i < n; i++)
    if (!(out->argv[i] = strdup(json_string_value(json_array_get(argv, i)))))
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "dispatch");
  json_t *recipe = json_object_get(doc, "recipe");
  out->recipe = json_is_object(recipe) ? json_incref(recipe) : NULL;
  if (jcs_dump(doc, &out->canonical, &out->canonical_length, err) < 0 ||
      crypto_sha256_hex(out->canonical, out->canonical_length, out->id, err) < 0)
    return -1;
  return 0;
}

/* The one check of a dispatch's shape, for what we build and what we read. */
static int dispatch_check(const json_t *doc, struct cordon_error **err) {
  if (!json_is_object(doc) || json_object_size(doc) != 5)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                            "a dispatch has exactly argv, nonce, pool, recipe and type");
  json_t *type = json_object_get(doc, "type"), *pool = json_object_get(doc, "pool"),
         *nonce = json_object_get(doc, "nonce"), *argv = json_object_get(doc, "argv"),
         *recipe = json_object_get(doc, "recipe");
  if (!json_is_string(type) || strcmp(json_string_value(type), DISPATCH_TYPE))
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "dispatch: type is not " DISPATCH_TYPE);
  if (!json_is_string(pool) || !pool_name_valid(json_string_value(pool)))
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "dispatch: pool is not a pool name");
  if (!json_is_string(nonce) || !is_hex(json_string_value(nonce), 32))
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "dispatch: nonce is not 32 hex digits");
  if (!json_is_array(argv) || json_array_size(argv) == 0 ||
      json_array_size(argv) > POOL_DISPATCH_ARGV_MAX)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "dispatch: argv is not 1 to %u strings",
                            POOL_DISPATCH_ARGV_MAX);
  size_t i;
  json_t *word;
  json_array_foreach(argv, i, word) {
    if (!json_is_string(word) || strlen(json_string_value(word)) != json_string_length(word))
      return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                              "dispatch: argv[%zu] is not a string without NUL", i);
  }
  if (!json_is_null(recipe) && !json_is_object(recipe))
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "dispatch: recipe is not an object");
  return 0;
}

int pool_dispatch_build(const char *pool, const json_t *recipe, const char *const *argv,
                        const char *nonce, struct pool_dispatch *out, struct cordon_error **err) {
  memset(out, 0, sizeof(*out));
  json_t *words = json_array();
  for (size_t i = 0; words && argv && argv[i]; i++)
    if (json_array_append_new(words, json_string(argv[i])) < 0) {
      json_decref(words);
      return cordon_error_set(err, CORDON_ERR_INVALID, 0, "argv[%zu] is not UTF-8", i);
    }
  json_t *doc = json_pack("{s:o,s:s,s:s,s:O,s:s}", "argv", words, "nonce", nonce ? nonce : "",
                          "pool", pool ? pool : "", "recipe",
                          recipe ? (json_t *)recipe : json_null(), "type", DISPATCH_TYPE);
  if (!doc)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "dispatch: a part is not UTF-8");
  int r = dispatch_check(doc, err) < 0 || dispatch_fill(doc, out, err) < 0 ? -1 : 0;
  json_decref(doc);
  if (r < 0)
    pool_dispatch_clear(out);
  return r;
}

int pool_dispatch_parse(const char *text, size_t length, const char *expected_id,
                        struct pool_dispatch *out, struct cordon_error **err) {
  memset(out, 0, sizeof(*out));
  json_t *doc = NULL;
  if (jcs_parse(text, length, POOL_DISPATCH_MAX, "dispatch", &doc, err) < 0)
    return -1;
  int r = dispatch_check(doc, err) < 0 || dispatch_fill(doc, out, err) < 0 ? -1 : 0;
  json_decref(doc);
  if (r == 0 && (out->canonical_length != length || memcmp(out->canonical, text, length)))
    r = cordon_error_set(err, CORDON_ERR_INTEGRITY, 0, "dispatch is not canonical JSON");
  if (r == 0 && expected_id && strcmp(expected_id, out->id))
    r = cordon_error_set(err, CORDON_ERR_INTEGRITY, 0, "dispatch %s hashes to %s", expected_id,
                         out->id);
  if (r < 0)
    pool_dispatch_clear(out);
  return r;
}

/* ---- effects ---- */

static int queue_dir(const char *state_dir, const char *pool, const char *part, bool create,
                     int *out, struct cordon_error **err) {
  *out = -1;
  if (!pool_name_valid(pool))
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "'%s' is not a pool name", pool);
  _cleanup_free_ char *path = NULL;
  if (asprintf(&path, "%s/pools/queue/%s/%s", state_dir, pool, part) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "queue");
  if (create && fs_mkdir_p(path, 0700, err) < 0)
    return -1;
  if ((*out = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
    if (errno == ENOENT && !create)
      return 0;
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot open %s", path);
  }
  return 1;
}

int pool_queue_submit(const char *state_dir, const char *pool, const json_t *recipe,
                      const char *const *argv, struct pool_dispatch *out,
                      struct cordon_error **err) {
  _cleanup_free_ char *nonce = NULL;
  if (fs_random_hex(16, &nonce, err) < 0 ||
      pool_dispatch_build(pool, recipe, argv, nonce, out, err) < 0)
    return -1;
  _cleanup_close_ int pending = -1;
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  char name[128];
  snprintf(name, sizeof(name), "%016llx-%s.json",
           (unsigned long long)now.tv_sec * 1000000000ull + (unsigned long long)now.tv_nsec,
           out->id);
  if (queue_dir(state_dir, pool, "pending", true, &pending, err) < 0 ||
      fs_write_atomic_at(pending, name, out->canonical, out->canonical_length, 0600, err) < 0) {
    pool_dispatch_clear(out);
    return -1;
  }
  return 0;
}

static int name_compare(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The pending names (<SEQ>-<ID>.json, hidden temp files skipped), oldest first. */
static int pending_names(int dirfd, char ***out, struct cordon_error **err) {
  *out = NULL;
  int fd = dup(dirfd);
  DIR *dir = fd < 0 ? NULL : fdopendir(fd);
  if (!dir) {
    if (fd >= 0)
      close(fd);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot read the queue");
  }
  char **names = NULL;
  size_t n = 0;
  struct dirent *de;
  int r = 0;
  while ((de = readdir(dir))) {
    size_t len = strlen(de->d_name);
    if (de->d_name[0] == '.' || len != 16 + 1 + 64 + 5 || strcmp(de->d_name + len - 5, ".json"))
      continue;
    char **grown = realloc(names, (n + 2) * sizeof(char *));
    if (!grown || !(grown[n] = strdup(de->d_name))) {
      names = grown ? grown : names;
      r = cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "queue");
      break;
    }
    names = grown;
    names[++n] = NULL;
  }
  closedir(dir);
  if (names)
    qsort(names, n, sizeof(char *), name_compare);
  if (r < 0) {
    strv_free(names);
    return -1;
  }
  *out = names;
  return (int)n;
}

int pool_queue_claim(const char *state_dir, const char *pool, struct pool_dispatch *out,
                     struct cordon_error **err) {
  memset(out, 0, sizeof(*out));
  _cleanup_close_ int pending = -1, claimed = -1;
  if (queue_dir(state_dir, pool, "pending", true, &pending, err) < 0 ||
      queue_dir(state_dir, pool, "claimed", true, &claimed, err) < 0)
    return -1;
  _cleanup_(strv_freep) char **names = NULL;
  if (pending_names(pending, &names, err) < 0)
    return -1;
  for (size_t i = 0; names && names[i]; i++) {
    /* The claim: whoever renames it first has it. */
    if (renameat2(pending, names[i], claimed, names[i], RENAME_NOREPLACE) < 0) {
      if (errno == ENOENT || errno == EEXIST)
        continue;
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot claim dispatch %s", names[i]);
    }
    char id[65];
    snprintf(id, sizeof(id), "%.64s", names[i] + 17);
    _cleanup_close_ int fd = openat(claimed, names[i], O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    _cleanup_free_ unsigned char *data = NULL;
    size_t length = 0;
    if (fd < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot open claimed dispatch %s", id);
    if (fs_read_fd(fd, POOL_DISPATCH_MAX, &data, &length, err) < 0 ||
        pool_dispatch_parse((const char *)data, length, id, out, err) < 0)
      return cordon_error_prefix(err, "claimed dispatch %s", id);
    if (strcmp(out->pool, pool)) {
      pool_dispatch_clear(out);
      return cordon_error_set(err, CORDON_ERR_INTEGRITY, 0,
                              "claimed dispatch %s names pool %s, queued under %s", id, out->pool,
                              pool);
    }
    if (!(out->file = strdup(names[i]))) {
      pool_dispatch_clear(out);
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "dispatch");
    }
    return 1;
  }
  return 0;
}

int pool_queue_finish(const char *state_dir, const struct pool_dispatch *d, const json_t *result,
                      struct cordon_error **err) {
  _cleanup_close_ int done = -1, claimed = -1;
  _cleanup_free_ char *text = NULL;
  size_t length;
  char name[80];
  snprintf(name, sizeof(name), "%s.json", d->id);
  if (queue_dir(state_dir, d->pool, "done", true, &done, err) < 0 ||
      queue_dir(state_dir, d->pool, "claimed", true, &claimed, err) < 0 ||
      jcs_dump(result, &text, &length, err) < 0 ||
      fs_write_atomic_at(done, name, text, length, 0600, err) < 0)
    return -1;
  if (d->file && unlinkat(claimed, d->file, 0) < 0 && errno != ENOENT)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot remove claimed %s", d->file);
  return 0;
}

int pool_queue_pending(const char *state_dir, const char *pool, size_t *count,
                       struct cordon_error **err) {
  *count = 0;
  _cleanup_close_ int pending = -1;
  int r = queue_dir(state_dir, pool, "pending", false, &pending, err);
  if (r <= 0)
    return r;
  _cleanup_(strv_freep) char **names = NULL;
  if ((r = pending_names(pending, &names, err)) < 0)
    return -1;
  *count = (size_t)r;
  return 0;
}

const char *pool_dispatch_state_name(enum pool_dispatch_state state) {
  switch (state) {
  case POOL_DISPATCH_PENDING: return "pending";
  case POOL_DISPATCH_CLAIMED: return "claimed";
  case POOL_DISPATCH_DONE: return "done";
  case POOL_DISPATCH_UNKNOWN: break;
  }
  return "unknown";
}

/* Whether part/ holds <SEQ>-<id>.json. */
static int queued_under(int dirfd, const char *id, bool *found, struct cordon_error **err) {
  *found = false;
  _cleanup_(strv_freep) char **names = NULL;
  if (pending_names(dirfd, &names, err) < 0)
    return -1;
  for (size_t i = 0; names && names[i] && !*found; i++)
    *found = strncmp(names[i] + 17, id, 64) == 0;
  return 0;
}

/* The parts are read in the order a dispatch moves through them (pending, claimed, done), and
 * each move makes the new name before the old one goes: a dispatch moving while we look is
 * seen in the later part, never missed. */
int pool_queue_status(const char *state_dir, const char *pool, const char *id,
                      enum pool_dispatch_state *state, json_t **result, struct cordon_error **err) {
  *state = POOL_DISPATCH_UNKNOWN;
  *result = NULL;
  if (!is_hex(id, 64))
    return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                            "'%s' is not a dispatch id (64 lowercase hex digits)", id);
  static const struct {
    const char *part;
    enum pool_dispatch_state state;
  } queued[] = {{"pending", POOL_DISPATCH_PENDING}, {"claimed", POOL_DISPATCH_CLAIMED}};
  int r;
  for (size_t i = 0; i < 2; i++) {
    _cleanup_close_ int dirfd = -1;
    bool found = false;
    if ((r = queue_dir(state_dir, pool, queued[i].part, false, &dirfd, err)) < 0)
      return -1;
    if (r > 0 && queued_under(dirfd, id, &found, err) < 0)
      return -1;
    if (found) {
      *state = queued[i].state;
      return 0;
    }
  }
  _cleanup_close_ int done = -1;
  if ((r = queue_dir(state_dir, pool, "done", false, &done, err)) <= 0)
    return r;
  char name[80];
  snprintf(name, sizeof(name), "%s.json", id);
  _cleanup_close_ int fd = openat(done, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return errno == ENOENT ? 0 : cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "dispatch %s", id);
  _cleanup_free_ unsigned char *data = NULL;
  size_t length = 0;
  if (fs_read_fd(fd, POOL_DISPATCH_MAX, &data, &length, err) < 0)
    return cordon_error_prefix(err, "dispatch %s", id);
  json_error_t jerr;
  if (!(*result = json_loadb((const char *)data, length, 0, &jerr)))
    return cordon_error_set(err, CORDON_ERR_INTEGRITY, 0, "dispatch %s: result: %s", id, jerr.text);
  *state = POOL_DISPATCH_DONE;
  return 0;
}
