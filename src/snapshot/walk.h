/* The parallel tree walk behind snapshots: list and stat every directory, reuse digests from
 * the stat cache, hash (and stage into the store) every other regular file, on N threads that
 * share one job stack. Every open is anchored at the tree's root fd and never follows a
 * symlink; a tree that changes under the walk in a way that would make it follow one (a
 * directory swapped for a symlink) is an error, not an escape. */
#ifndef CORDON_SNAPSHOT_WALK_H
#define CORDON_SNAPSHOT_WALK_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#include <cordon/snapshot.h>

#include "snapshot/manifest.h"
#include "snapshot/statcache.h"
#include "store/cas.h"

struct walk_node {
  struct walk_node **children; /* directories: sorted by name */
  uint32_t n_children;
  char kind; /* enum snap_kind */
  bool cacheable;
  bool whiteout; /* overlay mode: a character device 0/0 */
  bool opaque;   /* overlay mode: an opaque directory */
  bool vanished; /* deleted between its listing and its read: not part of the snapshot */
  /* files: listed by their directory entry alone (no stat cache record to compare with), so
   * stat'ed only once opened, and charged against the limit then, before their read */
  bool unstated;
  uint8_t dtype; /* the directory entry's d_type, while the directory is listed */
  uint16_t mode;
  char *path; /* "" for the root */
  size_t path_len;
  const char *name;
  uint64_t size;
  uint32_t major, minor;
  unsigned char digest[CAS_DIGEST_LEN];
  char *target;
  struct snap_stat st; /* files: the stat under which digest was computed */
  int64_t cache_index; /* files: the stat cache record of this name, -1 when none */
  struct walk_node *next_job;
  uint8_t job;
};

struct walk_skip {
  dev_t dev;
  ino_t ino;
};

struct walk_options {
  const char *const *roots;   /* normalised absolute aliases of the root (symlink targets) */
  const char *const *exclude; /* normalised relative paths */
  unsigned threads;
  const struct statcache *cache; /* NULL: hash everything */
  bool overlay;                  /* upper-layer mode: whiteouts, opaque dirs, no redirects */
  /* overlay mode: "trusted.overlay." or "user.overlay.", the only xattrs read as markers;
   * NULL: none (only character devices 0/0 are whiteouts) */
  const char *marker_prefix;
  struct timespec threshold;    /* racy-timestamp threshold */
  const struct walk_skip *skip; /* directories never entered (the store) */
  size_t n_skip;
  const struct cordon_progress *progress;
  /* The walk fails (CORDON_ERR_DENIED) once the regular files it saw hold more than this many
   * bytes (their sizes as lstat reports them, holes included), checked as each directory is
   * listed, before its files are read. UINT64_MAX: no limit. */
  uint64_t limit_bytes;
};

struct walk_counts {
  uint64_t entries, files, bytes, hashed_files, hashed_bytes;
};

struct walk_tree;

/* Walk the tree at rootfd; new blobs are staged into batch. */
int walk_run(struct cordon_cas *cas, struct cas_batch *batch, int rootfd,
             const struct walk_options *options, struct walk_tree **out, struct cordon_error **err);
struct walk_node *walk_root(struct walk_tree *t);
void walk_get_counts(struct walk_tree *t, struct walk_counts *counts);
/* The nodes in canonical order (root first); *nodes is malloc'd. */
int walk_flatten(struct walk_tree *t, struct walk_node ***nodes, size_t *count);
void walk_free(struct walk_tree *t);

/* A manifest entry viewing a node (pointers into the node). */
void walk_node_entry(const struct walk_node *n, struct snap_entry *e);

#endif
