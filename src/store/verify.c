/* Walking the store: listing loose blobs, removing one, cleaning leftover temp files, and
 * `cas verify` (every stored copy re-hashed on several threads, sidecars and refs checked, and
 * anything that does not belong reported). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cordon/cas.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/strv.h"
#include "store/cas.h"
#include "store/sidecar.h"

static bool is_blob_name(const char *name, unsigned byte, unsigned char digest[CAS_DIGEST_LEN]) {
  return strlen(name) == CAS_HEX_LEN && cas_unhex(name, digest) == 0 && digest[0] == byte;
}

static bool is_sidecar_name(const char *name, unsigned byte, unsigned char digest[CAS_DIGEST_LEN]) {
  size_t n = strlen(name);
  return n == CAS_HEX_LEN + strlen(CAS_SIDECAR_SUFFIX) &&
         !strcmp(name + CAS_HEX_LEN, CAS_SIDECAR_SUFFIX) && cas_unhex_n(name, digest) == 0 &&
         digest[0] == byte;
}

/* Visit every entry of every shard. fn returns < 0 to stop. */
typedef int (*shard_visit_fn)(void *ctx, unsigned byte, const char *name);

static int visit_shards(struct cordon_cas *cas, shard_visit_fn fn, void *ctx,
                        struct cordon_error **err) {
  for (unsigned byte = 0; byte < 256; byte++) {
    int shard = cas_shard_fd(cas, byte, false, err);
    if (shard == -2)
      continue;
    if (shard < 0)
      return -1;
    int fd = openat(shard, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "store %s: shard %02x", cas->dir,
                              byte);
    DIR *d = fdopendir(fd);
    if (!d) {
      close(fd);
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "store %s", cas->dir);
    }
    struct dirent *de;
    int r = 0;
    while ((errno = 0, de = readdir(d))) {
      if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
        continue;
      if ((r = fn(ctx, byte, de->d_name)) < 0)
        break;
    }
    int e = errno;
    closedir(d);
    if (r < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "store %s", cas->dir);
    if (e)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "store %s: shard %02x", cas->dir, byte);
  }
  return 0;
}

static int push_digest(unsigned char (**arr)[CAS_DIGEST_LEN], size_t *n, size_t *cap,
                       const unsigned char digest[CAS_DIGEST_LEN]) {
  if (*n == *cap) {
    size_t c = *cap ? *cap * 2 : 256;
    void *grown = realloc(*arr, c * CAS_DIGEST_LEN);
    if (!grown)
      return -1;
    *arr = grown;
    *cap = c;
  }
  memcpy((*arr)[(*n)++], digest, CAS_DIGEST_LEN);
  return 0;
}

static int list_visit(void *ctx, unsigned byte, const char *name) {
  struct cas_blob_list *l = ctx;
  unsigned char digest[CAS_DIGEST_LEN];
  if (!is_blob_name(name, byte, digest))
    return 0;
  return push_digest(&l->digests, &l->count, &l->capacity, digest);
}

int cas_list_blobs(struct cordon_cas *cas, struct cas_blob_list *out, struct cordon_error **err) {
  memset(out, 0, sizeof(*out));
  if (visit_shards(cas, list_visit, out, err) < 0) {
    cas_blob_list_free(out);
    return -1;
  }
  return 0;
}

void cas_blob_list_free(struct cas_blob_list *list) {
  free(list->digests);
  memset(list, 0, sizeof(*list));
}

int cas_remove_blob(struct cordon_cas *cas, const unsigned char digest[CAS_DIGEST_LEN],
                    uint64_t *freed, struct cordon_error **err) {
  char hex[CAS_HEX_LEN + 1], name[CAS_HEX_LEN + sizeof(CAS_SIDECAR_SUFFIX)];
  cas_hex(digest, hex);
  snprintf(name, sizeof(name), "%s%s", hex, CAS_SIDECAR_SUFFIX);
  int shard = cas_shard_fd(cas, digest[0], false, err);
  if (shard == -2)
    return 0;
  if (shard < 0)
    return -1;
  struct stat st;
  if (freed && fstatat(shard, hex, &st, AT_SYMLINK_NOFOLLOW) == 0)
    *freed = (uint64_t)st.st_size;
  if (unlinkat(shard, name, 0) < 0 && errno != ENOENT)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot remove sidecar of %s", hex);
  if (unlinkat(shard, hex, 0) < 0 && errno != ENOENT)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot remove blob %s", hex);
  return 0;
}

static int clean_visit(void *ctx, unsigned byte, const char *name) {
  struct cordon_cas *cas = ((void **)ctx)[0];
  uint64_t *removed = ((void **)ctx)[1];
  if (cas_is_shard_temp(name) && unlinkat(cas->shard[byte], name, 0) == 0 && removed)
    (*removed)++;
  return 0;
}

int cas_clean_tmp(struct cordon_cas *cas, uint64_t *removed, struct cordon_error **err) {
  void *ctx[2] = {cas, removed};
  if (visit_shards(cas, clean_visit, ctx, err) < 0)
    return -1;
  int fd = openat(cas->tmpfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "store %s: tmp", cas->dir);
  _cleanup_closedir_ DIR *d = fdopendir(fd);
  if (!d) {
    close(fd);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "store %s: tmp", cas->dir);
  }
  struct dirent *de;
  while ((de = readdir(d))) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
      continue;
    if (fs_remove_tree_at(cas->tmpfd, de->d_name, err) < 0)
      return cordon_error_prefix(err, "store %s: tmp", cas->dir);
    if (removed)
      (*removed)++;
  }
  return 0;
}

/* One stored copy of a blob: loose (pack NULL) or a range of a pack. */
struct verify_item {
  unsigned char digest[CAS_DIGEST_LEN];
  const struct cas_pack *pack;
  uint64_t offset, length;
};

struct verify_state {
  struct cordon_cas *cas;
  struct cordon_cas_verify_report *report;
  pthread_mutex_t mu;
  /* blobs and sidecars found while listing (blobs: loose ones, then every digest found) */
  unsigned char (*blobs)[CAS_DIGEST_LEN];
  size_t n_blobs, cap_blobs;
  struct verify_item *items; /* every stored copy to re-hash */
  size_t n_items, cap_items;
  unsigned char (*sidecars)[CAS_DIGEST_LEN];
  size_t n_sidecars, cap_sidecars;
  size_t next; /* work index for the hashing threads */
  uint64_t done_bytes, total_bytes;
  const struct cordon_progress *progress;
  double last_progress;
  bool oom;
  struct cas_pack **packs; /* held while their blobs are re-hashed */
  size_t n_packs;
};

static void add_problem(struct verify_state *v, const char *object, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void add_problem(struct verify_state *v, const char *object, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = NULL;
  if (vasprintf(&msg, fmt, ap) < 0)
    msg = NULL;
  va_end(ap);
  pthread_mutex_lock(&v->mu);
  struct cordon_cas_verify_report *r = v->report;
  struct cordon_cas_problem *grown =
      realloc(r->problems, (r->n_problems + 1) * sizeof(*r->problems));
  char *obj = strdup(object);
  if (!grown || !msg || !obj) {
    if (grown)
      r->problems = grown;
    free(msg);
    free(obj);
    v->oom = true;
  } else {
    r->problems = grown;
    r->problems[r->n_problems].object = obj;
    r->problems[r->n_problems].message = msg;
    r->n_problems++;
  }
  pthread_mutex_unlock(&v->mu);
}

static int verify_visit(void *ctx, unsigned byte, const char *name) {
  struct verify_state *v = ctx;
  unsigned char digest[CAS_DIGEST_LEN];
  if (cas_is_shard_temp(name)) {
    v->report->temporaries++;
    return 0;
  }
  if (is_blob_name(name, byte, digest))
    return push_digest(&v->blobs, &v->n_blobs, &v->cap_blobs, digest);
  if (is_sidecar_name(name, byte, digest))
    return push_digest(&v->sidecars, &v->n_sidecars, &v->cap_sidecars, digest);
  char object[300];
  snprintf(object, sizeof(object), "%02x/%s", byte, name);
  add_problem(v, object, "unexpected entry in the store (not a blob or sidecar of this shard)");
  return 0;
}

static void verify_progress(struct verify_state *v, uint64_t add) {
  pthread_mutex_lock(&v->mu);
  v->done_bytes += add;
  double now = fs_now();
  if (v->progress && v->progress->update && now - v->last_progress >= 0.1) {
    v->last_progress = now;
    v->progress->update(v->progress->data, "verify", v->done_bytes, v->total_bytes);
  }
  pthread_mutex_unlock(&v->mu);
}

static void verify_item(struct verify_state *v, const struct verify_item *it, unsigned char *buf,
                        struct cas_hasher *h) {
  char hex[CAS_HEX_LEN + 1];
  cas_hex(it->digest, hex);
  struct cas_blob b = {.fd = -1};
  if (it->pack) {
    b.fd = it->pack->fd;
    b.offset = it->offset;
    b.size = it->length;
  } else {
    struct cordon_error *e = NULL;
    struct stat st;
    b.fd = cas_loose_open(v->cas, it->digest, &st, &e);
    if (b.fd < 0) {
      add_problem(v, hex, "%s", e ? e->message : "cannot open");
      cordon_error_free(e);
      return;
    }
    b.owned = true;
    b.size = (uint64_t)st.st_size;
  }
  if (cas_hasher_init(h) < 0) {
    cas_blob_close(&b);
    add_problem(v, hex, "out of memory");
    return;
  }
  uint64_t pos = 0, unreported = 0;
  for (;;) {
    ssize_t n = cas_blob_read(&b, buf, CAS_COPY_BUFFER, pos);
    if (n < 0) {
      add_problem(v, hex, "read error: %s", strerror(errno));
      cas_blob_close(&b);
      return;
    }
    if (n == 0)
      break;
    cas_hasher_update(h, buf, (size_t)n);
    pos += (uint64_t)n;
    unreported += (uint64_t)n;
    if (unreported >= ((uint64_t)8 << 20)) {
      verify_progress(v, unreported);
      unreported = 0;
    }
  }
  verify_progress(v, unreported);
  cas_blob_close(&b);
  unsigned char actual[CAS_DIGEST_LEN];
  cas_hasher_final(h, actual);
  if (memcmp(actual, it->digest, CAS_DIGEST_LEN) != 0) {
    char got[CAS_HEX_LEN + 1], pack[CAS_HEX_LEN + 1];
    cas_hex(actual, got);
    if (it->pack) {
      cas_hex(it->pack->id, pack);
      add_problem(v, hex, "integrity error: content hashes to %s (in %s/%s%s at %llu)", got,
                  CAS_PACK_DIR, pack, CAS_PACK_SUFFIX, (unsigned long long)it->offset);
    } else {
      add_problem(v, hex, "integrity error: content hashes to %s", got);
    }
  }
}

static void *verify_worker(void *arg) {
  struct verify_state *v = arg;
  unsigned char *buf = malloc(CAS_COPY_BUFFER);
  struct cas_hasher h = {0};
  if (!buf) {
    v->oom = true;
    return NULL;
  }
  for (;;) {
    size_t i = __atomic_fetch_add(&v->next, 1, __ATOMIC_RELAXED);
    if (i >= v->n_items)
      break;
    verify_item(v, &v->items[i], buf, &h);
  }
  cas_hasher_free(&h);
  free(buf);
  return NULL;
}

static int push_item(struct verify_state *v, const unsigned char digest[CAS_DIGEST_LEN],
                     const struct cas_pack *pack, uint64_t offset, uint64_t length) {
  if (v->n_items == v->cap_items) {
    size_t cap = v->cap_items ? v->cap_items * 2 : 256;
    struct verify_item *grown = realloc(v->items, cap * sizeof(*grown));
    if (!grown)
      return -1;
    v->items = grown;
    v->cap_items = cap;
  }
  struct verify_item *it = &v->items[v->n_items++];
  memcpy(it->digest, digest, CAS_DIGEST_LEN);
  it->pack = pack;
  it->offset = offset;
  it->length = length;
  v->total_bytes += length;
  return 0;
}

/* The packs: load problems, strangers in the directory, structure, then every blob as an item
 * (its digest also joins v->blobs). */
static int verify_packs(struct verify_state *v, struct cordon_error **err) {
  struct cordon_cas *cas = v->cas;
  struct cas_pack **packs = NULL;
  size_t n = 0;
  if (cas_packs_list(cas, &packs, &n, err) < 0)
    return -1;
  char **problems = cas_packs_problems(cas);
  for (size_t i = 0; problems && problems[i]; i++)
    add_problem(v, CAS_PACK_DIR, "%s", problems[i]);
  strv_free(problems);
  int fd = openat(cas->packs.dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
  if (!d && fd >= 0)
    close(fd);
  struct dirent *de;
  while (d && (de = readdir(d))) {
    size_t len = strlen(de->d_name);
    unsigned char id[CAS_DIGEST_LEN];
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
      continue;
    if (len == CAS_HEX_LEN + strlen(CAS_PACK_SUFFIX) &&
        !strcmp(de->d_name + CAS_HEX_LEN, CAS_PACK_SUFFIX) && cas_unhex_n(de->d_name, id) == 0)
      continue;
    char object[300];
    snprintf(object, sizeof(object), "%s/%s", CAS_PACK_DIR, de->d_name);
    add_problem(v, object, "unexpected entry in the store (not a pack)");
  }
  if (d)
    closedir(d);
  int r = 0;
  for (size_t i = 0; i < n && r == 0; i++) {
    char hex[CAS_HEX_LEN + 1], object[CAS_HEX_LEN + 16];
    cas_hex(packs[i]->id, hex);
    snprintf(object, sizeof(object), "%s/%s%s", CAS_PACK_DIR, hex, CAS_PACK_SUFFIX);
    const char *why = cas_pack_check_structure(packs[i]);
    if (why)
      add_problem(v, object, "%s", why);
    for (size_t j = 0; j < packs[i]->count && r == 0; j++) {
      const struct cas_pack_entry *e = &packs[i]->entries[j];
      if (push_item(v, e->digest, packs[i], e->offset, e->length) < 0 ||
          push_digest(&v->blobs, &v->n_blobs, &v->cap_blobs, e->digest) < 0)
        r = cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "verify");
    }
  }
  v->report->packs = n;
  v->packs = packs; /* the items point into them: released when verify is done */
  v->n_packs = n;
  return r;
}

static int digest_cmp(const void *a, const void *b) {
  return memcmp(a, b, CAS_DIGEST_LEN);
}

static void verify_sidecar(struct verify_state *v, const unsigned char digest[CAS_DIGEST_LEN]) {
  char hex[CAS_HEX_LEN + 1], object[CAS_HEX_LEN + 16];
  cas_hex(digest, hex);
  snprintf(object, sizeof(object), "%s%s", hex, CAS_SIDECAR_SUFFIX);
  if (!v->n_blobs || !bsearch(digest, v->blobs, v->n_blobs, CAS_DIGEST_LEN, digest_cmp)) {
    add_problem(v, object, "sidecar without its blob");
    return;
  }
  struct cordon_error *e = NULL;
  json_t *doc = NULL;
  if (cas_sidecar_read(v->cas, digest, &doc, &e) <= 0) {
    add_problem(v, object, "%s", e ? e->message : "vanished");
    cordon_error_free(e);
    return;
  }
  struct stat st;
  int shard = cas_shard_fd(v->cas, digest[0], false, NULL);
  uint64_t size = shard >= 0 && fstatat(shard, hex, &st, AT_SYMLINK_NOFOLLOW) == 0
                      ? (uint64_t)st.st_size
                      : UINT64_MAX;
  const char *why = cas_sidecar_problem(doc, hex, size);
  if (why)
    add_problem(v, object, "%s", why);
  json_decref(doc);
}

int cordon_cas_verify(struct cordon_cas *cas, const struct cordon_progress *progress,
                      struct cordon_cas_verify_report *report, struct cordon_error **err) {
  memset(report, 0, sizeof(*report));
  struct verify_state v = {.cas = cas, .report = report, .progress = progress};
  pthread_mutex_init(&v.mu, NULL);
  int r = visit_shards(cas, verify_visit, &v, err);
  for (size_t i = 0; r == 0 && i < v.n_blobs; i++) {
    struct stat st;
    char hex[CAS_HEX_LEN + 1];
    cas_hex(v.blobs[i], hex);
    int shard = cas_shard_fd(cas, v.blobs[i][0], false, NULL);
    uint64_t size =
        shard >= 0 && fstatat(shard, hex, &st, AT_SYMLINK_NOFOLLOW) == 0 ? (uint64_t)st.st_size : 0;
    if (push_item(&v, v.blobs[i], NULL, 0, size) < 0)
      r = cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "verify");
  }
  if (r == 0)
    r = verify_packs(&v, err);
  if (r == 0) {
    /* v.blobs now holds every digest stored, for the sidecar and ref checks. */
    if (v.n_blobs)
      qsort(v.blobs, v.n_blobs, CAS_DIGEST_LEN, digest_cmp);
    unsigned n_threads = cas_default_threads();
    if (n_threads > v.n_items)
      n_threads = v.n_items ? (unsigned)v.n_items : 1;
    pthread_t threads[64];
    unsigned started = 0;
    for (; started + 1 < n_threads; started++)
      if (pthread_create(&threads[started], NULL, verify_worker, &v) != 0)
        break;
    verify_worker(&v);
    for (unsigned i = 0; i < started; i++)
      pthread_join(threads[i], NULL);
    for (size_t i = 0; i < v.n_sidecars; i++)
      verify_sidecar(&v, v.sidecars[i]);
    /* Refs must name snapshots that are there. */
    char **refs = NULL;
    struct cordon_error *e = NULL;
    if (cas_ref_list(cas, &refs, &e) == 0) {
      for (size_t i = 0; refs[i]; i++) {
        unsigned char d[CAS_DIGEST_LEN];
        cas_unhex(refs[i], d);
        if (!v.n_blobs || !bsearch(d, v.blobs, v.n_blobs, CAS_DIGEST_LEN, digest_cmp)) {
          char object[CAS_HEX_LEN + 8];
          snprintf(object, sizeof(object), "refs/%s", refs[i]);
          add_problem(&v, object, "ref names a snapshot whose manifest is missing");
        }
      }
      strv_free(refs);
    } else {
      add_problem(&v, "refs", "%s", e->message);
      cordon_error_free(e);
    }
    /* Leftover temp files are not problems: they are never visible as blobs. */
    int fd = openat(cas->tmpfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d && fd >= 0)
      close(fd);
    struct dirent *de;
    while (d && (de = readdir(d)))
      if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
        report->temporaries++;
    if (d)
      closedir(d);
    report->blobs = v.n_items;
    report->sidecars = v.n_sidecars;
    report->bytes = v.total_bytes;
    if (progress && progress->update)
      progress->update(progress->data, "verify", v.total_bytes, v.total_bytes);
    if (v.oom)
      r = cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "verify");
  }
  free(v.blobs);
  free(v.items);
  free(v.sidecars);
  cas_packs_list_free(cas, v.packs, v.n_packs);
  pthread_mutex_destroy(&v.mu);
  if (r < 0)
    cordon_cas_verify_report_clear(report);
  return r;
}

void cordon_cas_verify_report_clear(struct cordon_cas_verify_report *report) {
  for (size_t i = 0; i < report->n_problems; i++) {
    free(report->problems[i].object);
    free(report->problems[i].message);
  }
  free(report->problems);
  memset(report, 0, sizeof(*report));
}
