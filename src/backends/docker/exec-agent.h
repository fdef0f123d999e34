/* Execs through the agent init serves (exec-agent.c). Called by the backend table's exec;
 * calls agent-dir.c, container.c and the shared runner. */
#ifndef CORDON_BACKENDS_DOCKER_EXEC_AGENT_H
#define CORDON_BACKENDS_DOCKER_EXEC_AGENT_H

#include <cordon/backend.h>
#include <cordon/session.h>

#include "backends/docker/internal.h"

int docker_exec_agent(struct cordon_session *s, struct docker_session *d,
                      const struct cordon_exec_request *req, struct cordon_exec_result *res,
                      struct cordon_error **err);

#endif
