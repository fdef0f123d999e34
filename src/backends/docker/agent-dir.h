/* The host's side of the exec agent's directory and socket (agent-dir.c): made and waited on
 * by session start, connected to by every exec through the agent. Calls nothing else of the
 * backend. */
#ifndef CORDON_BACKENDS_DOCKER_AGENT_DIR_H
#define CORDON_BACKENDS_DOCKER_AGENT_DIR_H

#include <sys/types.h>

#include <cordon/session.h>

/* Make the agent's directory in the session's runtime directory, owned by uid:gid (*out: its
 * real path, for the engine's bind mount). */
int docker_make_agent_dir(struct cordon_session *s, uid_t uid, gid_t gid, char **out,
                          struct cordon_error **err);
/* Wait until the started container's init serves the agent; *agent_pid: the pid serving it. */
int docker_agent_wait_ready(struct cordon_session *s, const char *container, long *agent_pid,
                            struct cordon_error **err);
/* Connect to the agent's socket without following anything planted in its directory. Returns
 * the connected fd, or -1 with *errnum set; *peer_pid: the pid that made the listening socket
 * (0 when not visible). */
int docker_agent_connect(const struct cordon_session *s, int *errnum, long *peer_pid);

#endif
