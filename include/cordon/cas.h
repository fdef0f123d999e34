/* cordon — the content-addressed store (CAS).
 *
 * Blobs live at <store>/<2 hex>/<64 hex>, named by the lowercase hex SHA-256 of their bytes,
 * with an optional sidecar <64 hex>.meta.json (size, content type, metadata). A project's store
 * is <project>/.cordon/cas. Writes are atomic (temp file in <store>/tmp, fsync, rename, fsync
 * of the directory) and idempotent; reads walk the store one component at a time from the
 * store root's fd without following symlinks, open blobs non-blocking, require a regular file
 * and re-hash: a symlink or FIFO planted at a shard or blob is refused as unreadable (never
 * "absent", never a hang), and a digest mismatch is an integrity error naming both digests.
 * docs/formats.md describes the layout. */
#ifndef CORDON_CAS_H
#define CORDON_CAS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cordon/error.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 64 lowercase hex digits and a NUL. */
#define CORDON_DIGEST_HEX_SIZE 65

struct cordon_cas;
struct cordon_context;

/* Progress of long operations. update is called from one thread at a time, at most a few
 * times a second; total is 0 while unknown. phase is a short word ("hash", "restore"). */
struct cordon_progress {
  void (*update)(void *data, const char *phase, uint64_t done, uint64_t total);
  void *data;
};

/* Open (creating it, mode 0700, when missing) the store at dir. dir itself may be a symlink:
 * that is the operator's configuration; nothing beneath it is followed. */
CORDON_API int cordon_cas_open(const char *dir, struct cordon_cas **out, struct cordon_error **err);
/* The project's store: <project>/.cordon/cas. */
CORDON_API int cordon_cas_open_project(struct cordon_context *ctx, struct cordon_cas **out,
                                       struct cordon_error **err);
CORDON_API void cordon_cas_close(struct cordon_cas *cas);
CORDON_API const char *cordon_cas_dir(const struct cordon_cas *cas);

/* True when s is exactly 64 lowercase hex digits. */
CORDON_API bool cordon_digest_valid(const char *s);

/* Store bytes (or everything readable from fd); digest receives the blob's name. A sidecar is
 * written when content_type or metadata_json (a JSON object as text) is given. Idempotent: an
 * existing intact blob is not rewritten. */
CORDON_API int cordon_cas_put(struct cordon_cas *cas, const void *data, size_t length,
                              const char *content_type, const char *metadata_json,
                              char digest[CORDON_DIGEST_HEX_SIZE], struct cordon_error **err);
CORDON_API int cordon_cas_put_fd(struct cordon_cas *cas, int fd, const char *content_type,
                                 const char *metadata_json, char digest[CORDON_DIGEST_HEX_SIZE],
                                 struct cordon_error **err);

/* 1 present, 0 absent, < 0 on error (a symlink or non-regular file is an error, not absent). */
CORDON_API int cordon_cas_has(struct cordon_cas *cas, const char *digest,
                              struct cordon_error **err);

/* Read a blob into memory, verified; more than max bytes is refused (E2BIG). */
CORDON_API int cordon_cas_get(struct cordon_cas *cas, const char *digest, size_t max,
                              unsigned char **data, size_t *length, struct cordon_error **err);
/* Write a blob to fd. The bytes are verified before the first one is written (they are staged
 * in an anonymous memory file), so a corrupt blob writes nothing. */
CORDON_API int cordon_cas_get_to_fd(struct cordon_cas *cas, const char *digest, int fd,
                                    struct cordon_error **err);

struct cordon_blob_info {
  uint64_t size;
  char *location;  /* where it is stored, relative to the store: "ab/<digest>" for a blob of its
                      own, "packs/<id>.pack" for one in a pack */
  uint64_t offset; /* where its bytes start in that file (0 for a blob of its own) */
  bool has_sidecar;
  char *content_type; /* NULL without a sidecar */
  char *metadata;     /* compact JSON object text, NULL when none */
};
/* Size, location and sidecar of a blob (not re-hashed). */
CORDON_API int cordon_cas_info(struct cordon_cas *cas, const char *digest,
                               struct cordon_blob_info *info, struct cordon_error **err);
CORDON_API void cordon_blob_info_clear(struct cordon_blob_info *info);

struct cordon_cas_problem {
  char *object;  /* a digest, or a path relative to the store */
  char *message; /* one line */
};

struct cordon_cas_verify_report {
  uint64_t blobs; /* stored copies re-hashed: blobs of their own and blobs in packs */
  uint64_t packs;
  uint64_t bytes;
  uint64_t sidecars;
  uint64_t temporaries; /* leftovers of interrupted writes in <store>/tmp (harmless; gc removes) */
  struct cordon_cas_problem *problems;
  size_t n_problems;
};

/* Re-hash every blob and check every sidecar. Problems are collected in the report; the call
 * fails only when the store cannot be read at all. */
CORDON_API int cordon_cas_verify(struct cordon_cas *cas, const struct cordon_progress *progress,
                                 struct cordon_cas_verify_report *report,
                                 struct cordon_error **err);
CORDON_API void cordon_cas_verify_report_clear(struct cordon_cas_verify_report *report);

struct cordon_cas_gc_report {
  uint64_t roots;   /* snapshot refs and digests named by sessions and receipts */
  uint64_t kept;    /* blobs kept */
  uint64_t removed; /* blobs removed (or that would be, with dry_run) */
  uint64_t removed_bytes;
  char **removed_digests; /* NULL-terminated */
};

/* Remove every blob that no snapshot ref (<store>/refs), session state or receipt of the
 * project references, directly or through a snapshot manifest. Waits for writers to finish
 * and holds them off while it runs. With dry_run nothing is removed. */
CORDON_API int cordon_cas_gc(struct cordon_context *ctx, struct cordon_cas *cas, bool dry_run,
                             struct cordon_cas_gc_report *report, struct cordon_error **err);
CORDON_API void cordon_cas_gc_report_clear(struct cordon_cas_gc_report *report);

#ifdef __cplusplus
}
#endif
#endif
