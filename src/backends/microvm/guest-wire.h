/* The framing of the microvm guest agent's serial line. A virtio-serial port is one byte stream
 * and carries no fds, so the exec wire (exec/wire.h: request encoding, 16-byte replies) travels
 * inside frames, and the command's stdin, stdout and stderr travel as frames too:
 *
 *   header (16 bytes: magic, type, exec id, payload length), then the payload
 *
 *   host  -> guest  PING (readiness), REQUEST (an exec wire request: header + payload),
 *                   STDIN (data), STDIN_EOF, KILL
 *   guest -> host   PONG, STDOUT, STDERR (data), REPLY (one exec wire reply: 16 bytes)
 *
 * The exec id ties frames to one exec: a frame left over from an earlier connection is told
 * from the current one's. Both ends parse what arrives as hostile (the guest is the sandbox;
 * the guest agent parses whatever reaches its port): every length is bounded by its type
 * before anything is allocated. Pure: compiled into cordon-guest and libcordon. The guest is
 * built from the same tree for the same machine, so integers travel in native byte order. */
#ifndef CORDON_BACKENDS_MICROVM_GUEST_WIRE_H
#define CORDON_BACKENDS_MICROVM_GUEST_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include <cordon/error.h>

#include "exec/wire.h"

#define GUEST_WIRE_FRAME_MAGIC 0x4d46434fu /* "OCFM" */
#define GUEST_WIRE_REQUEST_MAGIC 0x5147434fu
#define GUEST_WIRE_REPLY_MAGIC 0x5247434fu
/* Data frames: large enough to keep a serial line busy, small enough to bound a buffer. */
#define GUEST_WIRE_MAX_DATA (64u << 10)
#define GUEST_WIRE_MAX_REQUEST (EXEC_WIRE_MAX_PAYLOAD + sizeof(struct exec_wire_header))
/* The name of the virtio-serial port the agent serves (qemu: virtserialport,name=...). */
#define GUEST_WIRE_PORT_NAME "org.cordon.agent"

enum guest_wire_type {
  GUEST_WIRE_PING = 'P',
  GUEST_WIRE_PONG = 'p',
  GUEST_WIRE_REQUEST = 'Q',
  GUEST_WIRE_STDIN = 'I',
  GUEST_WIRE_STDIN_EOF = 'i',
  GUEST_WIRE_KILL = 'K',
  GUEST_WIRE_STDOUT = 'O',
  GUEST_WIRE_STDERR = 'E',
  GUEST_WIRE_REPLY = 'R',
};

struct guest_wire_header {
  uint32_t magic;
  uint32_t type;
  uint32_t exec_id;
  uint32_t length;
};
_Static_assert(sizeof(struct guest_wire_header) == 16, "the frame header is 16 bytes");

/* The exec wire protocol inside REQUEST and REPLY frames: the agent sends 'E' when it could not
 * execve the command and 'T' when the command's timeout fired. */
extern const struct exec_wire_protocol guest_wire_exec_protocol;

/* Which end parses: each accepts only the types the other end sends. */
enum guest_wire_direction {
  GUEST_WIRE_TO_GUEST,
  GUEST_WIRE_TO_HOST,
};

/* The largest payload a frame of this type may carry (0 for frames without one); 0 also for a
 * type that does not exist. */
size_t guest_wire_max_length(uint32_t type);

/* Encode a header into out[16]. */
void guest_wire_header_encode(enum guest_wire_type type, uint32_t exec_id, uint32_t length,
                              unsigned char out[sizeof(struct guest_wire_header)]);

/* Parse the first bytes of a stream: 1 with *h filled when a whole frame (header and payload)
 * is in bytes[0..length) (the payload is bytes + 16, h->length long), 0 when more bytes are
 * needed, -1 (err set) when the bytes cannot start a valid frame for this direction: bad magic,
 * a type the other end does not send, or a length over its type's bound. */
int guest_wire_parse(enum guest_wire_direction dir, const unsigned char *bytes, size_t length,
                     struct guest_wire_header *h, struct cordon_error **err);

#endif
