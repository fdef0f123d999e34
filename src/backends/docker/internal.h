/* What the files of the docker backend share and nothing else sees: the per-session handle
 * and cleanup helpers for the engine client and JSON values. Each file's functions are
 * declared in its own header (session.h, workspace.h, exec-agent.h, exec-api.h, container.h,
 * agent-dir.h, settings.h). The calls run one way, down: docker.c (the backend table) ->
 * session.c (which also calls workspace.c), workspace.c, exec-agent.c, exec-api.c, gc.c ->
 * container.c, agent-dir.c, settings.c, config.c -> engine.c, stream.c. */
#ifndef CORDON_BACKENDS_DOCKER_INTERNAL_H
#define CORDON_BACKENDS_DOCKER_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>

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

#endif
