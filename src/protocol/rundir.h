/* A session's private runtime directory: where what must never be in a project tree lives
 * (the ns holder's control socket and its secret, the docker exec agent's socket directory, the
 * session's --env values). It sits in cordon's runtime directory (base/private-dirs.h), which no
 * sandbox ever sees, made 0700 and owned by the caller (refused otherwise, naming it):
 *
 *   <runtime>/<name>/          one per session, made with mkdir (fails if it exists), 0700
 *   <runtime>/<name>/owner     "<project state dir>\n<session id>\n": what `cordon gc` reads
 *
 * <name> is the first 32 hex digits of SHA-256(<project state dir> NUL <session id>), so two
 * projects never collide and the location is recomputed from the session's identity: a path
 * recorded in a state file is never trusted. */
#ifndef CORDON_BACKEND_RUNDIR_H
#define CORDON_BACKEND_RUNDIR_H

#include <stdbool.h>
#include <stddef.h>

#include <cordon/error.h>

#define RUNDIR_NAME_LEN 32

/* Pure: the subdirectory name of a session (out holds RUNDIR_NAME_LEN + 1 bytes). */
int rundir_name(const char *project_state_dir, const char *session_id,
                char out[RUNDIR_NAME_LEN + 1], struct cordon_error **err);

/* The path of `file` in the session's runtime directory (file NULL: the directory itself),
 * recomputed from the session's identity, never read from its state. */
int rundir_path(const char *project_state_dir, const char *session_id, const char *file, char **out,
                struct cordon_error **err);

/* Make the session's runtime directory (the runtime directory too when missing) and return an
 * O_PATH fd of it. Refuses a runtime directory with group/other bits or another owner, and a
 * session directory that exists already. */
int rundir_create(const char *project_state_dir, const char *session_id, int *dirfd,
                  struct cordon_error **err);

/* Open an existing session runtime directory (O_PATH, no link followed), checking it is ours
 * and 0700. CORDON_ERR_NOT_FOUND when it does not exist. */
int rundir_open(const char *project_state_dir, const char *session_id, int *dirfd,
                struct cordon_error **err);

/* Remove the session's runtime directory and everything in it. Missing is fine. */
int rundir_remove(const char *project_state_dir, const char *session_id, struct cordon_error **err);

/* Write `length` bytes as a new file (O_EXCL, 0600) in the session runtime directory. */
int rundir_write_private(int dirfd, const char *name, const void *data, size_t length,
                         struct cordon_error **err);
/* Read a private file written so: no link followed, owned by us, no group/other bits, at most
 * max bytes. CORDON_ERR_NOT_FOUND when missing. */
int rundir_read_private(int dirfd, const char *name, size_t max, unsigned char **data,
                        size_t *length, struct cordon_error **err);

/* `cordon gc`: remove the session runtime directories of this user whose session directory
 * (<project state dir>/sessions/<id>, from its owner file) is gone. *gone (NULL-terminated,
 * strv) gets those session directories' paths. */
int rundir_gc(bool dry_run, char ***gone, struct cordon_error **err);

#endif
