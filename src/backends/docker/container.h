/* The session's container as the exec paths and the session see it (container.c): its record
 * in the engine, whether it died under an exec, a request's working directory inside it, and
 * the creator identity its label carries. Calls only the engine client. */
#ifndef CORDON_BACKENDS_DOCKER_CONTAINER_H
#define CORDON_BACKENDS_DOCKER_CONTAINER_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <cordon/session.h>

#include "backends/docker/internal.h"

/* The engine's record of the session's container: *status 200 with *info, or 404. */
int docker_inspect_container(struct docker_session *d, long *status, json_t **info,
                             struct cordon_error **err);
/* After an exec ended without its status: an error saying the container stopped or was
 * removed (returns -1), or 0 when it still runs. known_dead: the engine already refused an
 * exec because it is not running, so wait for its record to say so. */
int docker_container_gone_error(struct cordon_session *s, struct docker_session *d, bool known_dead,
                                struct cordon_error **err);
/* The working directory inside the container for a request's cwd (*out malloc'd). */
int docker_container_cwd(struct cordon_session *s, const char *cwd, char **out,
                         struct cordon_error **err);
/* How many processes the OOM killer has killed in the container's memory cgroup (v1
 * memory.oom_control or v2 memory.events, oom_kill), read from this host through the cgroup
 * of its init (agent_pid, checked to be the container's); -1 when that cannot be read here (a
 * remote or rootless engine, an unknown pid). */
int64_t docker_container_oom_kills(const struct docker_session *d);
/* "BOOTID:PID:STARTTIME" of a running process (malloc'd), or NULL when it does not run. */
char *docker_creator_identity(pid_t pid);

#endif
