/* The stat cache: for each regular file of the last snapshot of a directory, the stat data
 * (device, inode, size, mtime, ctime, mode) under which its digest was computed. A file whose
 * stat data still matches is not read again.
 *
 * Racy timestamps (git's problem): a file changed twice within one timestamp tick keeps its
 * mtime. An entry is therefore stored only when its mtime and ctime are older than the moment
 * the walk began (less a margin for coarse filesystem clocks); files touched around the walk
 * are simply read again next time.
 *
 * Layout (host-endian, local, untrusted: anything unexpected makes the cache empty):
 *   header  "CDNSTAT2" u64 root_dev u64 root_ino u64 n_dirs u64 n_files u64 names_size
 *   dirs    n_dirs x struct statcache_dir, in canonical path order
 *   files   n_files x struct statcache_file, grouped by directory, sorted by name
 *   names   the directory paths and file names
 *   trailer SHA-256 of everything before it
 * Records have fixed sizes, so loading is one read and one hash: nothing is parsed. A directory
 * job finds its directory once and merges its sorted children with the directory's files. */
#ifndef CORDON_SNAPSHOT_STATCACHE_H
#define CORDON_SNAPSHOT_STATCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#include <cordon/error.h>

#include "base/fs.h"
#include "snapshot/manifest.h"

#define STATCACHE_MAGIC "CDNSTAT2"
/* Seconds before the walk's start below which timestamps are trusted. */
#define STATCACHE_RACY_MARGIN 2

/* What a file's stat says, as far as the cache cares. */
struct snap_stat {
  uint64_t dev, ino, size;
  int64_t mtime_sec, ctime_sec;
  uint32_t mtime_nsec, ctime_nsec;
  uint32_t mode;
};

struct statcache_dir {
  uint32_t path_off, path_len, first, count;
};

/* Every regular file has a record; only trusted ones (stat data old enough to rule out a racy
 * rewrite) let a file go unread. Keeping the others lets the next snapshot of an unchanged
 * set of names update records in place instead of rewriting the cache. */
#define STATCACHE_TRUSTED 1u

struct statcache_file {
  uint64_t dev, ino, size;
  int64_t mtime_sec, ctime_sec;
  uint32_t mtime_nsec, ctime_nsec;
  uint32_t mode, name_off, name_len, flags;
  unsigned char digest[CAS_DIGEST_LEN];
};

struct statcache {
  unsigned char *storage; /* a private, writable mapping of the file */
  size_t length;
  int fd; /* the file, open for in-place updates; -1 when none */
  const struct statcache_dir *dirs;
  const struct statcache_file *files;
  const char *names;
  size_t n_dirs, n_files, names_size;
  uint64_t root_dev, root_ino;
};

void snap_stat_from(struct snap_stat *out, const struct stat *st);

/* Validate cache bytes (data stays the caller's). Anything malformed gives -1. */
int statcache_parse(unsigned char *data, size_t length, struct statcache *out);
/* Load dirfd/name; a missing or malformed cache gives an empty one. */
void statcache_load(int dirfd, const char *name, struct statcache *out);
void statcache_free(struct statcache *c);

/* Rewrite record index in memory (name kept); returns true when it changed. */
bool statcache_set(struct statcache *c, size_t index, const struct snap_stat *st,
                   const unsigned char digest[CAS_DIGEST_LEN], bool trusted);
/* Write the changed records and a fresh checksum back into the file (no rename, no fsync: a
 * torn update fails the checksum and only costs a full read next time). */
int statcache_write_back(struct statcache *c, const size_t *changed, size_t n_changed);

/* The files of directory path (canonical order search); false when the cache has none. */
bool statcache_find_dir(const struct statcache *c, const char *path, size_t path_len, size_t *first,
                        size_t *count);
/* A file's name. */
static inline const char *statcache_name(const struct statcache *c,
                                         const struct statcache_file *f) {
  return c->names + f->name_off;
}
bool statcache_matches(const struct statcache_file *f, const struct snap_stat *st);
/* True when st's timestamps are too recent to be trusted next time. */
bool statcache_racy(const struct snap_stat *st, const struct timespec *threshold);
/* The threshold for a walk starting now. */
struct timespec statcache_threshold(void);

/* Building a new cache: begin a directory, add its files in name order, repeat (directories in
 * canonical order); then finish and save. */
struct statcache_writer {
  struct snap_buf dirs, files, names;
  uint64_t n_dirs, n_files;
  bool dir_open;
};
void statcache_writer_dir(struct statcache_writer *w, const char *path, size_t path_len);
void statcache_writer_file(struct statcache_writer *w, const char *name, size_t name_len,
                           const struct snap_stat *st, const unsigned char digest[CAS_DIGEST_LEN],
                           bool trusted);
/* Finish into bytes (w is freed). */
int statcache_writer_finish(struct statcache_writer *w, uint64_t root_dev, uint64_t root_ino,
                            struct snap_buf *out);
void statcache_writer_free(struct statcache_writer *w);
/* Write bytes to a temp file beside name in dirfd (t), for statcache_publish to rename to name
 * or fs_temp_discard to drop. No fsync: losing the cache only costs time. */
int statcache_stage(int dirfd, const char *name, const struct snap_buf *bytes, struct fs_temp *t,
                    struct cordon_error **err);
/* Rename a staged temp file to name; the temp file is removed when that fails. */
int statcache_publish(struct fs_temp *t, const char *name, struct cordon_error **err);

#endif
