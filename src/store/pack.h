/* Packs: the small blobs of a batch (a snapshot's thousands of files) stored together in one
 * file, <store>/packs/<64 hex>.pack, instead of one file each. Creating an inode per small
 * file is most of what a first snapshot costs the kernel; a pack makes it a few appends.
 *
 * A pack is written once and never changed: header, blobs back to back, an index sorted by
 * digest, a trailer. Its name is the SHA-256 of index and trailer, which name every blob's
 * digest, so the name commits to the whole content. Readers bound-check the index and re-hash
 * every blob they read, exactly as for loose blobs; `cas verify` also checks the name and that
 * the entries tile the data. The byte layout is in docs/formats.md. */
#ifndef CORDON_STORE_PACK_H
#define CORDON_STORE_PACK_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>

#include <cordon/error.h>

#include "store/hash.h"
#include "store/object.h"

#define CAS_PACK_DIR "packs"
#define CAS_PACK_SUFFIX ".pack"
#define CAS_PACK_MAGIC "cordpack"
#define CAS_PACK_INDEX_MAGIC "cordpidx"
#define CAS_PACK_VERSION 1u
#define CAS_PACK_HEADER_LEN 16u
#define CAS_PACK_ENTRY_LEN 48u
#define CAS_PACK_TRAILER_LEN 24u
/* A batch packs blobs below this size; bigger ones stay loose (one file each). */
#define CAS_PACK_BLOB_MAX ((uint64_t)1 << 20)
/* A batch whose writer gathered no more than this many blobs (all still in its buffer) stores
 * them as loose blobs instead: a session snapshot that changed three files should not leave a
 * pack of three blobs behind, each adding to every later lookup. */
#define CAS_PACK_MIN_BLOBS 16
/* A writer closes its pack and starts another past this size. */
#define CAS_PACK_ROLL ((uint64_t)1 << 30)
/* Bound on a pack's entries (an index of 768 MiB): a trailer claiming more is refused. */
#define CAS_PACK_MAX_ENTRIES ((uint64_t)1 << 24)

struct cas_pack_entry {
  unsigned char digest[CAS_DIGEST_LEN];
  uint64_t offset; /* from the start of the pack file */
  uint64_t length;
};

/* ---- the format (pure) ------------------------------------------------------------------- */

/* Check a pack's header (its first CAS_PACK_HEADER_LEN bytes). NULL when fine, else why. */
const char *cas_pack_check_header(const unsigned char *header);
/* Parse the trailer (the last CAS_PACK_TRAILER_LEN bytes of a file of file_size bytes): where
 * the index starts and how many entries it has. NULL when fine, else why. */
const char *cas_pack_parse_trailer(const unsigned char *trailer, uint64_t file_size,
                                   uint64_t *index_offset, uint64_t *count);
/* Parse count index entries (count * CAS_PACK_ENTRY_LEN bytes) of a pack whose data ends at
 * index_offset: digests strictly increasing, every blob inside the data. NULL when fine. */
const char *cas_pack_parse_index(const unsigned char *index, uint64_t count, uint64_t index_offset,
                                 struct cas_pack_entry *out);
/* Whether the blobs exactly tile the data (no gap, no overlap): what verify adds to parsing.
 * Sorts a copy; NULL when fine, else why. */
const char *cas_pack_check_tiling(const struct cas_pack_entry *entries, size_t count,
                                  uint64_t index_offset);
/* Encode index and trailer of entries sorted by digest (out holds count * ENTRY_LEN +
 * TRAILER_LEN bytes). */
void cas_pack_encode_index(const struct cas_pack_entry *entries, size_t count,
                           uint64_t index_offset, unsigned char *out);

/* ---- writing ------------------------------------------------------------------------------ */

/* One pack being written in <store>/tmp, by one thread at a time (mu). */
struct cas_pack_writer {
  pthread_mutex_t mu;
  int fd; /* -1 until the buffer is first written out */
  char name[48];
  uint64_t size;      /* bytes of the pack so far, buffered ones included */
  uint64_t kicked;    /* bytes of the temp file whose writeback has been started */
  unsigned char *buf; /* small blobs gather here: one write for many of them */
  size_t buffered;
  struct cas_pack_entry *entries;
  size_t n, cap;
};

/* A pack written to the end and waiting to be published. */
struct cas_pack_done {
  char name[48]; /* temp name in <store>/tmp; empty once renamed */
  int fd;        /* read-write; handed to the store's pack set once published */
  unsigned char id[CAS_DIGEST_LEN];
  uint64_t size;
  struct cas_pack_entry *entries; /* sorted by digest */
  size_t count;
};

void cas_pack_writer_init(struct cas_pack_writer *w);
/* Append a blob whose digest the caller computed (with w->mu held). */
int cas_pack_writer_append(struct cordon_cas *cas, struct cas_pack_writer *w, const void *data,
                           size_t length, const unsigned char digest[CAS_DIGEST_LEN],
                           struct cordon_error **err);
/* Write index and trailer; the writer is empty again and done describes the pack (nothing to
 * do, returning 0 with done->fd == -1, when the writer never got a blob). */
int cas_pack_writer_finish(struct cordon_cas *cas, struct cas_pack_writer *w,
                           struct cas_pack_done *done, struct cordon_error **err);
/* Forget the writer's blobs (which the caller stored elsewhere); only for a writer that has not
 * created its file (fd < 0). */
void cas_pack_writer_reset(struct cas_pack_writer *w);
/* Drop what the writer holds (its temp file is unlinked). */
void cas_pack_writer_discard(struct cordon_cas *cas, struct cas_pack_writer *w);
void cas_pack_done_discard(struct cordon_cas *cas, struct cas_pack_done *done);

/* Rename a finished pack into <store>/packs and hand it to the store's pack set (the caller
 * syncs the packs directory). */
int cas_pack_publish(struct cordon_cas *cas, struct cas_pack_done *done, struct cordon_error **err);

/* ---- reading ------------------------------------------------------------------------------ */

/* A loaded pack. The struct lives until the store is closed; its fd is closed once the pack is
 * gone from the directory and nobody holds it (a blob being read, a list being walked). */
struct cas_pack {
  unsigned char id[CAS_DIGEST_LEN];
  int fd;
  unsigned holds; /* readers holding fd open (atomic) */
  uint64_t size;
  uint64_t index_offset;
  struct cas_pack_entry *entries;
  size_t count;
  dev_t dev; /* the file loaded, to notice another one under the same name */
  ino_t ino;
  bool gone; /* removed or replaced in the directory: no longer looked up */
};

/* The store's loaded packs are a struct cas_pack_set, part of struct cordon_cas (store/object.h).
 */

int cas_packs_open(struct cordon_cas *cas, struct cordon_error **err);
void cas_packs_close(struct cordon_cas *cas);
/* Re-read <store>/packs: load packs not seen yet, mark vanished ones gone. */
int cas_packs_refresh(struct cordon_cas *cas, struct cordon_error **err);
/* Look a digest up in the loaded packs (scanning once first). 1 when found: offset and length,
 * and with `held` non-NULL the pack, held (its fd stays open) until cas_pack_release; 0 when
 * not. */
int cas_packs_find(struct cordon_cas *cas, const unsigned char digest[CAS_DIGEST_LEN],
                   uint64_t *offset, uint64_t *length, struct cas_pack **held);
void cas_pack_release(struct cordon_cas *cas, struct cas_pack *p);
/* A copy of the latest scan's first load problem (NULL when none); the caller frees it. */
char *cas_packs_problem(struct cordon_cas *cas);
/* A copy of all of them (an empty strv when none, NULL when out of memory). */
char **cas_packs_problems(struct cordon_cas *cas);
/* Read a pack's index and trailer again and check its name and that its blobs tile the data.
 * NULL when fine, else why. */
const char *cas_pack_check_structure(const struct cas_pack *p);
/* The packs present now (refreshed), for verify and gc, each held until cas_packs_list_free. */
int cas_packs_list(struct cordon_cas *cas, struct cas_pack ***out, size_t *n,
                   struct cordon_error **err);
void cas_packs_list_free(struct cordon_cas *cas, struct cas_pack **list, size_t n);
/* Replace n packs by one that holds only the blobs marked in keep[i] (one flag per entry of
 * packs[i]), each once, re-hashed as it is copied: a corrupt one stops the rewrite with an
 * integrity error before anything is removed. The new pack is durable and visible before the
 * old ones go; with nothing kept they are just removed; one pack with everything kept is left
 * as it is. gc, under the exclusive lock. */
int cas_pack_rewrite(struct cordon_cas *cas, struct cas_pack **packs, size_t n, bool *const *keep,
                     struct cordon_error **err);
/* Packs smaller than this are merged by gc (when there are two or more). */
#define CAS_PACK_SMALL ((uint64_t)16 << 20)
/* More small packs than this, and the next batch that adds one merges them all (every blob
 * kept), when it can take the store's lock without waiting. */
#define CAS_PACK_AUTO_MERGE 32
/* That merge: 1 when it merged, 0 when there was nothing to do or the store was busy. */
int cas_packs_auto_merge(struct cordon_cas *cas, struct cordon_error **err);
/* Remove a pack's file and mark it gone (gc, under the exclusive lock). */
int cas_packs_remove(struct cordon_cas *cas, struct cas_pack *p, struct cordon_error **err);

#endif
