/* What the files of the docker backend share and nothing else sees: the per-session handle,
 * cleanup helpers for the engine client and JSON values, and the functions one file calls in
 * another. docker.c ties them into the backend table; session.c owns the container's life
 * (create, attach, destroy and the records that name the container); workspace.c the host
 * workspace and snapshots; exec-agent.c and exec-api.c the two exec paths; gc.c `cordon gc`. */
#ifndef CORDON_BACKENDS_DOCKER_INTERNAL_H
#define CORDON_BACKENDS_DOCKER_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

#include <cordon/backend.h>
#include <cordon/session.h>

#include "backends/docker/engine.h"
#include "base/cleanup.h"

struct docker_session {
  struct docker_engine *engine;
  char *container;
  bool agent;     /* the container serves the exec agent (made by a cordon that has one) */
  long agent_pid; /* init's pid as SO_PEERCRED showed it at create; 0: unknown */
};

static inline void docker_cleanup_engine(struct docker_engine **e) {
  docker_engine_free(*e);
}
static inline void docker_cleanup_json(json_t **j) {
  json_decref(*j);
}
#define _cleanup_engine_ _cleanup_(docker_cleanup_engine)
#define _cleanup_json_ _cleanup_(docker_cleanup_json)

/* ---- docker.c: configuration from the environment, the exec entry ------------------------ */

/* The image a manifest that names none gets: $CORDON_DOCKER_IMAGE, else DOCKER_DEFAULT_IMAGE. */
const char *docker_default_image(void);
/* Refuse an image reference holding anything that could change the request's URL. */
int docker_check_image_name(const char *image, struct cordon_error **err);
/* The absolute path of the cordon-docker-init binary to bind-mount, or an error saying where
 * it was looked for. */
int docker_init_binary(const char **out, struct cordon_error **err);
/* The working directory inside the container for a request's cwd (*out malloc'd). */
int docker_container_cwd(struct cordon_session *s, const char *cwd, char **out,
                         struct cordon_error **err);

/* ---- session.c: the container's life ----------------------------------------------------- */

int docker_create(struct cordon_session *s, const struct cordon_manifest *m,
                  struct cordon_error **err);
int docker_resume(struct cordon_session *s, const struct cordon_manifest *m,
                  const char *snapshot_id, struct cordon_error **err);
int docker_attach(struct cordon_session *s, struct cordon_error **err);
void docker_release(struct cordon_session *s);
int docker_destroy(struct cordon_session *s, struct cordon_error **err);
int docker_shutdown(struct cordon_session *s, struct cordon_error **err);
/* The session's handle, attaching from the persisted state when nothing did yet. */
int docker_session_handle(struct cordon_session *s, struct docker_session **out,
                          struct cordon_error **err);
/* The engine's record of the session's container: *status 200 with *info, or 404. */
int docker_inspect_container(struct docker_session *d, long *status, json_t **info,
                             struct cordon_error **err);
/* "BOOTID:PID:STARTTIME" of a running process (malloc'd), or NULL when it does not run. */
char *docker_creator_identity(pid_t pid);

/* ---- workspace.c: the host workspace and snapshots --------------------------------------- */

/* The session's workspace (s->workspace): the manifest's directory, or a fresh one in the
 * session's state directory, empty or restored from snapshot_id. *owned: cordon made it. */
int docker_prepare_workspace(struct cordon_session *s, const struct cordon_manifest *m,
                             const char *snapshot_id, const char *const *private_dirs, bool *owned,
                             struct cordon_error **err);
/* Give a workspace cordon restored to the sandbox's unprivileged user, all of it. */
int docker_give_workspace(const char *dir, struct cordon_error **err);
int docker_snapshot(struct cordon_session *s, char **snapshot_id, struct cordon_error **err);
int docker_read(struct cordon_session *s, const char *path, unsigned char **data, size_t *length,
                struct cordon_error **err);
int docker_write(struct cordon_session *s, const char *path, const void *data, size_t length,
                 unsigned mode, struct cordon_error **err);
int docker_ls(struct cordon_session *s, const char *path, struct cordon_dirent **entries,
              size_t *count, struct cordon_error **err);

/* ---- exec-agent.c: execs through the agent init serves ----------------------------------- */

/* Make the agent's directory in the session's runtime directory, owned by uid:gid (*out: its
 * real path, for the engine's bind mount). */
int docker_make_agent_dir(struct cordon_session *s, uid_t uid, gid_t gid, char **out,
                          struct cordon_error **err);
/* Wait until the started container's init serves the agent; *agent_pid: the pid serving it. */
int docker_agent_wait_ready(struct cordon_session *s, const char *container, long *agent_pid,
                            struct cordon_error **err);
int docker_exec_agent(struct cordon_session *s, struct docker_session *d,
                      const struct cordon_exec_request *req, struct cordon_exec_result *res,
                      struct cordon_error **err);

/* ---- exec-api.c: execs through the engine's exec API ------------------------------------- */

int docker_exec_api(struct cordon_session *s, struct docker_session *d,
                    const struct cordon_exec_request *req, struct cordon_exec_result *res,
                    struct cordon_error **err);
/* After an exec ended without its status: an error saying the container stopped or was
 * removed (returns -1), or 0 when it still runs. known_dead: the engine already refused an
 * exec because it is not running, so wait for its record to say so. */
int docker_container_gone_error(struct cordon_session *s, struct docker_session *d, bool known_dead,
                                struct cordon_error **err);

#endif
