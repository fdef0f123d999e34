/* Workspace files on the host: read, write and ls anchored at the workspace directory fd,
 * refusing any path that leaves it (.., absolute paths, symlinks pointing out, including a
 * symlink swapped in after a check: every open resolves beneath the anchor). Shared by every
 * backend whose workspace is a host directory (worktree, ns, docker bind mounts). */
#ifndef CORDON_BACKEND_WORKSPACE_H
#define CORDON_BACKEND_WORKSPACE_H

#include <stddef.h>

#include <cordon/backend.h>

/* Largest file `read` returns. */
#define WORKSPACE_READ_MAX ((size_t)1 << 30)

/* path is normalised and workspace-relative ("" is the root). */
int workspace_read(const char *workspace, const char *path, unsigned char **data, size_t *length,
                   struct cordon_error **err);
/* Creates parent directories; replaces the file atomically; mode 0 means 0644. */
int workspace_write(const char *workspace, const char *path, const void *data, size_t length,
                    unsigned mode, struct cordon_error **err);
/* Entries sorted by name (bytewise), without "." and "..". */
int workspace_ls(const char *workspace, const char *path, struct cordon_dirent **entries,
                 size_t *count, struct cordon_error **err);
/* Snapshot the session's host workspace into the project's store (symlinks made inside the
 * sandbox point at s->root, so that is the root alias); exclude may be NULL. *snapshot_id is
 * malloc'd. */
int workspace_snapshot(struct cordon_session *s, const char *const *exclude, char **snapshot_id,
                       struct cordon_error **err);
/* Restore a snapshot of the project's store into dir (which must not exist yet). */
int workspace_restore(struct cordon_session *s, const char *snapshot_id, const char *dir,
                      struct cordon_error **err);

/* Write the manifest's files into the workspace. */
int workspace_write_manifest_files(const char *workspace, const struct cordon_manifest *m,
                                   struct cordon_error **err);

#endif
