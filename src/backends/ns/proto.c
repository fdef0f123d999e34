/* The ns holder's exec protocol (see proto.h): no 'T' (the holder keeps no time of its own)
 * and no engine to lack a seccomp profile. Fields in the order of exec_wire_protocol; the
 * tests check the magics' bytes. */
#include "backends/ns/proto.h"

const struct exec_wire_protocol ns_protocol = {NS_PROTO_REQUEST_MAGIC, NS_PROTO_REPLY_MAGIC, "RFX",
                                               EXEC_WIRE_STAGE_CHDIR, "the sandbox holder"};
