/* What the host side of the docker backend and cordon-docker-init (init.c, inside the
 * container) agree on. Kept free of includes: init.c is built static and alone. */
#ifndef CORDON_BACKENDS_DOCKER_PROTOCOL_H
#define CORDON_BACKENDS_DOCKER_PROTOCOL_H

/* Where the init binary is bind-mounted (read-only) in every session container. */
#define DOCKER_INIT_TARGET "/.cordon-init"

/* The exec wrapper's status trailer, the last bytes it writes to stderr:
 * MAGIC KIND ":" DECIMAL "\n". The NUL keeps it out of the way of text a command prints. */
#define DOCKER_TRAILER_MAGIC "\0cordon-exec-status:"
/* Longest trailer: magic (20) + "timeout:" + 10 digits + newline, rounded up. */
#define DOCKER_TRAILER_MAX 64

#endif
