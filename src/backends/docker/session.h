/* The container's life (session.c): create and resume, attach from the persisted state, the
 * handle every other operation starts from, shutdown, release and destroy. Called by the
 * backend table (docker.c); calls container.c, agent-dir.c, workspace.c, config.c, settings.c
 * and the engine client. */
#ifndef CORDON_BACKENDS_DOCKER_SESSION_H
#define CORDON_BACKENDS_DOCKER_SESSION_H

#include <cordon/backend.h>
#include <cordon/session.h>

#include "backends/docker/internal.h"

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

#endif
