/* The exec agent's protocol (see agent.h): 'T' when its own copy of the timeout fired, and
 * stage 3 when the engine applied no seccomp profile. Fields in the order of
 * exec_wire_protocol; the tests check the magics' bytes. */
#include "backends/docker/agent.h"

const struct exec_wire_protocol docker_agent_protocol = {
    DOCKER_AGENT_REQUEST_MAGIC, DOCKER_AGENT_REPLY_MAGIC, "RFXTE", EXEC_WIRE_STAGE_NO_SECCOMP,
    "the exec agent"};
