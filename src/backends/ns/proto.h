/* The ns holder's exec protocol: the shared exec request wire format (exec/wire.h) over a unix
 * stream socket in the session's state directory, with the holder's own magic numbers.
 *
 *   client -> holder  request (the timeout is 0: the client's runner keeps time and sends 'K')
 *   holder -> client  reply 'R' (running) or 'F' (could not start: setup or chdir, errno)
 *   client -> holder  optional byte 'K': kill the command's process tree now
 *   holder -> client  reply 'X' (ended: exit code, signal), then the connection closes
 *
 * A closed connection also kills the tree: an exec never outlives its client. */
#ifndef CORDON_NS_PROTO_H
#define CORDON_NS_PROTO_H

#include "exec/wire.h"

#define NS_PROTO_REQUEST_MAGIC 0x314e4443u /* "CDN1" little-endian */
#define NS_PROTO_REPLY_MAGIC 0x314e5243u   /* "CRN1" little-endian */

/* Why a command could not start: the reply 'F' carries it, and the one-shot sandbox
 * (holder.c) uses the same codes. */
enum ns_fail_stage {
  NS_STAGE_SETUP = EXEC_WIRE_STAGE_SETUP, /* the holder could not prepare the process */
  NS_STAGE_CHDIR = EXEC_WIRE_STAGE_CHDIR, /* the working directory is not usable */
};

extern const struct exec_wire_protocol ns_protocol;

#endif
