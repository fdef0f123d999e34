/* The exec protocol between the docker backend (host) and the exec agent that
 * cordon-docker-init (pid 1 of every session container) serves on a unix socket: the shared
 * exec request wire format (exec/wire.h) with the agent's own magic numbers. The socket lives
 * in a host directory private to the session, bind-mounted into the container at
 * DOCKER_AGENT_TARGET. docs/formats.md has the byte layout.
 *
 *   host  -> agent  request, with the exec's timeout: the agent keeps its own copy of it
 *   agent -> host   reply 'R' (running) or 'F' (could not start: setup, chdir, or no seccomp
 *                   profile from the engine; errno)
 *   host  -> agent  optional byte 'K': kill the command's process tree now
 *   agent -> host   reply 'X' (ended: exit code, signal) or 'T' (the agent's own timeout
 *                   fired and killed the tree); then the connection closes
 *
 * A closed connection before the final reply also kills the tree: a running exec never
 * outlives its client. After the reply, what the command left in the background lives on
 * until it ends or the session does. This file is
 * also compiled into the static init. */
#ifndef CORDON_BACKENDS_DOCKER_AGENT_H
#define CORDON_BACKENDS_DOCKER_AGENT_H

#include "exec/wire.h"

#define DOCKER_AGENT_REQUEST_MAGIC 0x31414443u /* "CDA1" little-endian */
#define DOCKER_AGENT_REPLY_MAGIC 0x31524443u   /* "CDR1" little-endian */

extern const struct exec_wire_protocol docker_agent_protocol;

#endif
