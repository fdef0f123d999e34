/* The single put (`cas put`, cordon_cas_put, cordon_cas_put_fd): one blob and its sidecar, with
 * full per-blob durability. Every write goes to a temp file first and becomes visible by rename,
 * so a killed writer leaves at most a temp file, never a partial blob; the blob and its shard
 * are fsynced before the put returns. Many blobs at once go through a batch (batch.c). */
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
#include "store/cas.h"
#include "store/sidecar.h"

/* Write a temp file with data and make it durable; name receives its name. */
static int write_temp(struct cordon_cas *cas, const void *data, size_t length, char *name,
                      size_t name_size, struct cordon_error **err) {
  cas_tmp_name(cas, name, name_size);
  int fd = openat(cas->tmpfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
  if (fd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "store %s: temp file", cas->dir);
  if (fs_write_all(fd, data, length) < 0 || fdatasync(fd) < 0) {
    int e = errno;
    close(fd);
    unlinkat(cas->tmpfd, name, 0);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "store %s: temp file", cas->dir);
  }
  close(fd);
  return 0;
}

/* Rename a durable temp file into its shard, unless an intact copy is already there. Returns 1
 * when renamed (the shard must be synced), 0 when the temp was dropped. */
static int publish(struct cordon_cas *cas, const char *tmp,
                   const unsigned char digest[CAS_DIGEST_LEN], uint64_t size, int *shard_out,
                   struct cordon_error **err) {
  char hex[CAS_HEX_LEN + 1];
  cas_hex(digest, hex);
  int shard = cas_shard_fd(cas, digest[0], true, err);
  if (shard < 0)
    return cordon_error_prefix(err, "blob %s", hex);
  *shard_out = shard;
  if (cas_blob_present(cas, digest, size)) {
    unlinkat(cas->tmpfd, tmp, 0);
    return 0;
  }
  if (renameat(cas->tmpfd, tmp, shard, hex) < 0) {
    int e = errno;
    unlinkat(cas->tmpfd, tmp, 0);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "cannot store blob %s", hex);
  }
  return 1;
}

int cas_put_internal(struct cordon_cas *cas, const void *data, size_t length,
                     const char *content_type, const char *metadata_json,
                     unsigned char digest[CAS_DIGEST_LEN], struct cordon_error **err) {
  if (cas_sha256(data, length, digest) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "put");
  _cleanup_free_ char *side = NULL;
  size_t side_len = 0;
  if ((content_type || metadata_json) &&
      cas_sidecar_text(digest, length, content_type, metadata_json, &side, &side_len, err) < 0)
    return -1;
  if (cas_lock_shared(cas, err) < 0)
    return -1;
  char hex[CAS_HEX_LEN + 1], side_name[CAS_HEX_LEN + sizeof(CAS_SIDECAR_SUFFIX)];
  cas_hex(digest, hex);
  snprintf(side_name, sizeof(side_name), "%s%s", hex, CAS_SIDECAR_SUFFIX);
  char blob_tmp[48] = "", side_tmp[48] = "";
  int r = -1;
  int shard = cas_shard_fd(cas, digest[0], true, err);
  if (shard < 0)
    goto out;
  bool need_blob = !cas_blob_present(cas, digest, length);
  bool need_side = side && !cas_sidecar_same(shard, side_name, side, side_len);
  if (!need_blob && !need_side) {
    r = 0;
    goto out;
  }
  /* Both durable before either name appears; the blob's name before its sidecar's. */
  if ((need_blob && write_temp(cas, data, length, blob_tmp, sizeof(blob_tmp), err) < 0) ||
      (need_side && write_temp(cas, side, side_len, side_tmp, sizeof(side_tmp), err) < 0))
    goto out;
  if (need_blob && renameat(cas->tmpfd, blob_tmp, shard, hex) < 0) {
    cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot store blob %s", hex);
    goto out;
  }
  blob_tmp[0] = 0;
  if (need_side && renameat(cas->tmpfd, side_tmp, shard, side_name) < 0) {
    cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot store the sidecar of %s", hex);
    goto out;
  }
  side_tmp[0] = 0;
  if (fsync(shard) < 0) {
    cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "store %s: sync", cas->dir);
    goto out;
  }
  if (cas_sync_root(cas, err) < 0) /* a shard made for this blob */
    goto out;
  r = 0;
out:
  if (blob_tmp[0])
    unlinkat(cas->tmpfd, blob_tmp, 0);
  if (side_tmp[0])
    unlinkat(cas->tmpfd, side_tmp, 0);
  cas_unlock_shared(cas);
  return r;
}

int cordon_cas_put(struct cordon_cas *cas, const void *data, size_t length,
                   const char *content_type, const char *metadata_json,
                   char hex[CORDON_DIGEST_HEX_SIZE], struct cordon_error **err) {
  unsigned char digest[CAS_DIGEST_LEN];
  if (cas_put_internal(cas, data, length, content_type, metadata_json, digest, err) < 0)
    return -1;
  cas_hex(digest, hex);
  return 0;
}

int cordon_cas_put_fd(struct cordon_cas *cas, int in, const char *content_type,
                      const char *metadata_json, char hex[CORDON_DIGEST_HEX_SIZE],
                      struct cordon_error **err) {
  if (metadata_json) { /* refuse bad metadata before storing anything */
    json_t *meta = json_loads(metadata_json, JSON_REJECT_DUPLICATES, NULL);
    bool object = json_is_object(meta);
    json_decref(meta);
    if (!object)
      return cordon_error_set(err, CORDON_ERR_USAGE, 0, "metadata must be a JSON object");
  }
  if (cas_lock_shared(cas, err) < 0)
    return -1;
  int r = -1;
  char tmp[48];
  cas_tmp_name(cas, tmp, sizeof(tmp));
  _cleanup_free_ unsigned char *buf = malloc(CAS_COPY_BUFFER);
  struct cas_hasher h = {0};
  unsigned char digest[CAS_DIGEST_LEN];
  uint64_t size = 0;
  int fd = -1;
  if (!buf || cas_hasher_init(&h) < 0) {
    cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "put");
    goto out;
  }
  fd = openat(cas->tmpfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
  if (fd < 0) {
    cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "store %s: temp file", cas->dir);
    goto out;
  }
  for (;;) {
    ssize_t n = cas_read_retry(in, buf, CAS_COPY_BUFFER);
    if (n < 0) {
      cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "put: read");
      goto out;
    }
    if (n == 0)
      break;
    cas_hasher_update(&h, buf, (size_t)n);
    if (fs_write_all(fd, buf, (size_t)n) < 0) {
      cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "store %s: temp file", cas->dir);
      goto out;
    }
    size += (uint64_t)n;
  }
  if (fsync(fd) < 0) {
    cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "store %s: temp file", cas->dir);
    goto out;
  }
  close(fd);
  fd = -1;
  cas_hasher_final(&h, digest);
  int shard = -1;
  int p = publish(cas, tmp, digest, size, &shard, err);
  tmp[0] = 0; /* published or dropped */
  if (p < 0)
    goto out;
  if (p == 1 && fsync(shard) < 0) {
    cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "store %s: sync", cas->dir);
    goto out;
  }
  if (p == 1 && cas_sync_root(cas, err) < 0) /* a shard made for this blob */
    goto out;
  if (content_type || metadata_json) {
    _cleanup_free_ char *side = NULL;
    size_t side_len = 0;
    char side_tmp[48], name[CAS_HEX_LEN + sizeof(CAS_SIDECAR_SUFFIX)], dhex[CAS_HEX_LEN + 1];
    cas_hex(digest, dhex);
    snprintf(name, sizeof(name), "%s%s", dhex, CAS_SIDECAR_SUFFIX);
    if (cas_sidecar_text(digest, size, content_type, metadata_json, &side, &side_len, err) < 0)
      goto out;
    if (!cas_sidecar_same(shard, name, side, side_len)) {
      if (write_temp(cas, side, side_len, side_tmp, sizeof(side_tmp), err) < 0)
        goto out;
      if (renameat(cas->tmpfd, side_tmp, shard, name) < 0) {
        cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot store the sidecar of %s", dhex);
        unlinkat(cas->tmpfd, side_tmp, 0);
        goto out;
      }
      fsync(shard);
    }
  }
  cas_hex(digest, hex);
  r = 0;
out:
  if (fd >= 0)
    close(fd);
  if (r < 0 && tmp[0])
    unlinkat(cas->tmpfd, tmp, 0);
  cas_hasher_free(&h);
  cas_unlock_shared(cas);
  return r;
}
