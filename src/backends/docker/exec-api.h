/* Execs through the engine's exec API (exec-api.c). Called by the backend table's exec;
 * calls container.c, config.c, stream.c and the engine client. */
#ifndef CORDON_BACKENDS_DOCKER_EXEC_API_H
#define CORDON_BACKENDS_DOCKER_EXEC_API_H

#include <cordon/backend.h>
#include <cordon/session.h>

#include "backends/docker/internal.h"

int docker_exec_api(struct cordon_session *s, struct docker_session *d,
                    const struct cordon_exec_request *req, struct cordon_exec_result *res,
                    struct cordon_error **err);

#endif
