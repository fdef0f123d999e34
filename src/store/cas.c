/* The content-addressed store: loose blobs at <store>/<2 hex>/<64 hex>, optional sidecars, packs
 * in <store>/packs (pack.c), temp files in <store>/tmp, snapshot refs in <store>/refs, the writer
 * lock <store>/lock. This file opens and closes a store at a directory; the primitives are in
 * object.c, reading in blob.c, sidecars in sidecar.c, the single put in put.c, batches in
 * batch.c, refs in refs.c, listing, cleaning and verification in verify.c. Which directory a
 * project's store is in is the protocol layer's business (cordon_cas_open_project). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cordon/cas.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "store/cas.h"

bool cordon_digest_valid(const char *s) {
  return cas_hex_valid(s);
}

/* ---- open and close ----------------------------------------------------------------------- */

static int open_subdir(int rootfd, const char *dir, const char *name, int *out,
                       struct cordon_error **err) {
  if (mkdirat(rootfd, name, 0700) < 0 && errno != EEXIST)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot create %s/%s", dir, name);
  int fd = openat(rootfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return cordon_error_set(
        err, errno == ELOOP || errno == ENOTDIR ? CORDON_ERR_INTEGRITY : CORDON_ERR_SYSTEM, errno,
        "store %s: %s", dir, name);
  *out = fd;
  return 0;
}

int cordon_cas_open(const char *dir, struct cordon_cas **out, struct cordon_error **err) {
  if (!dir || !*dir)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "no store directory given");
  struct stat st;
  if (stat(dir, &st) < 0) {
    if (errno != ENOENT)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "store %s", dir);
    if (fs_mkdir_p(dir, 0700, err) < 0)
      return -1;
  }
  struct cordon_cas *cas = calloc(1, sizeof(*cas));
  if (!cas)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "store %s", dir);
  cas->rootfd = cas->tmpfd = cas->lockfd = -1;
  cas->packs.dirfd = -1;
  for (size_t i = 0; i < 256; i++)
    cas->shard[i] = -1;
  pthread_mutex_init(&cas->mu, NULL);
  int refs = -1, statcache = -1;
  _cleanup_free_ char *prefix = NULL;
  cas->dir = strdup(dir);
  if (!cas->dir) {
    cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "store %s", dir);
    goto fail;
  }
  /* The root may be a symlink (operator configuration); nothing below it is followed. */
  cas->rootfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (cas->rootfd < 0) {
    cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot open store %s", dir);
    goto fail;
  }
  if (open_subdir(cas->rootfd, dir, CAS_TMP_DIR, &cas->tmpfd, err) < 0 ||
      open_subdir(cas->rootfd, dir, CAS_REFS_DIR, &refs, err) < 0 ||
      open_subdir(cas->rootfd, dir, CAS_STATCACHE_DIR, &statcache, err) < 0)
    goto fail;
  close(refs);
  close(statcache);
  refs = statcache = -1;
  if (cas_packs_open(cas, err) < 0)
    goto fail;
  cas->lockfd = openat(cas->rootfd, CAS_LOCK_FILE, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (cas->lockfd < 0) {
    cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "store %s: lock file", dir);
    goto fail;
  }
  /* Shards are made on the first write to each (cas_shard_fd): a new store costs no 256
   * mkdirat, and a lookup in a shard that does not exist yet is simply a miss. */
  if (fs_random_hex(8, &prefix, err) < 0)
    goto fail;
  memcpy(cas->tmp_prefix, prefix, 16);
  cas->tmp_prefix[16] = 0;
  *out = cas;
  return 0;
fail:
  if (refs >= 0)
    close(refs);
  if (statcache >= 0)
    close(statcache);
  cordon_cas_close(cas);
  return -1;
}

void cordon_cas_close(struct cordon_cas *cas) {
  if (!cas)
    return;
  for (size_t i = 0; i < 256; i++)
    if (cas->shard[i] >= 0)
      close(cas->shard[i]);
  if (cas->rootfd >= 0)
    close(cas->rootfd);
  if (cas->tmpfd >= 0)
    close(cas->tmpfd);
  if (cas->lockfd >= 0)
    close(cas->lockfd);
  cas_packs_close(cas);
  pthread_mutex_destroy(&cas->mu);
  free(cas->dir);
  free(cas);
}

const char *cordon_cas_dir(const struct cordon_cas *cas) {
  return cas->dir;
}
