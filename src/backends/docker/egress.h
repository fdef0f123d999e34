/* Egress class `restricted` on docker, the host side (egress.c): the proxy's daemon
 * (net/daemon.h) with its socket in the session's agent directory, which the engine
 * bind-mounts into the container, and the container's init as the measure of its life. Inside,
 * init runs the bridge (`cordon-docker-init bridge`) on 127.0.0.1:NET_BRIDGE_PORT of the
 * container's own network namespace (NetworkMode none). */
#ifndef CORDON_BACKENDS_DOCKER_EGRESS_H
#define CORDON_BACKENDS_DOCKER_EGRESS_H

#include <sys/types.h>

#include <cordon/session.h>

/* Before the container: for egress restricted, start the daemon with its socket in agent_dir
 * (owned by uid:gid, the container's user, who runs the bridge); *handoff gets the fd to pass
 * to docker_egress_bind. Other classes: *handoff = -1, and rules are refused (they need
 * restricted). */
int docker_egress_start(struct cordon_session *s, const struct cordon_manifest *m,
                        const char *agent_dir, uid_t uid, gid_t gid, int *handoff,
                        struct cordon_error **err);

/* After init serves the agent (agent_pid, as we see it): bind the daemon's life to init's. A
 * no-op for handoff -1. */
int docker_egress_bind(int handoff, long agent_pid, struct cordon_error **err);

#endif
