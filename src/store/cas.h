/* The store's internal side: safe blob opens (loose or packed), staging many blobs at once
 * (batches), the writer lock that keeps gc away, and the helpers verify and gc share.
 * include/cordon/cas.h is the public face; store/pack.h the packs. */
#ifndef CORDON_STORE_CAS_H
#define CORDON_STORE_CAS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include <cordon/cas.h>

#include "store/hash.h"
#include "store/pack.h"

#define CAS_TMP_DIR "tmp"
#define CAS_REFS_DIR "refs"
#define CAS_STATCACHE_DIR "statcache"
#define CAS_LOCK_FILE "lock"
#define CAS_SIDECAR_SUFFIX ".meta.json"
#define CAS_SIDECAR_MAX ((size_t)1 << 20)
#define CAS_MANIFEST_TYPE "application/vnd.cordon.manifest.v1"
/* Temp files staged inside a shard start with this (never a blob or sidecar name). */
#define CAS_SHARD_TEMP_PREFIX ".tmp-"

struct cordon_cas {
  char *dir;
  int rootfd;
  int tmpfd;
  int lockfd;
  pthread_mutex_t mu;
  int shard[256]; /* lazily opened shard directories, -1 until needed */
  unsigned shared_holds;
  char tmp_prefix[17];
  uint64_t tmp_counter;
  struct cas_pack_set packs;
};

/* The writer lock: writers (put, snapshot, import) hold it shared, gc exclusively. Shared holds
 * nest within a process. */
int cas_lock_shared(struct cordon_cas *cas, struct cordon_error **err);
void cas_unlock_shared(struct cordon_cas *cas);

/* The fd of shard dir `byte` (never a symlink). Absent without create: returns -2 (no error
 * set). */
int cas_shard_fd(struct cordon_cas *cas, unsigned byte, bool create, struct cordon_error **err);

/* openat with O_NOATIME (and O_CLOEXEC) where the kernel allows it, plain openat otherwise. */
int cas_openat_noatime(int dirfd, const char *name, int flags);

/* An opened blob: a file of its own (loose) or a range of a pack. */
struct cas_blob {
  int fd;     /* the blob's own file, or the pack's (which the store owns) */
  bool owned; /* fd is the blob's own: cas_blob_close closes it */
  struct cordon_cas *cas;
  struct cas_pack *held; /* the pack, held open until cas_blob_close */
  uint64_t offset;       /* where the blob's bytes start in fd */
  uint64_t size;
  bool packed;
  unsigned char pack[CAS_DIGEST_LEN]; /* the pack's id, when packed */
};

/* Open a blob for reading: no symlink anywhere below the root, non-blocking, a regular file.
 * Absent: CORDON_ERR_NOT_FOUND (CORDON_ERR_INTEGRITY when some pack is unreadable, since the
 * blob may be in it); anything but a regular file: CORDON_ERR_INTEGRITY ("unreadable"). */
int cas_blob_open(struct cordon_cas *cas, const unsigned char digest[CAS_DIGEST_LEN],
                  struct cas_blob *b, struct cordon_error **err);
/* The region of the blob that starts at pos (< size): *hole is true when it is a hole of a
 * sparse loose blob (zeros not stored on disk), and *end is where the region ends (at most the
 * blob's size). Packed blobs are one data region. */
void cas_blob_region(const struct cas_blob *b, uint64_t pos, bool *hole, uint64_t *end);
/* Read up to n bytes at pos within the blob (never past its size); 0 at its end. */
ssize_t cas_blob_read(const struct cas_blob *b, void *buf, size_t n, uint64_t pos);
void cas_blob_close(struct cas_blob *b);
/* Where a blob is stored, relative to the store ("ab/<hex>" or "packs/<hex>.pack"); out holds
 * at least CAS_HEX_LEN + 16 bytes. */
void cas_blob_location(const struct cas_blob *b, const unsigned char digest[CAS_DIGEST_LEN],
                       char *out, size_t size);

/* 1 when an intact-looking blob (a regular file of the expected size) is present, 0 when
 * absent or when what is there must be replaced. */
int cas_blob_present(struct cordon_cas *cas, const unsigned char digest[CAS_DIGEST_LEN],
                     uint64_t size);

/* Read and verify a whole blob (at most max bytes). */
int cas_read_verified(struct cordon_cas *cas, const unsigned char digest[CAS_DIGEST_LEN],
                      size_t max, unsigned char **data, size_t *length, struct cordon_error **err);

/* The integrity error every reader reports. */
int cas_integrity_error(struct cordon_error **err, const unsigned char expected[CAS_DIGEST_LEN],
                        const unsigned char actual[CAS_DIGEST_LEN]);

/* A unique temp name in <store>/tmp (out holds at least 48 bytes). */
void cas_tmp_name(struct cordon_cas *cas, char *out, size_t size);

/* ---- batches: stage many blobs, make them durable with one sync, then publish ----------- */

struct cas_batch;

/* Holds the writer lock until cas_batch_free. Thread-safe staging. */
int cas_batch_new(struct cordon_cas *cas, struct cas_batch **out, struct cordon_error **err);
/* Unlinks whatever was staged and not committed; releases the lock. */
void cas_batch_free(struct cas_batch *b);

/* Stage one blob from a buffer: hashed here; nothing written when the blob is already there. */
int cas_batch_add_buffer(struct cas_batch *b, const void *data, size_t length,
                         unsigned char digest[CAS_DIGEST_LEN], struct cordon_error **err);

/* Stage one blob from a stream: open, write (hashing as it goes), close. */
struct cas_stage {
  struct cas_batch *batch;
  int fd;
  char name[48];
  struct cas_hasher *hasher; /* caller's (per thread) */
  uint64_t size;
  bool holes; /* cas_stage_skip left a hole: the file's length is set at close */
};
int cas_stage_open(struct cas_batch *b, struct cas_hasher *hasher, struct cas_stage *st,
                   struct cordon_error **err);
int cas_stage_write(struct cas_stage *st, const void *data, size_t length,
                    struct cordon_error **err);
int cas_stage_close(struct cas_stage *st, unsigned char digest[CAS_DIGEST_LEN],
                    struct cordon_error **err);
/* Append length zero bytes as a hole: hashed, not written (the staged blob stays sparse). */
int cas_stage_skip(struct cas_stage *st, uint64_t length, struct cordon_error **err);
void cas_stage_abort(struct cas_stage *st);

/* Make every staged blob durable, then rename each into its shard (an intact copy already
 * there wins) and make the renames durable. */
int cas_batch_commit(struct cas_batch *b, struct cordon_error **err);
/* Number of blobs staged so far (written to temp files, not deduplicated ones). */
uint64_t cas_batch_staged(struct cas_batch *b);

/* Put a blob and its sidecar with full per-blob durability (the single put). */
int cas_put_internal(struct cordon_cas *cas, const void *data, size_t length,
                     const char *content_type, const char *metadata_json,
                     unsigned char digest[CAS_DIGEST_LEN], struct cordon_error **err);

/* ---- refs: the snapshots the store keeps (gc roots) ------------------------------------ */

int cas_ref_add(struct cordon_cas *cas, const unsigned char digest[CAS_DIGEST_LEN],
                struct cordon_error **err);
/* Removing a ref that does not exist is not an error. */
int cas_ref_remove(struct cordon_cas *cas, const unsigned char digest[CAS_DIGEST_LEN],
                   struct cordon_error **err);
/* The refs, sorted (NULL-terminated hex strings). */
int cas_ref_list(struct cordon_cas *cas, char ***out, struct cordon_error **err);

/* ---- helpers shared with verify and gc --------------------------------------------------- */

/* Every loose blob (shards 00..ff, names that are 64 hex digits in the right shard); packed
 * blobs are listed by cas_packs_list. */
struct cas_blob_list {
  unsigned char (*digests)[CAS_DIGEST_LEN];
  size_t count;
  size_t capacity;
};
int cas_list_blobs(struct cordon_cas *cas, struct cas_blob_list *out, struct cordon_error **err);
void cas_blob_list_free(struct cas_blob_list *list);

/* Take the writer lock exclusively (waits for writers); returns an fd to close, or < 0. */
int cas_lock_exclusive(struct cordon_cas *cas, struct cordon_error **err);
/* The same without waiting: -2 when someone holds the lock. */
int cas_try_lock_exclusive(struct cordon_cas *cas, struct cordon_error **err);

/* Remove a loose blob and its sidecar (sidecar first, so no sidecar is ever left without its
 * blob). Packed blobs go with cas_pack_rewrite. */
int cas_remove_blob(struct cordon_cas *cas, const unsigned char digest[CAS_DIGEST_LEN],
                    uint64_t *freed, struct cordon_error **err);

bool cas_is_shard_temp(const char *name);

/* Remove every leftover temp file (only under the exclusive lock). */
int cas_clean_tmp(struct cordon_cas *cas, uint64_t *removed, struct cordon_error **err);

/* Threads for parallel work: online CPUs, at most 8; CORDON_THREADS overrides. */
unsigned cas_default_threads(void);

#endif
