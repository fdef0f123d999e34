/* Batches: staging many blobs at once (a snapshot's thousands of files) and publishing them.
 * Small blobs are appended to packs (pack.c), the others staged as temp files; the commit makes
 * all of them durable with one syncfs and only then renames them into place: the single put's
 * guarantee (a visible name always has durable, complete content) at the cost of two syncs
 * instead of two per blob. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "store/cas.h"
#include "store/sidecar.h"

/* A staged blob: a durable-to-be temp file in `dir` (its shard when the digest was known before
 * writing, <store>/tmp for streamed ones) waiting to be renamed to its digest. Staging in the
 * shard makes the final rename one within a directory: no filesystem-wide rename lock, and
 * creates spread over 256 directory locks instead of one. */
struct cas_pending {
  char name[48];
  int dir;
  unsigned char digest[CAS_DIGEST_LEN];
  bool sidecar; /* the blob's sidecar (<hex>.meta.json), published after every blob */
};

struct cas_batch {
  struct cordon_cas *cas;
  pthread_mutex_t mu;
  struct cas_pending *items;
  size_t n, cap;
  size_t next; /* publish work index */
  int publish_errno;
  bool committed;
  /* Early writeback: a big batch syncs in the background while it is still being staged, so
   * the commit's sync waits only for the tail. */
  pthread_cond_t cv;
  pthread_t flusher;
  bool flusher_started, flusher_stop;
  uint64_t staged_bytes, flushed_bytes;
  /* Digests staged so far (open addressing on the digest's first bytes, which are uniform):
   * a content that occurs twice in one batch (a tree's duplicate files) is written once, not
   * once per copy, although none is published before the commit. */
  unsigned char (*seen)[CAS_DIGEST_LEN];
  bool *seen_used;
  size_t seen_n, seen_cap;
  /* Small blobs go to packs, one writer per thread that wants one at the same time. */
  struct cas_pack_writer writers[8];
  unsigned n_writers;
  struct cas_pack_done *done; /* finished packs waiting for the commit (b->mu) */
  size_t n_done, cap_done;
  uint64_t n_packed;     /* blobs staged in packs (b->mu) */
  uint64_t packed_bytes; /* their bytes (atomic) */
};

/* A batch writes one pack until it has this much for packs, then one per thread. */
#define PACK_SPREAD_AFTER ((uint64_t)8 << 20)

#define EARLY_SYNC_STEP ((uint64_t)48 << 20)

static void *flusher_main(void *arg) {
  struct cas_batch *b = arg;
  pthread_mutex_lock(&b->mu);
  for (;;) {
    while (!b->flusher_stop && b->staged_bytes - b->flushed_bytes < EARLY_SYNC_STEP)
      pthread_cond_wait(&b->cv, &b->mu);
    if (b->flusher_stop)
      break;
    b->flushed_bytes = b->staged_bytes;
    pthread_mutex_unlock(&b->mu);
    syncfs(b->cas->tmpfd); /* only an optimisation: the commit syncs again */
    pthread_mutex_lock(&b->mu);
  }
  pthread_mutex_unlock(&b->mu);
  return NULL;
}

static void flusher_stop(struct cas_batch *b) {
  pthread_mutex_lock(&b->mu);
  bool started = b->flusher_started;
  b->flusher_stop = true;
  b->flusher_started = false;
  pthread_cond_signal(&b->cv);
  pthread_mutex_unlock(&b->mu);
  if (started)
    pthread_join(b->flusher, NULL);
}

/* Account staged bytes (with b->mu held) and wake or start the flusher. */
static void flusher_account(struct cas_batch *b, uint64_t bytes) {
  b->staged_bytes += bytes;
  if (b->staged_bytes - b->flushed_bytes < EARLY_SYNC_STEP || b->flusher_stop)
    return;
  if (!b->flusher_started)
    b->flusher_started = pthread_create(&b->flusher, NULL, flusher_main, b) == 0;
  pthread_cond_signal(&b->cv);
}

int cas_batch_new(struct cordon_cas *cas, struct cas_batch **out, struct cordon_error **err) {
  struct cas_batch *b = calloc(1, sizeof(*b));
  if (!b)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "store batch");
  if (cas_lock_shared(cas, err) < 0) {
    free(b);
    return -1;
  }
  b->cas = cas;
  pthread_mutex_init(&b->mu, NULL);
  pthread_cond_init(&b->cv, NULL);
  /* As many writers as a snapshot's walk has threads: with one per core, the walk's threads
   * queued behind each other's 256 KiB writes. */
  b->n_writers = cas_io_threads();
  if (b->n_writers > ARRAY_SIZE(b->writers))
    b->n_writers = ARRAY_SIZE(b->writers);
  for (unsigned i = 0; i < b->n_writers; i++)
    cas_pack_writer_init(&b->writers[i]);
  /* Under the writer lock, gc cannot run: the packs seen now stay until the commit, so a blob
   * found in one need not be written again. Packs gc removed before are forgotten here. */
  if (cas_packs_refresh(cas, err) < 0) {
    cas_batch_free(b);
    return -1;
  }
  *out = b;
  return 0;
}

void cas_batch_free(struct cas_batch *b) {
  if (!b)
    return;
  flusher_stop(b);
  for (size_t i = 0; i < b->n; i++)
    if (b->items[i].name[0])
      unlinkat(b->items[i].dir, b->items[i].name, 0);
  for (unsigned i = 0; i < b->n_writers; i++)
    cas_pack_writer_discard(b->cas, &b->writers[i]);
  for (size_t i = 0; i < b->n_done; i++)
    cas_pack_done_discard(b->cas, &b->done[i]);
  free(b->done);
  cas_unlock_shared(b->cas);
  /* Packs pile up between two gc runs (one per snapshot of more than a few new files): merge
   * them now and then, so lookups and open files stay bounded. Best effort, as in gc the new
   * pack is durable before the old ones go; whatever fails here, gc does later. */
  if (b->committed && b->n_done > 0) {
    struct cordon_error *ignored = NULL;
    cas_packs_auto_merge(b->cas, &ignored);
    cordon_error_free(ignored);
  }
  pthread_mutex_destroy(&b->mu);
  pthread_cond_destroy(&b->cv);
  free(b->items);
  free(b->seen);
  free(b->seen_used);
  free(b);
}

struct cordon_cas *cas_batch_store(struct cas_batch *b) {
  return b->cas;
}

uint64_t cas_batch_staged(struct cas_batch *b) {
  pthread_mutex_lock(&b->mu);
  uint64_t n = b->n + b->n_packed;
  pthread_mutex_unlock(&b->mu);
  return n;
}

static size_t seen_slot(const struct cas_batch *b, const unsigned char digest[CAS_DIGEST_LEN]) {
  uint64_t h;
  memcpy(&h, digest, sizeof(h));
  size_t i = (size_t)h & (b->seen_cap - 1);
  while (b->seen_used[i] && memcmp(b->seen[i], digest, CAS_DIGEST_LEN) != 0)
    i = (i + 1) & (b->seen_cap - 1);
  return i;
}

/* Claim a digest for staging (with b->mu held). Returns 1 when this caller is the first and
 * must write it, 0 when it is already staged in this batch, -1 when out of memory. */
static int seen_claim(struct cas_batch *b, const unsigned char digest[CAS_DIGEST_LEN]) {
  if ((b->seen_n + 1) * 2 > b->seen_cap) {
    size_t cap = b->seen_cap ? b->seen_cap * 2 : 1024;
    unsigned char(*keys)[CAS_DIGEST_LEN] = malloc(cap * CAS_DIGEST_LEN);
    bool *used = calloc(cap, sizeof(*used));
    if (!keys || !used) {
      free(keys);
      free(used);
      return -1;
    }
    struct cas_batch grown = {.seen = keys, .seen_used = used, .seen_cap = cap};
    for (size_t i = 0; i < b->seen_cap; i++) {
      if (!b->seen_used[i])
        continue;
      size_t j = seen_slot(&grown, b->seen[i]);
      memcpy(keys[j], b->seen[i], CAS_DIGEST_LEN);
      used[j] = true;
    }
    free(b->seen);
    free(b->seen_used);
    b->seen = keys;
    b->seen_used = used;
    b->seen_cap = cap;
  }
  size_t i = seen_slot(b, digest);
  if (b->seen_used[i])
    return 0;
  memcpy(b->seen[i], digest, CAS_DIGEST_LEN);
  b->seen_used[i] = true;
  b->seen_n++;
  return 1;
}

/* 1 when the digest must be staged (absent from the batch and from the store), 0 when not. */
static int batch_claim(struct cas_batch *b, const unsigned char digest[CAS_DIGEST_LEN],
                       uint64_t size, struct cordon_error **err) {
  pthread_mutex_lock(&b->mu);
  int r = seen_claim(b, digest);
  pthread_mutex_unlock(&b->mu);
  if (r < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "store batch");
  if (r == 0)
    return 0;
  uint64_t offset, length;
  if (cas_packs_find(b->cas, digest, &offset, &length, NULL) && length == size)
    return 0;
  /* A blob that goes to a pack is not looked for among loose blobs: that would be a failed
   * lookup per new file of a snapshot, to save the rare small blob a `cas put` also stored. */
  if (size < CAS_PACK_BLOB_MAX)
    return 1;
  return cas_loose_present(b->cas, digest, size) ? 0 : 1;
}

static int batch_push(struct cas_batch *b, int dir, const char *name,
                      const unsigned char digest[CAS_DIGEST_LEN], uint64_t size, bool sidecar,
                      struct cordon_error **err) {
  pthread_mutex_lock(&b->mu);
  flusher_account(b, size);
  if (b->n == b->cap) {
    size_t cap = b->cap ? b->cap * 2 : 256;
    struct cas_pending *grown = realloc(b->items, cap * sizeof(*grown));
    if (!grown) {
      pthread_mutex_unlock(&b->mu);
      unlinkat(dir, name, 0);
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "store batch");
    }
    b->items = grown;
    b->cap = cap;
  }
  struct cas_pending *p = &b->items[b->n++];
  snprintf(p->name, sizeof(p->name), "%s", name);
  p->dir = dir;
  memcpy(p->digest, digest, CAS_DIGEST_LEN);
  p->sidecar = sidecar;
  pthread_mutex_unlock(&b->mu);
  return 0;
}

/* Keep a finished pack for the commit (or drop it on failure). */
static int keep_done(struct cas_batch *b, struct cas_pack_done *done, struct cordon_error **err) {
  if (done->fd < 0)
    return 0;
  pthread_mutex_lock(&b->mu);
  if (b->n_done == b->cap_done) {
    size_t cap = b->cap_done ? b->cap_done * 2 : 4;
    struct cas_pack_done *grown = realloc(b->done, cap * sizeof(*grown));
    if (!grown) {
      pthread_mutex_unlock(&b->mu);
      cas_pack_done_discard(b->cas, done);
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "store batch");
    }
    b->done = grown;
    b->cap_done = cap;
  }
  b->done[b->n_done++] = *done;
  pthread_mutex_unlock(&b->mu);
  return 0;
}

/* Append a small blob to a pack: the first writer no other thread holds, else wait for one. */
static int pack_blob(struct cas_batch *b, const void *data, size_t length,
                     const unsigned char digest[CAS_DIGEST_LEN], struct cordon_error **err) {
  /* One pack until the batch is big enough for more to pay off: then one per thread. */
  unsigned spread =
      __atomic_load_n(&b->packed_bytes, __ATOMIC_RELAXED) < PACK_SPREAD_AFTER ? 1 : b->n_writers;
  struct cas_pack_writer *w = NULL;
  for (unsigned i = 0; i < spread && !w; i++)
    if (pthread_mutex_trylock(&b->writers[i].mu) == 0)
      w = &b->writers[i];
  if (!w) {
    w = &b->writers[digest[0] % spread];
    pthread_mutex_lock(&w->mu);
  }
  __atomic_add_fetch(&b->packed_bytes, (uint64_t)length, __ATOMIC_RELAXED);
  int r = cas_pack_writer_append(b->cas, w, data, length, digest, err);
  struct cas_pack_done done = {.fd = -1};
  if (r == 0 && w->size >= CAS_PACK_ROLL)
    r = cas_pack_writer_finish(b->cas, w, &done, err);
  pthread_mutex_unlock(&w->mu);
  if (r < 0 || keep_done(b, &done, err) < 0)
    return -1;
  pthread_mutex_lock(&b->mu);
  flusher_account(b, length);
  b->n_packed++;
  pthread_mutex_unlock(&b->mu);
  return 0;
}

static int stage_file(struct cas_batch *b, const void *data, size_t length,
                      const unsigned char digest[CAS_DIGEST_LEN], bool sidecar,
                      struct cordon_error **err);

int cas_batch_add_buffer(struct cas_batch *b, const void *data, size_t length,
                         unsigned char digest[CAS_DIGEST_LEN], struct cordon_error **err) {
  if (cas_sha256(data, length, digest) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "hash");
  int claim = batch_claim(b, digest, length, err);
  if (claim <= 0)
    return claim;
  if (length < CAS_PACK_BLOB_MAX)
    return pack_blob(b, data, length, digest, err);
  return stage_file(b, data, length, digest, false, err);
}

int cas_batch_add_typed(struct cas_batch *b, const void *data, size_t length,
                        const char *content_type, unsigned char digest[CAS_DIGEST_LEN],
                        struct cordon_error **err) {
  if (cas_sha256(data, length, digest) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "hash");
  _cleanup_free_ char *side = NULL;
  size_t side_len = 0;
  if (cas_sidecar_text(digest, length, content_type, NULL, &side, &side_len, err) < 0)
    return -1;
  int shard = cas_shard_fd(b->cas, digest[0], true, err);
  if (shard < 0)
    return -1;
  char hex[CAS_HEX_LEN + 1], side_name[CAS_HEX_LEN + sizeof(CAS_SIDECAR_SUFFIX)];
  cas_hex(digest, hex);
  snprintf(side_name, sizeof(side_name), "%s%s", hex, CAS_SIDECAR_SUFFIX);
  /* A blob with a sidecar is always a file of its own (never only in a pack), as a single put
   * stores it; the batch's dedup table is not consulted, since a packed copy does not count. */
  if (!cas_loose_present(b->cas, digest, length) &&
      stage_file(b, data, length, digest, false, err) < 0)
    return -1;
  if (!cas_sidecar_same(shard, side_name, side, side_len) &&
      stage_file(b, side, side_len, digest, true, err) < 0)
    return -1;
  return 0;
}

/* Stage a blob (or its sidecar) as a file of its own, in its shard. */
static int stage_file(struct cas_batch *b, const void *data, size_t length,
                      const unsigned char digest[CAS_DIGEST_LEN], bool sidecar,
                      struct cordon_error **err) {
  struct cordon_cas *cas = b->cas;
  int shard = cas_shard_fd(cas, digest[0], true, err);
  if (shard < 0)
    return -1;
  char tmp[48];
  uint64_t n = __atomic_add_fetch(&cas->tmp_counter, 1, __ATOMIC_RELAXED);
  snprintf(tmp, sizeof(tmp), "%s%s-%llu", CAS_SHARD_TEMP_PREFIX, cas->tmp_prefix,
           (unsigned long long)n);
  int fd = openat(shard, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
  if (fd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "store %s: temp file", cas->dir);
  if (fs_write_all(fd, data, length) < 0) {
    int e = errno;
    close(fd);
    unlinkat(shard, tmp, 0);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "store %s: temp file", cas->dir);
  }
  if (close(fd) < 0) {
    int e = errno;
    unlinkat(shard, tmp, 0);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "store %s: temp file", cas->dir);
  }
  return batch_push(b, shard, tmp, digest, length, sidecar, err);
}

int cas_stage_open(struct cas_batch *b, struct cas_hasher *hasher, struct cas_stage *st,
                   struct cordon_error **err) {
  memset(st, 0, sizeof(*st));
  st->batch = b;
  st->hasher = hasher;
  st->fd = -1;
  if (cas_hasher_init(hasher) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "hash");
  cas_tmp_name(b->cas, st->name, sizeof(st->name));
  st->fd =
      openat(b->cas->tmpfd, st->name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
  if (st->fd < 0) {
    st->name[0] = 0;
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "store %s: temp file", b->cas->dir);
  }
  return 0;
}

#define STAGE_BLOCK ((size_t)4096)

static bool all_zero(const unsigned char *p, size_t n) {
  return n == 0 || (p[0] == 0 && memcmp(p, p + 1, n - 1) == 0);
}

/* Zero blocks (aligned to the file's 4 KiB blocks) become holes, runs of the others one write
 * each: a file of zeros costs no store space, however it was written. */
int cas_stage_write(struct cas_stage *st, const void *data, size_t length,
                    struct cordon_error **err) {
  cas_hasher_update(st->hasher, data, length);
  const unsigned char *p = data;
  size_t at = 0;
  while (at < length) {
    bool zero = false;
    size_t run = 0;
    for (;;) {
      uint64_t offset = st->size + at + run;
      size_t block = STAGE_BLOCK - (size_t)(offset % STAGE_BLOCK);
      if (block > length - at - run)
        block = length - at - run;
      bool z = all_zero(p + at + run, block);
      if (run == 0)
        zero = z;
      else if (z != zero)
        break;
      run += block;
      if (at + run == length)
        break;
    }
    if (zero) {
      if (lseek(st->fd, (off_t)run, SEEK_CUR) < 0)
        return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "store %s: temp file",
                                st->batch->cas->dir);
      st->holes = true;
    } else if (fs_write_all(st->fd, p + at, run) < 0) {
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "store %s: temp file",
                              st->batch->cas->dir);
    }
    at += run;
  }
  st->size += length;
  return 0;
}

int cas_stage_skip(struct cas_stage *st, uint64_t length, struct cordon_error **err) {
  if (length == 0)
    return 0;
  if (length > (uint64_t)INT64_MAX - st->size)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, EFBIG, "store %s: temp file",
                            st->batch->cas->dir);
  if (lseek(st->fd, (off_t)length, SEEK_CUR) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "store %s: temp file",
                            st->batch->cas->dir);
  cas_hasher_update_zeros(st->hasher, length);
  st->size += length;
  st->holes = true;
  return 0;
}

void cas_stage_abort(struct cas_stage *st) {
  if (st->fd >= 0)
    close(st->fd);
  st->fd = -1;
  if (st->name[0])
    unlinkat(st->batch->cas->tmpfd, st->name, 0);
  st->name[0] = 0;
}

int cas_stage_close(struct cas_stage *st, unsigned char digest[CAS_DIGEST_LEN],
                    struct cordon_error **err) {
  /* A trailing hole is only an offset until the file's length says so. */
  if (st->holes && ftruncate(st->fd, (off_t)st->size) < 0) {
    int e = errno;
    cas_stage_abort(st);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "store %s: temp file", st->batch->cas->dir);
  }
  int r = close(st->fd);
  st->fd = -1;
  if (r < 0) {
    int e = errno;
    cas_stage_abort(st);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "store %s: temp file", st->batch->cas->dir);
  }
  cas_hasher_final(st->hasher, digest);
  int claim = batch_claim(st->batch, digest, st->size, err);
  if (claim <= 0) {
    cas_stage_abort(st);
    return claim;
  }
  r = batch_push(st->batch, st->batch->cas->tmpfd, st->name, digest, st->size, false, err);
  st->name[0] = 0; /* the batch owns it now (or unlinked it on failure) */
  return r;
}

/* Rename one staged file to its name; false (errno set) on failure. */
static bool publish_one(struct cas_batch *b, struct cas_pending *p) {
  char name[CAS_HEX_LEN + sizeof(CAS_SIDECAR_SUFFIX)];
  cas_hex(p->digest, name);
  if (p->sidecar)
    strcat(name, CAS_SIDECAR_SUFFIX);
  /* A copy that appeared meanwhile has the same bytes: replacing it is harmless. */
  if (renameat(p->dir, p->name, b->cas->shard[p->digest[0]], name) < 0)
    return false;
  p->name[0] = 0;
  return true;
}

static void publish_failed(struct cas_batch *b, int e) {
  int zero = 0;
  __atomic_compare_exchange_n(&b->publish_errno, &zero, e ? e : EIO, false, __ATOMIC_RELAXED,
                              __ATOMIC_RELAXED);
}

/* Blobs only: sidecars follow once every blob is in place, so a sidecar never names a blob
 * that is not there yet (as in the single put). */
static void *publish_worker(void *arg) {
  struct cas_batch *b = arg;
  for (;;) {
    size_t i = __atomic_fetch_add(&b->next, 1, __ATOMIC_RELAXED);
    if (i >= b->n || __atomic_load_n(&b->publish_errno, __ATOMIC_RELAXED))
      break;
    if (!b->items[i].sidecar && !publish_one(b, &b->items[i])) {
      publish_failed(b, errno);
      break;
    }
  }
  return NULL;
}

/* ---- many syncs at once --------------------------------------------------------------------
 * Each fsync waits for its own journal commit and cache flush; issued one after the other, a
 * commit of ten files and ten directories pays twenty of them in a row. Issued together from
 * a few threads, the filesystem folds them into one or two commits (jbd2's group commit), and
 * the writes queue on the device at once. */

struct sync_job {
  int dir;          /* with name: the file to open and fdatasync */
  const char *name; /* NULL: fd is synced as it is */
  int fd;
  bool data_only; /* fdatasync (file contents) rather than fsync (a directory's entries) */
};

struct sync_set {
  struct sync_job *jobs;
  size_t n;
  size_t next;
  int errnum;
};

static void *sync_worker(void *arg) {
  struct sync_set *s = arg;
  for (;;) {
    size_t i = __atomic_fetch_add(&s->next, 1, __ATOMIC_RELAXED);
    if (i >= s->n)
      break;
    const struct sync_job *j = &s->jobs[i];
    int fd = j->name ? openat(j->dir, j->name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) : j->fd;
    int r = fd < 0 ? -1 : j->data_only ? fdatasync(fd) : fsync(fd);
    int e = errno;
    if (j->name && fd >= 0)
      close(fd);
    if (r < 0) {
      int zero = 0;
      __atomic_compare_exchange_n(&s->errnum, &zero, e ? e : EIO, false, __ATOMIC_RELAXED,
                                  __ATOMIC_RELAXED);
    }
  }
  return NULL;
}

/* Run the jobs on up to 16 threads (this one included); 0, or -1 with errno. */
static int sync_all(struct sync_job *jobs, size_t n) {
  struct sync_set s = {.jobs = jobs, .n = n};
  pthread_t threads[15];
  size_t started = 0;
  for (; started + 1 < n && started < ARRAY_SIZE(threads); started++)
    if (pthread_create(&threads[started], NULL, sync_worker, &s) != 0)
      break;
  sync_worker(&s);
  for (size_t i = 0; i < started; i++)
    pthread_join(threads[i], NULL);
  errno = s.errnum;
  return s.errnum ? -1 : 0;
}

/* Finish the pack writers: a few small blobs still in a buffer become loose blobs rather than
 * a tiny pack. */
static int finish_writers(struct cas_batch *b, struct cordon_error **err) {
  for (unsigned i = 0; i < b->n_writers; i++) {
    struct cas_pack_writer *w = &b->writers[i];
    if (w->fd < 0 && w->n > 0 && w->n <= CAS_PACK_MIN_BLOBS) {
      for (size_t j = 0; j < w->n; j++) {
        const struct cas_pack_entry *e = &w->entries[j];
        if (stage_file(b, w->buf + (e->offset - CAS_PACK_HEADER_LEN), e->length, e->digest, false,
                       err) < 0)
          return -1;
      }
      cas_pack_writer_reset(w);
    }
    struct cas_pack_done done;
    if (cas_pack_writer_finish(b->cas, w, &done, err) < 0 || keep_done(b, &done, err) < 0)
      return -1;
  }
  return 0;
}

/* Step 1 of the commit: every staged byte durable. A few files are synced each (together),
 * many with one syncfs. */
static int sync_staged(struct cas_batch *b, struct cordon_error **err) {
  struct cordon_cas *cas = b->cas;
  if (b->n + b->n_done > 16)
    return syncfs(cas->tmpfd) < 0
               ? cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "store %s: sync", cas->dir)
               : 0;
  struct sync_job jobs[16];
  size_t n = 0;
  for (size_t i = 0; i < b->n; i++)
    jobs[n++] = (struct sync_job){b->items[i].dir, b->items[i].name, -1, true};
  for (size_t i = 0; i < b->n_done; i++)
    jobs[n++] = (struct sync_job){-1, NULL, b->done[i].fd, true};
  if (sync_all(jobs, n) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "store %s: sync", cas->dir);
  return 0;
}

/* Step 3: the renames durable. A few directories are synced each (together), many at once. */
static int sync_renames(struct cas_batch *b, const bool dirty[256], size_t n_dirty,
                        struct cordon_error **err) {
  struct cordon_cas *cas = b->cas;
  pthread_mutex_lock(&cas->mu);
  bool root = cas->root_dirty; /* a shard created for this batch: its name in the root */
  cas->root_dirty = false;
  pthread_mutex_unlock(&cas->mu);
  struct sync_job jobs[11];
  size_t n = 0;
  if (n_dirty > 8) {
    if (syncfs(cas->rootfd) == 0)
      return 0;
  } else {
    for (unsigned i = 0; i < 256; i++)
      if (dirty[i])
        jobs[n++] = (struct sync_job){-1, NULL, cas->shard[i], false};
    if (b->n_done)
      jobs[n++] = (struct sync_job){-1, NULL, cas->packs.dirfd, false};
    if (root)
      jobs[n++] = (struct sync_job){-1, NULL, cas->rootfd, false};
    if (sync_all(jobs, n) == 0)
      return 0;
  }
  int e = errno;
  pthread_mutex_lock(&cas->mu);
  cas->root_dirty = cas->root_dirty || root;
  pthread_mutex_unlock(&cas->mu);
  return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "store %s: sync", cas->dir);
}

int cas_batch_commit(struct cas_batch *b, struct cordon_error **err) {
  struct cordon_cas *cas = b->cas;
  flusher_stop(b);
  if (finish_writers(b, err) < 0)
    return -1;
  if (b->n == 0 && b->n_done == 0) {
    b->committed = true;
    return 0;
  }
  /* 1. Every staged byte durable before any name appears. */
  if (sync_staged(b, err) < 0)
    return -1;
  /* 2. Publish: packs (each makes all its blobs visible at once), then loose blobs, on several
   * threads when there are many to rename, then sidecars. */
  for (size_t i = 0; i < b->n_done; i++)
    if (cas_pack_publish(cas, &b->done[i], err) < 0)
      return -1;
  bool dirty[256] = {false};
  size_t n_dirty = 0;
  for (size_t i = 0; i < b->n; i++) {
    unsigned byte = b->items[i].digest[0];
    if (cas_shard_fd(cas, byte, true, err) < 0)
      return -1;
    if (!dirty[byte]) {
      dirty[byte] = true;
      n_dirty++;
    }
  }
  unsigned n_threads = b->n >= 2048 ? cas_default_threads() : 1;
  pthread_t threads[64];
  unsigned started = 0;
  b->next = 0;
  for (; started + 1 < n_threads && started < 64; started++)
    if (pthread_create(&threads[started], NULL, publish_worker, b) != 0)
      break;
  publish_worker(b);
  for (unsigned i = 0; i < started; i++)
    pthread_join(threads[i], NULL);
  for (size_t i = 0; i < b->n && !b->publish_errno; i++)
    if (b->items[i].sidecar && !publish_one(b, &b->items[i]))
      publish_failed(b, errno);
  if (b->publish_errno)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, b->publish_errno,
                            "store %s: cannot publish a blob", cas->dir);
  /* 3. The renames durable. */
  if (sync_renames(b, dirty, n_dirty, err) < 0)
    return -1;
  b->committed = true;
  return 0;
}
