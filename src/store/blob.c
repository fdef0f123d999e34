/* Reading blobs, wherever they are stored (loose or in a pack): the internal open, read and
 * verified read, and the public has / get / get_to_fd / info. Every read re-hashes what it
 * returns. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cordon/cas.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "store/cas.h"
#include "store/sidecar.h"

/* Blobs up to this size are staged in memory by get_to_fd; larger ones in a temp file. */
#define MEMFD_MAX ((uint64_t)64 << 20)

/* Give an error to the caller, unless it already has one or wants none. */
static void hand_over(struct cordon_error **err, struct cordon_error *e) {
  if (err && !*err)
    *err = e;
  else
    cordon_error_free(e);
}

static bool find_packed(struct cordon_cas *cas, const unsigned char digest[CAS_DIGEST_LEN],
                        struct cas_blob *b) {
  if (!cas_packs_find(cas, digest, &b->offset, &b->size, &b->held))
    return false;
  b->cas = cas;
  b->fd = b->held->fd;
  memcpy(b->pack, b->held->id, CAS_DIGEST_LEN);
  b->owned = false;
  b->packed = true;
  return true;
}

int cas_blob_open(struct cordon_cas *cas, const unsigned char digest[CAS_DIGEST_LEN],
                  struct cas_blob *b, struct cordon_error **err) {
  memset(b, 0, sizeof(*b));
  b->fd = -1;
  /* Packs first: a lookup in memory, where most of a snapshot's blobs are. */
  if (find_packed(cas, digest, b))
    return 0;
  struct stat st;
  struct cordon_error *loose_err = NULL;
  int fd = cas_loose_open(cas, digest, &st, &loose_err);
  if (fd >= 0) {
    b->fd = fd;
    b->owned = true;
    b->size = (uint64_t)st.st_size;
    return 0;
  }
  if (loose_err->kind != CORDON_ERR_NOT_FOUND) {
    hand_over(err, loose_err);
    return -1;
  }
  /* Not loose: perhaps in a pack another process published since the packs were read. */
  struct cordon_error *scan_err = NULL;
  if (cas_packs_refresh(cas, &scan_err) == 0 && find_packed(cas, digest, b)) {
    cordon_error_free(loose_err);
    return 0;
  }
  cordon_error_free(scan_err);
  _cleanup_free_ char *problem = cas_packs_problem(cas);
  if (problem) {
    /* The blob may be in the pack that cannot be read: absence is not proven. */
    char hex[CAS_HEX_LEN + 1];
    cas_hex(digest, hex);
    cordon_error_free(loose_err);
    return cordon_error_set(err, CORDON_ERR_INTEGRITY, 0, "blob %s is unreadable: %s", hex,
                            problem);
  }
  hand_over(err, loose_err);
  return -1;
}

ssize_t cas_blob_read(const struct cas_blob *b, void *buf, size_t n, uint64_t pos) {
  if (pos >= b->size)
    return 0;
  if (n > b->size - pos)
    n = (size_t)(b->size - pos);
  for (;;) {
    ssize_t r = pread(b->fd, buf, n, (off_t)(b->offset + pos));
    if (r < 0 && errno == EINTR)
      continue;
    return r;
  }
}

void cas_blob_region(const struct cas_blob *b, uint64_t pos, bool *hole, uint64_t *end) {
  *hole = false;
  *end = b->size;
  if (!b->owned || b->packed || pos >= b->size)
    return;
  /* Regions as the filesystem reports them; any doubt (no SEEK_DATA support) reads data. */
  off_t data = lseek(b->fd, (off_t)pos, SEEK_DATA);
  if (data < 0 && errno != ENXIO)
    return;
  if (data < 0 || (uint64_t)data > pos) {
    *hole = true;
    if (data >= 0 && (uint64_t)data < b->size)
      *end = (uint64_t)data;
    return;
  }
  off_t hole_at = lseek(b->fd, (off_t)pos, SEEK_HOLE);
  if (hole_at > (off_t)pos && (uint64_t)hole_at < b->size)
    *end = (uint64_t)hole_at;
}

void cas_blob_close(struct cas_blob *b) {
  if (b->owned && b->fd >= 0)
    close(b->fd);
  if (b->held)
    cas_pack_release(b->cas, b->held);
  b->held = NULL;
  b->fd = -1;
  b->owned = false;
}

void cas_blob_location(const struct cas_blob *b, const unsigned char digest[CAS_DIGEST_LEN],
                       char *out, size_t size) {
  char hex[CAS_HEX_LEN + 1];
  cas_hex(b->packed ? b->pack : digest, hex);
  if (b->packed)
    snprintf(out, size, "%s/%s%s", CAS_PACK_DIR, hex, CAS_PACK_SUFFIX);
  else
    snprintf(out, size, "%.2s/%s", hex, hex);
}

int cas_blob_present(struct cordon_cas *cas, const unsigned char digest[CAS_DIGEST_LEN],
                     uint64_t size) {
  uint64_t offset, length;
  if (cas_packs_find(cas, digest, &offset, &length, NULL) && length == size)
    return 1;
  return cas_loose_present(cas, digest, size);
}

/* Read a whole blob into a new buffer and check it hashes to its digest. */
static int read_blob_verified(const unsigned char digest[CAS_DIGEST_LEN], const struct cas_blob *b,
                              unsigned char **data, size_t *length, struct cordon_error **err) {
  char hex[CAS_HEX_LEN + 1];
  cas_hex(digest, hex);
  unsigned char *buf = malloc(b->size ? (size_t)b->size : 1);
  if (!buf)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "blob %s", hex);
  size_t len = 0;
  while (len < b->size) {
    ssize_t n = cas_blob_read(b, buf + len, (size_t)b->size - len, len);
    if (n <= 0) {
      int e = errno;
      free(buf);
      return n < 0 ? cordon_error_set(err, CORDON_ERR_SYSTEM, e, "blob %s: read", hex)
                   : cordon_error_set(err, CORDON_ERR_INTEGRITY, 0,
                                      "integrity error: blob %s is truncated", hex);
    }
    len += (size_t)n;
  }
  unsigned char actual[CAS_DIGEST_LEN];
  if (cas_sha256(buf, len, actual) < 0) {
    free(buf);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "blob %s", hex);
  }
  if (memcmp(actual, digest, CAS_DIGEST_LEN) != 0) {
    free(buf);
    return cas_integrity_error(err, digest, actual);
  }
  *data = buf;
  *length = len;
  return 0;
}

int cas_read_verified(struct cordon_cas *cas, const unsigned char digest[CAS_DIGEST_LEN],
                      size_t max, unsigned char **data, size_t *length, struct cordon_error **err) {
  struct cas_blob b;
  if (cas_blob_open(cas, digest, &b, err) < 0)
    return -1;
  int r;
  if (b.size > max) {
    char hex[CAS_HEX_LEN + 1];
    cas_hex(digest, hex);
    r = cordon_error_set(err, CORDON_ERR_INVALID, E2BIG, "blob %s is larger than %zu bytes", hex,
                         max);
  } else {
    r = read_blob_verified(digest, &b, data, length, err);
  }
  cas_blob_close(&b);
  return r;
}

/* The start of a public read: parse its digest, and look at the packs on disk again, so that
 * the call sees the store as it is now rather than as an earlier call loaded it. */
static int begin_public_read(struct cordon_cas *cas, const char *hex,
                             unsigned char digest[CAS_DIGEST_LEN], struct cordon_error **err) {
  if (cas_unhex(hex, digest) < 0)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                            "'%s' is not a digest (64 lowercase hex digits)", hex ? hex : "");
  cas_packs_refresh(cas, NULL);
  return 0;
}

int cordon_cas_has(struct cordon_cas *cas, const char *hex, struct cordon_error **err) {
  unsigned char digest[CAS_DIGEST_LEN];
  if (begin_public_read(cas, hex, digest, err) < 0)
    return -1;
  struct cas_blob b;
  struct cordon_error *open_err = NULL;
  if (cas_blob_open(cas, digest, &b, &open_err) == 0) {
    cas_blob_close(&b);
    return 1;
  }
  if (open_err && open_err->kind == CORDON_ERR_NOT_FOUND) {
    cordon_error_free(open_err);
    return 0;
  }
  hand_over(err, open_err);
  return -1;
}

int cordon_cas_get(struct cordon_cas *cas, const char *hex, size_t max, unsigned char **data,
                   size_t *length, struct cordon_error **err) {
  unsigned char digest[CAS_DIGEST_LEN];
  if (begin_public_read(cas, hex, digest, err) < 0)
    return -1;
  return cas_read_verified(cas, digest, max, data, length, err);
}

static int staging_fd(struct cordon_cas *cas, uint64_t size) {
  if (size <= MEMFD_MAX) {
    int fd = memfd_create("cordon-blob", MFD_CLOEXEC);
    if (fd >= 0)
      return fd;
  }
  return openat(cas->tmpfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
}

static int copy_verified(struct cordon_cas *cas, const unsigned char digest[CAS_DIGEST_LEN],
                         const char *hex, const struct cas_blob *b, int out,
                         struct cordon_error **err);

int cordon_cas_get_to_fd(struct cordon_cas *cas, const char *hex, int out,
                         struct cordon_error **err) {
  unsigned char digest[CAS_DIGEST_LEN];
  if (begin_public_read(cas, hex, digest, err) < 0)
    return -1;
  struct cas_blob b;
  if (cas_blob_open(cas, digest, &b, err) < 0)
    return -1;
  int r = copy_verified(cas, digest, hex, &b, out, err);
  cas_blob_close(&b);
  return r;
}

/* get_to_fd's work: stage the blob's bytes while hashing them, then copy them out. */
static int copy_verified(struct cordon_cas *cas, const unsigned char digest[CAS_DIGEST_LEN],
                         const char *hex, const struct cas_blob *b, int out,
                         struct cordon_error **err) {
  _cleanup_close_ int stage = staging_fd(cas, b->size);
  if (stage < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "blob %s: staging file", hex);
  _cleanup_free_ unsigned char *buf = malloc(CAS_COPY_BUFFER);
  struct cas_hasher h = {0};
  if (!buf || cas_hasher_init(&h) < 0) {
    cas_hasher_free(&h);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "blob %s", hex);
  }
  for (uint64_t pos = 0;;) {
    ssize_t n = cas_blob_read(b, buf, CAS_COPY_BUFFER, pos);
    if (n < 0) {
      cas_hasher_free(&h);
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "blob %s", hex);
    }
    if (n == 0)
      break;
    pos += (uint64_t)n;
    cas_hasher_update(&h, buf, (size_t)n);
    if (fs_write_all(stage, buf, (size_t)n) < 0) {
      cas_hasher_free(&h);
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "blob %s: staging file", hex);
    }
  }
  unsigned char actual[CAS_DIGEST_LEN];
  cas_hasher_final(&h, actual);
  cas_hasher_free(&h);
  if (memcmp(actual, digest, CAS_DIGEST_LEN) != 0)
    return cas_integrity_error(err, digest, actual);
  if (lseek(stage, 0, SEEK_SET) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "blob %s: staging file", hex);
  for (;;) {
    ssize_t n = cas_read_retry(stage, buf, CAS_COPY_BUFFER);
    if (n < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "blob %s: staging file", hex);
    if (n == 0)
      break;
    if (fs_write_all(out, buf, (size_t)n) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "blob %s: output", hex);
  }
  return 0;
}

int cordon_cas_info(struct cordon_cas *cas, const char *hex, struct cordon_blob_info *info,
                    struct cordon_error **err) {
  memset(info, 0, sizeof(*info));
  unsigned char digest[CAS_DIGEST_LEN];
  if (begin_public_read(cas, hex, digest, err) < 0)
    return -1;
  struct cas_blob b;
  if (cas_blob_open(cas, digest, &b, err) < 0)
    return -1;
  info->size = b.size;
  char where[CAS_HEX_LEN + 32];
  cas_blob_location(&b, digest, where, sizeof(where));
  info->location = strdup(where);
  info->offset = b.offset;
  cas_blob_close(&b);
  if (!info->location)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "blob %s", hex);
  json_t *doc = NULL;
  int r = cas_sidecar_read(cas, digest, &doc, err);
  if (r < 0) {
    cordon_blob_info_clear(info);
    return -1;
  }
  if (r == 0)
    return 0;
  const char *why = cas_sidecar_problem(doc, hex, info->size);
  if (why) {
    json_decref(doc);
    cordon_blob_info_clear(info);
    return cordon_error_set(err, CORDON_ERR_INTEGRITY, 0, "sidecar of %s: %s", hex, why);
  }
  info->has_sidecar = true;
  info->content_type = strdup(json_string_value(json_object_get(doc, "content_type")));
  json_t *meta = json_object_get(doc, "metadata");
  if (meta)
    info->metadata = json_dumps(meta, JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(doc);
  if (!info->content_type || (meta && !info->metadata)) {
    cordon_blob_info_clear(info);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "blob %s", hex);
  }
  return 0;
}

void cordon_blob_info_clear(struct cordon_blob_info *info) {
  free(info->location);
  free(info->content_type);
  free(info->metadata);
  memset(info, 0, sizeof(*info));
}
