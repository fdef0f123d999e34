/* The canonical snapshot manifest (docs/formats.md): pure encoding, strict parsing, the
 * canonical path order and symlink-target canonicalisation. No system calls here.
 *
 * Paths are relative, components joined by '/', the root is "" in memory and "." on the wire.
 * Canonical order is depth-first with each directory's entries sorted bytewise, which is the
 * same as comparing whole paths bytewise with '/' ranked below every other byte. */
#ifndef CORDON_SNAPSHOT_MANIFEST_H
#define CORDON_SNAPSHOT_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cordon/error.h>

#include "store/hash.h"

#define SNAP_MANIFEST_MAGIC "cordon-manifest 1\n"
/* Largest manifest read back (a tree of a few million entries). */
#define SNAP_MANIFEST_MAX ((size_t)1 << 30)

enum snap_kind {
  SNAP_DIR = 'd',
  SNAP_FILE = 'f',
  SNAP_SYMLINK = 'l',
  SNAP_FIFO = 'p',
  SNAP_SOCKET = 's',
  SNAP_CHAR = 'c',
  SNAP_BLOCK = 'b',
};

struct snap_entry {
  char *path; /* "" for the root */
  size_t path_len;
  char kind;
  uint16_t mode; /* permission bits, 07777 */
  uint64_t size;
  unsigned char digest[CAS_DIGEST_LEN];
  char *target; /* symlinks */
  uint32_t major, minor;
};

/* A growable byte buffer. */
struct snap_buf {
  char *data;
  size_t length, capacity;
  bool oom;
};

int snap_buf_reserve(struct snap_buf *b, size_t extra);
void snap_buf_append(struct snap_buf *b, const void *data, size_t length);
void snap_buf_free(struct snap_buf *b);

/* < 0, 0, > 0 as a sorts before, equal to, after b in canonical order. */
int snap_path_compare(const char *a, size_t a_len, const char *b, size_t b_len);

/* True when name is a valid component: not empty, not "." or "..", no '/' (NUL cannot occur). */
bool snap_name_valid(const char *name, size_t len);

/* Append one entry's encoding. The caller guarantees validity and order. */
void snap_entry_encode(struct snap_buf *b, const struct snap_entry *e);
/* Encode a whole manifest (magic + entries), checking order and structure first. */
int snap_manifest_encode(const struct snap_entry *entries, size_t count, struct snap_buf *out,
                         struct cordon_error **err);

struct snap_manifest {
  struct snap_entry *entries;
  size_t count;
  char *storage; /* the parsed copy the entries point into */
};

/* Strict parse: exactly the canonical encoding, the root first, paths strictly increasing,
 * every parent an earlier directory (so nothing lives below a symlink or a file). */
int snap_manifest_parse(const void *data, size_t length, struct snap_manifest *out,
                        struct cordon_error **err);
void snap_manifest_free(struct snap_manifest *m);

/* Canonicalise a symlink target: an absolute target that lexically lies at or under one of
 * roots (absolute paths that name the tree's root) becomes relative to the link's directory;
 * anything else is returned unchanged. link_path is the link's path in the tree. *out is
 * malloc'd. */
int snap_symlink_canonical(const char *target, const char *link_path, const char *const *roots,
                           char **out);

/* Lexically normalise an absolute path (drop "." and empty components, resolve ".."); NULL when
 * out of memory. */
char *snap_normalize_absolute(const char *path);

#endif
