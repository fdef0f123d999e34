/* Rewriting packs: gc's rewrite (n packs replaced by one holding only the blobs still
 * referenced, each re-hashed as it is copied) and the merge of many small packs a batch
 * triggers (every blob kept). Built on the pack writer and the loaded set (pack.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fs.h"
#include "store/object.h"
#include "store/pack.h"

/* One blob to copy into the new pack. */
struct kept {
  const struct cas_pack_entry *e;
  const struct cas_pack *from;
};

static int kept_by_digest(const void *a, const void *b) {
  return memcmp(((const struct kept *)a)->e->digest, ((const struct kept *)b)->e->digest,
                CAS_DIGEST_LEN);
}

/* Copy the kept blobs, each once and re-hashed, into a new pack and publish it durably. */
static int write_kept(struct cordon_cas *cas, struct kept *k, size_t n, struct cordon_error **err) {
  qsort(k, n, sizeof(*k), kept_by_digest);
  struct cas_pack_writer w;
  cas_pack_writer_init(&w);
  struct cas_pack_done done = {.fd = -1};
  unsigned char *buf = NULL;
  struct cas_hasher h = {0};
  int r = -1;
  for (size_t i = 0; i < n; i++) {
    const struct cas_pack_entry *e = k[i].e;
    if (i > 0 && !memcmp(k[i - 1].e->digest, e->digest, CAS_DIGEST_LEN))
      continue; /* in two packs: one copy is enough */
    unsigned char *grown = realloc(buf, e->length ? e->length : 1);
    if (!grown || cas_hasher_init(&h) < 0) {
      free(grown);
      buf = NULL;
      cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "gc");
      goto out;
    }
    buf = grown;
    if (fs_pread_all(k[i].from->fd, buf, e->length, e->offset) < 0) {
      cordon_error_set(err, CORDON_ERR_SYSTEM, errno ? errno : EIO, "gc: read pack");
      goto out;
    }
    unsigned char actual[CAS_DIGEST_LEN];
    cas_hasher_update(&h, buf, e->length);
    cas_hasher_final(&h, actual);
    if (memcmp(actual, e->digest, CAS_DIGEST_LEN) != 0) {
      cas_integrity_error(err, e->digest, actual);
      goto out;
    }
    if (cas_pack_writer_append(cas, &w, buf, e->length, e->digest, err) < 0)
      goto out;
  }
  if (cas_pack_writer_finish(cas, &w, &done, err) < 0)
    goto out;
  if (fdatasync(done.fd) < 0) {
    cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "store %s: sync", cas->dir);
    goto out;
  }
  if (cas_pack_publish(cas, &done, err) < 0)
    goto out;
  if (fsync(cas->packs.dirfd) < 0) {
    cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "store %s: sync", cas->dir);
    goto out;
  }
  r = 0;
out:
  cas_hasher_free(&h);
  free(buf);
  cas_pack_done_discard(cas, &done);
  cas_pack_writer_discard(cas, &w);
  return r;
}

int cas_pack_rewrite(struct cordon_cas *cas, struct cas_pack **packs, size_t n, bool *const *keep,
                     struct cordon_error **err) {
  size_t total = 0, kept = 0;
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j < packs[i]->count; j++, total++)
      kept += keep[i][j];
  if (n == 1 && kept == total)
    return 0; /* nothing to drop, nothing to merge */
  if (kept > 0) {
    struct kept *k = malloc(kept * sizeof(*k));
    if (!k)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "gc");
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
      for (size_t j = 0; j < packs[i]->count; j++)
        if (keep[i][j])
          k[m++] = (struct kept){.e = &packs[i]->entries[j], .from = packs[i]};
    int r = write_kept(cas, k, m, err);
    free(k);
    if (r < 0)
      return -1;
  }
  /* The new pack is durable and visible: the old ones can go. */
  for (size_t i = 0; i < n; i++) {
    /* The new pack can have an old one's name (the same index): that file stays. */
    pthread_rwlock_rdlock(&cas->packs.lock);
    bool same = packs[i]->gone;
    for (size_t j = 0; j < cas->packs.n && !same; j++)
      same = !cas->packs.packs[j]->gone && cas->packs.packs[j] != packs[i] &&
             !memcmp(cas->packs.packs[j]->id, packs[i]->id, CAS_DIGEST_LEN);
    pthread_rwlock_unlock(&cas->packs.lock);
    if (same)
      continue;
    if (cas_packs_remove(cas, packs[i], err) < 0)
      return -1;
  }
  return 0;
}

/* The small packs of the store now, held; NULL with *n == 0 when there are none. */
static int list_small(struct cordon_cas *cas, struct cas_pack ***list, size_t *n,
                      struct cordon_error **err) {
  size_t all = 0, small = 0;
  *n = 0;
  if (cas_packs_list(cas, list, &all, err) < 0)
    return -1;
  for (size_t i = 0; i < all; i++) {
    if ((*list)[i]->size < CAS_PACK_SMALL)
      (*list)[small++] = (*list)[i];
    else
      cas_pack_release(cas, (*list)[i]);
  }
  *n = small;
  return 0;
}

int cas_packs_auto_merge(struct cordon_cas *cas, struct cordon_error **err) {
  struct cas_pack **list = NULL;
  size_t n = 0;
  if (list_small(cas, &list, &n, err) < 0)
    return -1;
  cas_packs_list_free(cas, list, n);
  if (n <= CAS_PACK_AUTO_MERGE)
    return 0;
  /* Exclusive, as gc: no batch may look a blob up in a pack we are about to remove. */
  int lock = cas_try_lock_exclusive(cas, err);
  if (lock < 0)
    return lock == -2 ? 0 : -1;
  /* The list again, under the lock: another process may have merged them meanwhile. */
  int r = list_small(cas, &list, &n, err);
  bool **keep = r == 0 && n > CAS_PACK_AUTO_MERGE ? calloc(n, sizeof(*keep)) : NULL;
  for (size_t i = 0; keep && i < n; i++) {
    keep[i] = malloc((list[i]->count ? list[i]->count : 1) * sizeof(**keep));
    if (!keep[i]) {
      r = cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "store %s", cas->dir);
      break;
    }
    for (size_t j = 0; j < list[i]->count; j++)
      keep[i][j] = true;
  }
  if (keep && r == 0)
    r = cas_pack_rewrite(cas, list, n, (bool *const *)keep, err) < 0 ? -1 : 1;
  for (size_t i = 0; keep && i < n; i++)
    free(keep[i]);
  free(keep);
  cas_packs_list_free(cas, list, n);
  close(lock);
  return r;
}
