/* The store's primitives, below everything else in src/store/: the state of an open store
 * (struct cordon_cas), its layout names, the writer lock, the integrity error every reader
 * reports, and opening a loose blob without following a symlink or blocking on a FIFO. The
 * packs (pack.c) and the rest of the store (cas.c, blob.c, put.c, batch.c, refs.c, verify.c)
 * build on this header; it includes neither of them, so the dependency runs one way. */
#ifndef CORDON_STORE_OBJECT_H
#define CORDON_STORE_OBJECT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <cordon/cas.h>
#include <cordon/error.h>

#include "store/hash.h"

#define CAS_TMP_DIR "tmp"
#define CAS_REFS_DIR "refs"
#define CAS_STATCACHE_DIR "statcache"
#define CAS_LOCK_FILE "lock"
#define CAS_SIDECAR_SUFFIX ".meta.json"
#define CAS_SIDECAR_MAX ((size_t)1 << 20)
#define CAS_MANIFEST_TYPE "application/vnd.cordon.manifest.v1"
/* Temp files staged inside a shard start with this (never a blob or sidecar name). */
#define CAS_SHARD_TEMP_PREFIX ".tmp-"
/* The buffer of every streaming copy or re-hash of a blob. */
#define CAS_COPY_BUFFER ((size_t)1 << 20)

struct cas_pack;

/* The store's packs, loaded on first use (pack.c fills and reads it; it lives here because it
 * is part of the store's state). */
struct cas_pack_set {
  pthread_rwlock_t lock;
  int dirfd;
  bool scanned;
  struct cas_pack **packs;
  size_t n, cap;
  char **problems; /* why the latest scan could not load some packs (strv; NULL when none) */
};

struct cordon_cas {
  char *dir;
  int rootfd;
  int tmpfd;
  int lockfd;
  pthread_mutex_t mu;
  int shard[256]; /* lazily opened shard directories, -1 until needed */
  /* A shard this process created: its name in the root is durable only once the root is
   * synced, which every commit that renames into a shard then does (cas_sync_root). */
  bool root_dirty;
  unsigned shared_holds;
  char tmp_prefix[17];
  uint64_t tmp_counter;
  struct cas_pack_set packs;
};

/* The writer lock: writers (put, snapshot, import) hold it shared, gc exclusively. Shared holds
 * nest within a process. */
int cas_lock_shared(struct cordon_cas *cas, struct cordon_error **err);
void cas_unlock_shared(struct cordon_cas *cas);
/* Take the writer lock exclusively (waits for writers); returns an fd to close, or < 0. */
int cas_lock_exclusive(struct cordon_cas *cas, struct cordon_error **err);
/* The same without waiting: -2 when someone holds the lock. */
int cas_try_lock_exclusive(struct cordon_cas *cas, struct cordon_error **err);

/* Make the shards this process created durable (fsync of the root when one was). */
int cas_sync_root(struct cordon_cas *cas, struct cordon_error **err);

/* The integrity error every reader reports. */
int cas_integrity_error(struct cordon_error **err, const unsigned char expected[CAS_DIGEST_LEN],
                        const unsigned char actual[CAS_DIGEST_LEN]);

/* The fd of shard dir `byte` (never a symlink). Absent without create: returns -2 (no error
 * set). */
int cas_shard_fd(struct cordon_cas *cas, unsigned byte, bool create, struct cordon_error **err);

/* openat with O_NOATIME (and O_CLOEXEC) where the kernel allows it, plain openat otherwise. */
int cas_openat_noatime(int dirfd, const char *name, int flags);

/* Open the loose blob <shard>/<hex> for reading (st receives its stat). Absent:
 * CORDON_ERR_NOT_FOUND; a symlink, FIFO or anything but a regular file: CORDON_ERR_INTEGRITY. */
int cas_loose_open(struct cordon_cas *cas, const unsigned char digest[CAS_DIGEST_LEN],
                   struct stat *st, struct cordon_error **err);
/* Whether an intact-looking loose copy (a regular file of the expected size) is there. */
bool cas_loose_present(struct cordon_cas *cas, const unsigned char digest[CAS_DIGEST_LEN],
                       uint64_t size);

/* A unique temp name in <store>/tmp (out holds at least 48 bytes). */
void cas_tmp_name(struct cordon_cas *cas, char *out, size_t size);
/* Whether a shard entry is a staged temp file (CAS_SHARD_TEMP_PREFIX). */
bool cas_is_shard_temp(const char *name);

/* How to name a file that should have been a regular file or directory ("a symlink", "a FIFO"). */
const char *cas_kind_word(mode_t mode);
/* read(2), retried on EINTR. */
ssize_t cas_read_retry(int fd, void *buf, size_t n);

/* Threads for parallel work: online CPUs, at most 8; CORDON_THREADS overrides. */
unsigned cas_default_threads(void);
/* Threads for work that mostly waits on the disk (a snapshot's walk, and the batch's pack
 * writers, one per walk thread): two per CPU, at most 8; CORDON_THREADS, when set, exactly. */
unsigned cas_io_threads(void);

#endif
