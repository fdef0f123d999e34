/* cordon — snapshots of directory trees.
 *
 * A snapshot is a canonical manifest stored as a blob in the CAS; its id is the SHA-256 of the
 * manifest's bytes, a pure function of the tree: names, kinds, permission bits, file contents
 * and symlink targets count; mtimes, owners, inode numbers and readdir order do not. Absolute
 * symlink targets inside the tree are stored relative to the link; symlinks are never followed;
 * FIFOs, sockets and devices are recorded by name and kind. docs/formats.md has the format.
 *
 * Taking a snapshot re-reads only files whose stat data changed since the last snapshot of the
 * same directory (a stat cache with git's racy-timestamp rule) and hashes on every core. Every
 * snapshot taken or imported gets a ref in the store, which keeps it from gc until forgotten.
 * Sparse files are read by their data regions and stored sparse: holes cost neither reads nor
 * disk, and the id is the same as for the dense file. A tree whose files hold more than a limit
 * (8 GiB unless the caller says otherwise) is refused before it is stored. */
#ifndef CORDON_SNAPSHOT_H
#define CORDON_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cordon/cas.h>
#include <cordon/error.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Which extended attributes mark an overlay upper layer's whiteouts, opaque directories,
 * redirects and metacopies: those of the namespace the overlay was mounted with (trusted.*
 * by default, user.* with the "userxattr" option). Anything else is content, never a marker:
 * through an overlay mounted with trusted xattrs a sandbox can set user.overlay.* freely, and
 * its trusted.overlay.* lands escaped (trusted.overlay.overlay.*). */
enum cordon_overlay_xattrs {
  CORDON_OVERLAY_XATTRS_NONE = 0, /* only character devices 0/0 are whiteouts */
  CORDON_OVERLAY_XATTRS_TRUSTED,  /* trusted.overlay.* */
  CORDON_OVERLAY_XATTRS_USER,     /* user.overlay.* (an overlay mounted with userxattr) */
};

struct cordon_snapshot_options {
  /* Absolute paths that also name the tree's root (e.g. where a sandbox mounts it): symlink
   * targets under them are made relative. The directory's own path (as given and resolved) is
   * always one. NULL-terminated; NULL for none. */
  const char *const *root_aliases;
  /* Tree-relative paths left out of the snapshot (e.g. a git worktree's ".git" link file). */
  const char *const *exclude;
  unsigned threads;   /* 0: online CPUs, at most 8 */
  bool no_stat_cache; /* hash every file */
  const struct cordon_progress *progress;
  /* The most bytes the tree's regular files may hold (their sizes, holes included): a tree over
   * it fails with CORDON_ERR_DENIED before its files are stored, and leaves nothing behind.
   * 0: CORDON_SNAPSHOT_DEFAULT_MAX_BYTES; CORDON_SNAPSHOT_UNLIMITED: no limit. */
  uint64_t max_bytes;
  /* cordon_snapshot_take_overlay only: the namespace of the overlay's own markers (the one it
   * was mounted with). Ignored by every other walk: a tree's xattrs are never markers there. */
  enum cordon_overlay_xattrs overlay_xattrs;
};

/* 8 GiB: far above a source tree with its build outputs, far below what fills a disk. */
#define CORDON_SNAPSHOT_DEFAULT_MAX_BYTES ((uint64_t)8 << 30)
#define CORDON_SNAPSHOT_UNLIMITED UINT64_MAX

struct cordon_snapshot_stats {
  uint64_t entries;      /* manifest entries, the root included */
  uint64_t files;        /* regular files */
  uint64_t bytes;        /* their total size */
  uint64_t hashed_files; /* files read this time (the rest came from the stat cache) */
  uint64_t hashed_bytes;
  uint64_t new_blobs; /* blobs written to the store */
  double seconds;
};

/* Snapshot the tree at dir into the store; id receives the snapshot id. stats may be NULL.
 * The store's own directory (and its .cordon parent) is never part of the snapshot. */
CORDON_API int cordon_snapshot_take(struct cordon_cas *cas, const char *dir,
                                    const struct cordon_snapshot_options *options,
                                    char id[CORDON_DIGEST_HEX_SIZE],
                                    struct cordon_snapshot_stats *stats, struct cordon_error **err);

struct cordon_restore_options {
  unsigned threads; /* 0: online CPUs, at most 8 */
  /* Keep set-user-ID and set-group-ID bits on files and directories. Off by default: a restore
   * must not mint setuid binaries owned by whoever restores, nor set-group-ID directories. */
  bool keep_setid;
  /* Create device nodes. Off by default: a snapshot's device node is refused by name. */
  bool allow_devices;
  const struct cordon_progress *progress;
  /* A tree that holds snapshot link_from_id exactly and is never written (a materialised
   * base): a file whose path, digest and mode are the same there is hard-linked from it
   * instead of copied. NULL: copy everything. */
  const char *link_from_dir;
  const char *link_from_id;
};

/* Restore snapshot id as directory dir, which must not exist or be an empty directory. The tree
 * is built beside dir and renamed into place only when every blob verified, so a failure
 * leaves nothing behind. options may be NULL. */
CORDON_API int cordon_snapshot_restore(struct cordon_cas *cas, const char *id, const char *dir,
                                       const struct cordon_restore_options *options,
                                       struct cordon_error **err);

/* Write the canonical tar image of a snapshot to fd (byte-identical for the same id on every
 * host: sorted paths, zero mtimes and owners, real modes, relative symlinks). A corrupt blob
 * stops the image before its end-of-archive marker, so no reader mistakes it for whole. */
CORDON_API int cordon_snapshot_export(struct cordon_cas *cas, const char *id, int fd,
                                      const struct cordon_progress *progress,
                                      struct cordon_error **err);

/* Read a tar image from fd into the store as a snapshot. The archive is hostile until proven
 * otherwise: absolute paths, "..", entries below a symlink or a file, hard links to anything
 * but an earlier file of the archive, device nodes, oversized headers and truncation are
 * refused, and a refused archive leaves nothing in the store. */
CORDON_API int cordon_snapshot_import(struct cordon_cas *cas, int fd,
                                      const struct cordon_progress *progress,
                                      char id[CORDON_DIGEST_HEX_SIZE], struct cordon_error **err);

enum cordon_snapshot_kind {
  CORDON_SNAPSHOT_DIR = 'd',
  CORDON_SNAPSHOT_FILE = 'f',
  CORDON_SNAPSHOT_SYMLINK = 'l',
  CORDON_SNAPSHOT_FIFO = 'p',
  CORDON_SNAPSHOT_SOCKET = 's',
  CORDON_SNAPSHOT_CHAR = 'c',
  CORDON_SNAPSHOT_BLOCK = 'b',
};

struct cordon_snapshot_entry {
  char *path; /* "" for the root; any bytes but NUL */
  size_t path_length;
  enum cordon_snapshot_kind kind;
  unsigned mode; /* permission bits */
  uint64_t size;
  char digest[CORDON_DIGEST_HEX_SIZE]; /* files; "" otherwise */
  char *target;                        /* symlinks; NULL otherwise */
  unsigned major, minor;               /* devices */
};

/* The entries of a snapshot, in canonical order (the manifest is verified). */
CORDON_API int cordon_snapshot_entries(struct cordon_cas *cas, const char *id,
                                       struct cordon_snapshot_entry **entries, size_t *count,
                                       struct cordon_error **err);
CORDON_API void cordon_snapshot_entries_free(struct cordon_snapshot_entry *entries, size_t count);

/* The snapshots the store keeps (sorted ids, NULL-terminated; free with cordon_strv_free). */
CORDON_API int cordon_snapshot_list(struct cordon_cas *cas, char ***ids, struct cordon_error **err);
/* The snapshot id `given` names, malloc'd in *id: a whole id (64 lowercase hex digits) as it
 * is, or a unique prefix of at least 8 hex digits of a snapshot the store keeps. An unknown
 * one fails with CORDON_ERR_NOT_FOUND, an ambiguous one with CORDON_ERR_USAGE (naming the
 * candidates), anything else that is not hex with CORDON_ERR_USAGE. */
CORDON_API int cordon_snapshot_resolve_id(struct cordon_cas *cas, const char *given, char **id,
                                          struct cordon_error **err);
/* Drop a snapshot's ref so gc may reclaim it; an unknown id is not an error. */
CORDON_API int cordon_snapshot_forget(struct cordon_cas *cas, const char *id,
                                      struct cordon_error **err);

/* ---- forks on overlayfs (the ns backend) -------------------------------------------------- */

/* Materialise snapshot id once as the read-only base <bases_dir>/<id>, shared by every session
 * forked from it (an overlayfs lower layer). Idempotent and atomic: concurrent callers agree on
 * one complete directory. *path (malloc'd, may be NULL) receives the base's path. */
CORDON_API int cordon_snapshot_materialize_base(struct cordon_cas *cas, const char *id,
                                                const char *bases_dir, char **path,
                                                struct cordon_error **err);

/* Note that snapshot id was taken of an overlay over the base parent_id (a terminal snapshot):
 * when id is materialised later in the same bases_dir, the files it shares with parent_id's
 * base are hard-linked from it rather than copied (a race's judges start from the candidates'
 * terminal snapshots). A hint only: a missing or stale note costs a full restore. */
CORDON_API int cordon_snapshot_note_parent(const char *bases_dir, const char *id,
                                           const char *parent_id, struct cordon_error **err);

/* Terminal snapshot of an overlay mount whose lower layer is snapshot base_id and whose upper
 * layer is upper_dir: the base's manifest is reused and only the upper layer is walked.
 * Whiteouts (character devices 0/0, or files with an overlay whiteout xattr) delete, opaque
 * directories (overlay.opaque = "y") hide the base's contents, everything else in the upper
 * layer replaces or adds. Redirected directories and metacopy-only files are refused. Xattr
 * markers count only in the namespace options->overlay_xattrs names (none when options is
 * NULL); markers of any other namespace are ignored. */
CORDON_API int cordon_snapshot_take_overlay(struct cordon_cas *cas, const char *base_id,
                                            const char *upper_dir,
                                            const struct cordon_snapshot_options *options,
                                            char id[CORDON_DIGEST_HEX_SIZE],
                                            struct cordon_snapshot_stats *stats,
                                            struct cordon_error **err);

#ifdef __cplusplus
}
#endif
#endif
