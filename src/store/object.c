/* The store's primitives: the writer lock, shard directories, the integrity error, temp names,
 * and the safe open of a loose blob. Everything else in src/store/ (the packs included) builds
 * on these; they use nothing of it but hash.c.
 *
 * Reads never follow a symlink below the store root and never block on a FIFO: shards are
 * opened O_NOFOLLOW|O_DIRECTORY from the root fd, blobs are lstat'ed, opened
 * O_NOFOLLOW|O_NONBLOCK and required to be regular files on the descriptor. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/object.h"

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

unsigned cas_io_threads(void) {
  unsigned n = cas_default_threads();
  const char *env = getenv("CORDON_THREADS");
  if (env && *env)
    return n;
  return 2 * n > 8 ? 8 : 2 * n;
}

ssize_t cas_read_retry(int fd, void *buf, size_t n) {
  for (;;) {
    ssize_t r = read(fd, buf, n);
    if (r < 0 && errno == EINTR)
      continue;
    return r;
  }
}

const char *cas_kind_word(mode_t mode) {
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

/* ---- shards and loose blobs -------------------------------------------------------------- */

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
    if (mkdirat(cas->rootfd, name, 0700) == 0) {
      cas->root_dirty = true;
    } else if (errno != EEXIST) {
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
                             ? cas_kind_word(st.st_mode)
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

int cas_sync_root(struct cordon_cas *cas, struct cordon_error **err) {
  pthread_mutex_lock(&cas->mu);
  bool dirty = cas->root_dirty;
  cas->root_dirty = false;
  pthread_mutex_unlock(&cas->mu);
  if (dirty && fsync(cas->rootfd) < 0) {
    int e = errno;
    pthread_mutex_lock(&cas->mu);
    cas->root_dirty = true;
    pthread_mutex_unlock(&cas->mu);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "store %s: sync", cas->dir);
  }
  return 0;
}

/* The loose blob <shard>/<hex>, opened safely: O_NOFOLLOW refuses a symlink, O_NONBLOCK keeps
 * a FIFO from hanging the open; the type is then checked on the descriptor itself. */
int cas_loose_open(struct cordon_cas *cas, const unsigned char digest[CAS_DIGEST_LEN],
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
                      : unreadable(err, hex, cas_kind_word(m));
  }
  return fd;
}

/* Whether an intact-looking loose copy (a regular file of the expected size) is there. */
bool cas_loose_present(struct cordon_cas *cas, const unsigned char digest[CAS_DIGEST_LEN],
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

/* ---- temp files -------------------------------------------------------------------------- */

void cas_tmp_name(struct cordon_cas *cas, char *out, size_t size) {
  uint64_t n = __atomic_add_fetch(&cas->tmp_counter, 1, __ATOMIC_RELAXED);
  snprintf(out, size, "%s-%llu.tmp", cas->tmp_prefix, (unsigned long long)n);
}

bool cas_is_shard_temp(const char *name) {
  return !strncmp(name, CAS_SHARD_TEMP_PREFIX, strlen(CAS_SHARD_TEMP_PREFIX));
}
