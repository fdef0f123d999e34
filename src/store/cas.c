/* The content-addressed store: loose blobs at <store>/<2 hex>/<64 hex>, optional sidecars, packs
 * in <store>/packs (pack.c), temp files in <store>/tmp, snapshot refs in <store>/refs, the writer
 * lock <store>/lock.
 *
 * Every write goes to a temp file first and becomes visible by rename, so a killed writer leaves
 * at most a temp file, never a partial blob. A single put fsyncs the blob and its directory; a
 * batch (a snapshot's thousands of files) writes all its temp files, makes them durable with one
 * syncfs, and only then renames them into place: the same guarantee (a visible name always has
 * durable, complete content) at the cost of two syncs instead of two per blob.
 *
 * Reads never follow a symlink below the store root and never block on a FIFO: shards are
 * opened O_NOFOLLOW|O_DIRECTORY from the root fd, blobs are lstat'ed, opened
 * O_NOFOLLOW|O_NONBLOCK and required to be regular files on the descriptor. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cordon/cas.h>
#include <cordon/session.h>

#include "protocol/context.h"
#include "base/cleanup.h"
#include "base/fs.h"
#include "base/strv.h"
#include "store/cas.h"

#define COPY_BUFFER ((size_t)1 << 20)
/* Blobs up to this size are staged in memory by get_to_fd; larger ones in a temp file. */
#define MEMFD_MAX ((uint64_t)64 << 20)

bool cordon_digest_valid(const char *s) {
  return cas_hex_valid(s);
}

unsigned cas_default_threads(void) {
  const char *env = getenv("CORDON_THREADS");
  if (env && *env) {
    char *end = NULL;
    unsigned long v = strtoul(env, &end, 10);
    if (!*end && v >= 1 && v <= 64)
      return (unsigned)v;
  }
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  if (n < 1)
    n = 1;
  return n > 8 ? 8 : (unsigned)n;
}

static ssize_t read_retry(int fd, void *buf, size_t n) {
  for (;;) {
    ssize_t r = read(fd, buf, n);
    if (r < 0 && errno == EINTR)
      continue;
    return r;
  }
}

static const char *kind_word(mode_t mode) {
  if (S_ISLNK(mode))
    return "a symlink";
  if (S_ISFIFO(mode))
    return "a FIFO";
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISSOCK(mode))
    return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode))
    return "a device node";
  return "not a regular file";
}

int cas_integrity_error(struct cordon_error **err, const unsigned char expected[CAS_DIGEST_LEN],
                        const unsigned char actual[CAS_DIGEST_LEN]) {
  char want[CAS_HEX_LEN + 1], got[CAS_HEX_LEN + 1];
  cas_hex(expected, want);
  cas_hex(actual, got);
  return cordon_error_set(err, CORDON_ERR_INTEGRITY, 0,
                          "integrity error: blob %s is corrupt: its content hashes to %s", want,
                          got);
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
  /* All 256 shards exist from the start: a lookup is then one fstatat, never an open that
   * fails, and the batch commit never creates directories. */
  struct stat shard_st;
  if (fstatat(cas->rootfd, "ff", &shard_st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT) {
    for (unsigned i = 0; i < 256; i++) {
      char name[3];
      snprintf(name, sizeof(name), "%02x", i);
      if (mkdirat(cas->rootfd, name, 0700) < 0 && errno != EEXIST) {
        cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "store %s: cannot create shard %s", dir,
                         name);
        goto fail;
      }
    }
  }
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

int cordon_cas_open_project(struct cordon_context *ctx, struct cordon_cas **out,
                            struct cordon_error **err) {
  _cleanup_free_ char *dir = NULL;
  if (context_ensure_dir(ctx, "cas", &dir, err) < 0)
    return -1;
  return cordon_cas_open(dir, out, err);
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

/* ---- locking ------------------------------------------------------------------------------ */

static int flock_retry(int fd, int op) {
  int r;
  do
    r = flock(fd, op);
  while (r < 0 && errno == EINTR);
  return r;
}

int cas_lock_shared(struct cordon_cas *cas, struct cordon_error **err) {
  pthread_mutex_lock(&cas->mu);
  if (cas->shared_holds == 0 && flock_retry(cas->lockfd, LOCK_SH) < 0) {
    int e = errno;
    pthread_mutex_unlock(&cas->mu);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "store %s: lock", cas->dir);
  }
  cas->shared_holds++;
  pthread_mutex_unlock(&cas->mu);
  return 0;
}

void cas_unlock_shared(struct cordon_cas *cas) {
  pthread_mutex_lock(&cas->mu);
  if (cas->shared_holds > 0 && --cas->shared_holds == 0)
    flock_retry(cas->lockfd, LOCK_UN);
  pthread_mutex_unlock(&cas->mu);
}

static int lock_exclusive(struct cordon_cas *cas, int op, struct cordon_error **err) {
  /* A separate open file description: flock locks belong to it, not to the process. */
  int fd = openat(cas->rootfd, CAS_LOCK_FILE, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "store %s: lock file", cas->dir);
  if (flock_retry(fd, op) < 0) {
    int e = errno;
    close(fd);
    if (e == EWOULDBLOCK && (op & LOCK_NB))
      return -2;
    return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "store %s: lock", cas->dir);
  }
  return fd;
}

int cas_lock_exclusive(struct cordon_cas *cas, struct cordon_error **err) {
  return lock_exclusive(cas, LOCK_EX, err);
}

int cas_try_lock_exclusive(struct cordon_cas *cas, struct cordon_error **err) {
  return lock_exclusive(cas, LOCK_EX | LOCK_NB, err);
}

/* ---- reading ------------------------------------------------------------------------------ */

int cas_shard_fd(struct cordon_cas *cas, unsigned byte, bool create, struct cordon_error **err) {
  pthread_mutex_lock(&cas->mu);
  int fd = cas->shard[byte & 255];
  if (fd >= 0) {
    pthread_mutex_unlock(&cas->mu);
    return fd;
  }
  char name[3];
  snprintf(name, sizeof(name), "%02x", byte & 255);
  fd = openat(cas->rootfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT && create) {
    if (mkdirat(cas->rootfd, name, 0700) < 0 && errno != EEXIST) {
      int e = errno;
      pthread_mutex_unlock(&cas->mu);
      return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "store %s: cannot create shard %s",
                              cas->dir, name);
    }
    fd = openat(cas->rootfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  }
  if (fd < 0) {
    int e = errno;
    pthread_mutex_unlock(&cas->mu);
    if (e == ENOENT)
      return -2;
    if (e == ELOOP || e == ENOTDIR) {
      struct stat st;
      const char *what = fstatat(cas->rootfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0
                             ? kind_word(st.st_mode)
                             : "not a directory";
      return cordon_error_set(err, CORDON_ERR_INTEGRITY, 0,
                              "store %s: shard %s is unreadable: it is %s, not a directory",
                              cas->dir, name, what);
    }
    return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "store %s: shard %s", cas->dir, name);
  }
  cas->shard[byte & 255] = fd;
  pthread_mutex_unlock(&cas->mu);
  return fd;
}

/* 1 until an O_NOATIME open was refused (a file someone else owns): then plain opens. */
static int noatime_allowed = 1;

int cas_openat_noatime(int dirfd, const char *name, int flags) {
  /* Reading a blob or a file to snapshot is not an access worth an inode write: with relatime
   * the first read after a write dirties the inode, which costs a metadata writeback per file. */
  if (__atomic_load_n(&noatime_allowed, __ATOMIC_RELAXED)) {
    int fd = openat(dirfd, name, flags | O_NOATIME | O_CLOEXEC);
    if (fd >= 0 || errno != EPERM)
      return fd;
    __atomic_store_n(&noatime_allowed, 0, __ATOMIC_RELAXED);
  }
  return openat(dirfd, name, flags | O_CLOEXEC);
}

static int unreadable(struct cordon_error **err, const char *hex, const char *what) {
  return cordon_error_set(err, CORDON_ERR_INTEGRITY, 0,
                          "blob %s is unreadable: it is %s, not a regular file", hex, what);
}

/* The loose blob <shard>/<hex>, opened safely: O_NOFOLLOW refuses a symlink, O_NONBLOCK keeps
 * a FIFO from hanging the open; the type is then checked on the descriptor itself. */
static int open_loose(struct cordon_cas *cas, const unsigned char digest[CAS_DIGEST_LEN],
                      struct stat *st, struct cordon_error **err) {
  char hex[CAS_HEX_LEN + 1];
  cas_hex(digest, hex);
  int shard = cas_shard_fd(cas, digest[0], false, err);
  if (shard == -2)
    return cordon_error_set(err, CORDON_ERR_NOT_FOUND, 0, "blob %s not found", hex);
  if (shard < 0)
    return cordon_error_prefix(err, "blob %s", hex);
  int fd = cas_openat_noatime(shard, hex, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    if (errno == ENOENT)
      return cordon_error_set(err, CORDON_ERR_NOT_FOUND, 0, "blob %s not found", hex);
    if (errno == ELOOP)
      return unreadable(err, hex, "a symlink");
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "blob %s", hex);
  }
  if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode)) {
    int e = errno;
    mode_t m = st->st_mode;
    close(fd);
    return S_ISREG(m) ? cordon_error_set(err, CORDON_ERR_SYSTEM, e, "blob %s", hex)
                      : unreadable(err, hex, kind_word(m));
  }
  return fd;
}

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
  int fd = open_loose(cas, digest, &st, &loose_err);
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

/* Whether an intact-looking loose copy (a regular file of the expected size) is there. */
static bool loose_present(struct cordon_cas *cas, const unsigned char digest[CAS_DIGEST_LEN],
                          uint64_t size) {
  int shard = cas_shard_fd(cas, digest[0], false, NULL);
  if (shard < 0)
    return 0;
  char hex[CAS_HEX_LEN + 1];
  cas_hex(digest, hex);
  struct stat st;
  if (fstatat(shard, hex, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return 0;
  /* A blob cut short by a crash on a filesystem that lost its tail has the wrong size: it is
   * replaced rather than trusted. */
  return S_ISREG(st.st_mode) && (uint64_t)st.st_size == size;
}

int cas_blob_present(struct cordon_cas *cas, const unsigned char digest[CAS_DIGEST_LEN],
                     uint64_t size) {
  uint64_t offset, length;
  if (cas_packs_find(cas, digest, &offset, &length, NULL) && length == size)
    return 1;
  return loose_present(cas, digest, size);
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
  _cleanup_free_ unsigned char *buf = malloc(COPY_BUFFER);
  struct cas_hasher h = {0};
  if (!buf || cas_hasher_init(&h) < 0) {
    cas_hasher_free(&h);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "blob %s", hex);
  }
  for (uint64_t pos = 0;;) {
    ssize_t n = cas_blob_read(b, buf, COPY_BUFFER, pos);
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
    ssize_t n = read_retry(stage, buf, COPY_BUFFER);
    if (n < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "blob %s: staging file", hex);
    if (n == 0)
      break;
    if (fs_write_all(out, buf, (size_t)n) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "blob %s: output", hex);
  }
  return 0;
}

/* ---- sidecars ----------------------------------------------------------------------------- */

static int read_sidecar(struct cordon_cas *cas, const unsigned char digest[CAS_DIGEST_LEN],
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
                            kind_word(st.st_mode));
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
static const char *sidecar_problem(json_t *doc, const char *hex, uint64_t blob_size) {
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
static int sidecar_text(const unsigned char digest[CAS_DIGEST_LEN], uint64_t size,
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
static bool sidecar_same(int shard, const char *name, const char *text, size_t len) {
  int fd = openat(shard, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0)
    return false;
  struct stat st;
  bool same = false;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size == len) {
    char *buf = malloc(len + 1);
    if (buf && read_retry(fd, buf, len + 1) == (ssize_t)len && !memcmp(buf, text, len))
      same = true;
    free(buf);
  }
  close(fd);
  return same;
}

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
  int r = read_sidecar(cas, digest, &doc, err);
  if (r < 0) {
    cordon_blob_info_clear(info);
    return -1;
  }
  if (r == 0)
    return 0;
  const char *why = sidecar_problem(doc, hex, info->size);
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

/* ---- writing ------------------------------------------------------------------------------ */

void cas_tmp_name(struct cordon_cas *cas, char *out, size_t size) {
  uint64_t n = __atomic_add_fetch(&cas->tmp_counter, 1, __ATOMIC_RELAXED);
  snprintf(out, size, "%s-%llu.tmp", cas->tmp_prefix, (unsigned long long)n);
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
      sidecar_text(digest, length, content_type, metadata_json, &side, &side_len, err) < 0)
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
  bool need_side = side && !sidecar_same(shard, side_name, side, side_len);
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
  _cleanup_free_ unsigned char *buf = malloc(COPY_BUFFER);
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
    ssize_t n = read_retry(in, buf, COPY_BUFFER);
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
  if (content_type || metadata_json) {
    _cleanup_free_ char *side = NULL;
    size_t side_len = 0;
    char side_tmp[48], name[CAS_HEX_LEN + sizeof(CAS_SIDECAR_SUFFIX)], dhex[CAS_HEX_LEN + 1];
    cas_hex(digest, dhex);
    snprintf(name, sizeof(name), "%s%s", dhex, CAS_SIDECAR_SUFFIX);
    if (sidecar_text(digest, size, content_type, metadata_json, &side, &side_len, err) < 0)
      goto out;
    if (!sidecar_same(shard, name, side, side_len)) {
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

/* ---- batches ------------------------------------------------------------------------------ */

/* A staged blob: a durable-to-be temp file in `dir` (its shard when the digest was known before
 * writing, <store>/tmp for streamed ones) waiting to be renamed to its digest. Staging in the
 * shard makes the final rename one within a directory: no filesystem-wide rename lock, and
 * creates spread over 256 directory locks instead of one. */
struct cas_pending {
  char name[48];
  int dir;
  unsigned char digest[CAS_DIGEST_LEN];
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
  b->n_writers = cas_default_threads();
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
  return loose_present(b->cas, digest, size) ? 0 : 1;
}

static int batch_push(struct cas_batch *b, int dir, const char *name,
                      const unsigned char digest[CAS_DIGEST_LEN], uint64_t size,
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
  pthread_mutex_unlock(&b->mu);
  return 0;
}

bool cas_is_shard_temp(const char *name) {
  return !strncmp(name, CAS_SHARD_TEMP_PREFIX, strlen(CAS_SHARD_TEMP_PREFIX));
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

static int stage_loose(struct cas_batch *b, const void *data, size_t length,
                       const unsigned char digest[CAS_DIGEST_LEN], struct cordon_error **err);

int cas_batch_add_buffer(struct cas_batch *b, const void *data, size_t length,
                         unsigned char digest[CAS_DIGEST_LEN], struct cordon_error **err) {
  if (cas_sha256(data, length, digest) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "hash");
  int claim = batch_claim(b, digest, length, err);
  if (claim <= 0)
    return claim;
  if (length < CAS_PACK_BLOB_MAX)
    return pack_blob(b, data, length, digest, err);
  return stage_loose(b, data, length, digest, err);
}

/* Stage a blob as a file of its own, in its shard. */
static int stage_loose(struct cas_batch *b, const void *data, size_t length,
                       const unsigned char digest[CAS_DIGEST_LEN], struct cordon_error **err) {
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
  return batch_push(b, shard, tmp, digest, length, err);
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
  r = batch_push(st->batch, st->batch->cas->tmpfd, st->name, digest, st->size, err);
  st->name[0] = 0; /* the batch owns it now (or unlinked it on failure) */
  return r;
}

static void *publish_worker(void *arg) {
  struct cas_batch *b = arg;
  for (;;) {
    size_t i = __atomic_fetch_add(&b->next, 1, __ATOMIC_RELAXED);
    if (i >= b->n || __atomic_load_n(&b->publish_errno, __ATOMIC_RELAXED))
      break;
    struct cas_pending *p = &b->items[i];
    char hex[CAS_HEX_LEN + 1];
    cas_hex(p->digest, hex);
    /* A copy that appeared meanwhile has the same bytes: replacing it is harmless. */
    if (renameat(p->dir, p->name, b->cas->shard[p->digest[0]], hex) < 0) {
      int zero = 0;
      __atomic_compare_exchange_n(&b->publish_errno, &zero, errno ? errno : EIO, false,
                                  __ATOMIC_RELAXED, __ATOMIC_RELAXED);
      break;
    }
    p->name[0] = 0;
  }
  return NULL;
}

int cas_batch_commit(struct cas_batch *b, struct cordon_error **err) {
  struct cordon_cas *cas = b->cas;
  flusher_stop(b);
  for (unsigned i = 0; i < b->n_writers; i++) {
    struct cas_pack_writer *w = &b->writers[i];
    if (w->fd < 0 && w->n > 0 && w->n <= CAS_PACK_MIN_BLOBS) {
      /* A few small blobs, all still in the buffer: loose blobs rather than a tiny pack. */
      for (size_t j = 0; j < w->n; j++) {
        const struct cas_pack_entry *e = &w->entries[j];
        if (stage_loose(b, w->buf + (e->offset - CAS_PACK_HEADER_LEN), e->length, e->digest, err) <
            0)
          return -1;
      }
      cas_pack_writer_reset(w);
    }
    struct cas_pack_done done;
    if (cas_pack_writer_finish(cas, &b->writers[i], &done, err) < 0 || keep_done(b, &done, err) < 0)
      return -1;
  }
  if (b->n == 0 && b->n_done == 0) {
    b->committed = true;
    return 0;
  }
  /* 1. Every staged byte durable before any name appears: a few files one by one, many with
   * one syncfs. */
  if (b->n + b->n_done <= 16) {
    for (size_t i = 0; i < b->n; i++) {
      int fd = openat(b->items[i].dir, b->items[i].name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
      int r = fd < 0 ? -1 : fdatasync(fd);
      int e = errno;
      if (fd >= 0)
        close(fd);
      if (r < 0)
        return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "store %s: sync", cas->dir);
    }
    for (size_t i = 0; i < b->n_done; i++)
      if (fdatasync(b->done[i].fd) < 0)
        return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "store %s: sync", cas->dir);
  } else if (syncfs(cas->tmpfd) < 0) {
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "store %s: sync", cas->dir);
  }
  /* 2. Publish: packs (each makes all its blobs visible at once), then loose blobs, on several
   * threads when there are many to rename. */
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
  if (b->publish_errno)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, b->publish_errno,
                            "store %s: cannot publish a blob", cas->dir);
  /* 3. The renames durable: a few directories are synced one by one, many at once. */
  if (n_dirty > 8) {
    if (syncfs(cas->rootfd) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "store %s: sync", cas->dir);
  } else {
    for (unsigned i = 0; i < 256; i++)
      if (dirty[i] && fsync(cas->shard[i]) < 0)
        return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "store %s: sync", cas->dir);
    if (b->n_done && fsync(cas->packs.dirfd) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "store %s: sync", cas->dir);
  }
  b->committed = true;
  return 0;
}

/* ---- refs --------------------------------------------------------------------------------- */

static int open_refs(struct cordon_cas *cas, struct cordon_error **err) {
  int fd = openat(cas->rootfd, CAS_REFS_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return cordon_error_set(
        err, errno == ELOOP || errno == ENOTDIR ? CORDON_ERR_INTEGRITY : CORDON_ERR_SYSTEM, errno,
        "store %s: refs", cas->dir);
  return fd;
}

int cas_ref_add(struct cordon_cas *cas, const unsigned char digest[CAS_DIGEST_LEN],
                struct cordon_error **err) {
  char hex[CAS_HEX_LEN + 1];
  cas_hex(digest, hex);
  _cleanup_close_ int dir = open_refs(cas, err);
  if (dir < 0)
    return -1;
  struct stat st;
  if (fstatat(dir, hex, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
    return 0;
  /* The name is the content: an empty file needs no temp file to appear atomically. */
  int fd = openat(dir, hex, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
  if (fd < 0 && errno != EEXIST)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "ref %s", hex);
  if (fd >= 0)
    close(fd);
  if (fsync(dir) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "ref %s", hex);
  return 0;
}

int cas_ref_remove(struct cordon_cas *cas, const unsigned char digest[CAS_DIGEST_LEN],
                   struct cordon_error **err) {
  char hex[CAS_HEX_LEN + 1];
  cas_hex(digest, hex);
  _cleanup_close_ int dir = open_refs(cas, err);
  if (dir < 0)
    return -1;
  if (unlinkat(dir, hex, 0) < 0 && errno != ENOENT)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "ref %s", hex);
  fsync(dir);
  return 0;
}

int cas_ref_list(struct cordon_cas *cas, char ***out, struct cordon_error **err) {
  int dir = open_refs(cas, err);
  if (dir < 0)
    return -1;
  _cleanup_closedir_ DIR *d = fdopendir(dir);
  if (!d) {
    close(dir);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "store %s: refs", cas->dir);
  }
  char **list = calloc(1, sizeof(char *));
  if (!list)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "refs");
  struct dirent *de;
  while ((errno = 0, de = readdir(d))) {
    if (!cas_hex_valid(de->d_name))
      continue;
    if (strv_push(&list, de->d_name) < 0) {
      strv_free(list);
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "refs");
    }
  }
  if (errno) {
    int e = errno;
    strv_free(list);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "store %s: refs", cas->dir);
  }
  strv_sort(list);
  *out = list;
  return 0;
}

/* ---- listing, removal, verification ------------------------------------------------------- */

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
    b.fd = open_loose(v->cas, it->digest, &st, &e);
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
    ssize_t n = cas_blob_read(&b, buf, COPY_BUFFER, pos);
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
  unsigned char *buf = malloc(COPY_BUFFER);
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
  if (read_sidecar(v->cas, digest, &doc, &e) <= 0) {
    add_problem(v, object, "%s", e ? e->message : "vanished");
    cordon_error_free(e);
    return;
  }
  struct stat st;
  int shard = cas_shard_fd(v->cas, digest[0], false, NULL);
  uint64_t size = shard >= 0 && fstatat(shard, hex, &st, AT_SYMLINK_NOFOLLOW) == 0
                      ? (uint64_t)st.st_size
                      : UINT64_MAX;
  const char *why = sidecar_problem(doc, hex, size);
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
