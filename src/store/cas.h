/* The store's internal side, for the rest of libcordon: blob opens (loose or packed, blob.c),
 * staging many blobs at once (batch.c), the single put (put.c), refs (refs.c) and the helpers
 * verify and gc share (verify.c). include/cordon/cas.h is the public face; store/object.h the
 * primitives (the store's state, the writer lock, the layout's names); store/pack.h the packs. */
#ifndef CORDON_STORE_CAS_H
#define CORDON_STORE_CAS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include <cordon/cas.h>

#include "store/hash.h"
#include "store/object.h"
#include "store/pack.h"

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

/* ---- batches: stage many blobs, make them durable with one sync, then publish ----------- */

struct cas_batch;

/* Holds the writer lock until cas_batch_free. Thread-safe staging. */
int cas_batch_new(struct cordon_cas *cas, struct cas_batch **out, struct cordon_error **err);
/* Unlinks whatever was staged and not committed; releases the lock. */
void cas_batch_free(struct cas_batch *b);

/* Stage one blob from a buffer: hashed here; nothing written when the blob is already there. */
int cas_batch_add_buffer(struct cas_batch *b, const void *data, size_t length,
                         unsigned char digest[CAS_DIGEST_LEN], struct cordon_error **err);

/* Stage one blob with a sidecar of content_type (a snapshot's manifest): always a file of its
 * own, as the single put stores it, published with the batch, its sidecar after it. */
int cas_batch_add_typed(struct cas_batch *b, const void *data, size_t length,
                        const char *content_type, unsigned char digest[CAS_DIGEST_LEN],
                        struct cordon_error **err);

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
/* The store the batch writes to. */
struct cordon_cas *cas_batch_store(struct cas_batch *b);
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

/* Remove a loose blob and its sidecar (sidecar first, so no sidecar is ever left without its
 * blob). Packed blobs go with cas_pack_rewrite. */
int cas_remove_blob(struct cordon_cas *cas, const unsigned char digest[CAS_DIGEST_LEN],
                    uint64_t *freed, struct cordon_error **err);

/* Remove every leftover temp file (only under the exclusive lock). */
int cas_clean_tmp(struct cordon_cas *cas, uint64_t *removed, struct cordon_error **err);

#endif
