/* The host workspace and snapshots (workspace.c): prepare it at create and resume, give a
 * restored one to the sandbox's user, snapshot, read, write and ls beneath it. Called by the
 * backend table and by session.c; calls no other file of the backend. */
#ifndef CORDON_BACKENDS_DOCKER_WORKSPACE_H
#define CORDON_BACKENDS_DOCKER_WORKSPACE_H

#include <stdbool.h>
#include <stddef.h>

#include <cordon/backend.h>
#include <cordon/session.h>

/* The session's workspace (s->workspace): the manifest's directory, or a fresh one in the
 * session's state directory, empty or restored from snapshot_id. *owned: cordon made it. */
int docker_prepare_workspace(struct cordon_session *s, const struct cordon_manifest *m,
                             const char *snapshot_id, const char *const *private_dirs, bool *owned,
                             struct cordon_error **err);
/* Give a workspace cordon made (created or restored) to the sandbox user (uid/gid 1000, as on
 * ns), all of it. */
int docker_give_workspace(const char *dir, struct cordon_error **err);
int docker_snapshot(struct cordon_session *s, char **snapshot_id, struct cordon_error **err);
int docker_read(struct cordon_session *s, const char *path, unsigned char **data, size_t *length,
                struct cordon_error **err);
int docker_write(struct cordon_session *s, const char *path, const void *data, size_t length,
                 unsigned mode, struct cordon_error **err);
int docker_ls(struct cordon_session *s, const char *path, struct cordon_dirent **entries,
              size_t *count, struct cordon_error **err);

#endif
