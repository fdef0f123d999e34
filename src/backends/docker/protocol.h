/* What the host side of the docker backend and cordon-docker-init (init.c, inside the
 * container) agree on. Kept free of includes: init.c is built static and alone. */
#ifndef CORDON_BACKENDS_DOCKER_PROTOCOL_H
#define CORDON_BACKENDS_DOCKER_PROTOCOL_H

/* Where the init binary is bind-mounted (read-only) in every session container. */
#define DOCKER_INIT_TARGET "/.cordon-init"

/* The exec agent's directory: a host directory private to the session
 * (<state dir>/DOCKER_AGENT_DIR) bind-mounted here, where init listens on DOCKER_AGENT_SOCKET
 * (agent.h has the protocol). */
#define DOCKER_AGENT_TARGET "/.cordon-agent"
#define DOCKER_AGENT_DIR "agent"
#define DOCKER_AGENT_SOCKET "agent.sock"

/* The exec wrapper's status trailer, the last bytes it writes to stderr:
 * MAGIC KIND ":" DECIMAL "\n". The NUL keeps it out of the way of text a command prints. */
#define DOCKER_TRAILER_MAGIC "\0cordon-exec-status:"
/* Longest trailer: magic (20) + "timeout:" + 10 digits + newline, rounded up. */
#define DOCKER_TRAILER_MAX 64

#endif
