/* The guest agent's frame codec (see guest-wire.h): bounds per type and the stream parser. */
#include <stdbool.h>
#include <string.h>

#include "backends/microvm/guest-wire.h"

const struct exec_wire_protocol guest_wire_exec_protocol = {
    GUEST_WIRE_REQUEST_MAGIC, GUEST_WIRE_REPLY_MAGIC, "FXTE", EXEC_WIRE_STAGE_LOST,
    "the guest agent"};

size_t guest_wire_max_length(uint32_t type) {
  switch (type) {
  case GUEST_WIRE_REQUEST: return GUEST_WIRE_MAX_REQUEST;
  case GUEST_WIRE_STDIN:
  case GUEST_WIRE_STDOUT:
  case GUEST_WIRE_STDERR: return GUEST_WIRE_MAX_DATA;
  case GUEST_WIRE_REPLY: return sizeof(struct exec_wire_reply);
  default: return 0;
  }
}

static bool type_allowed(enum guest_wire_direction dir, uint32_t type) {
  static const char to_guest[] = {GUEST_WIRE_PING, GUEST_WIRE_REQUEST, GUEST_WIRE_STDIN,
                                  GUEST_WIRE_STDIN_EOF, GUEST_WIRE_KILL};
  static const char to_host[] = {GUEST_WIRE_PONG, GUEST_WIRE_STDOUT, GUEST_WIRE_STDERR,
                                 GUEST_WIRE_REPLY};
  const char *set = dir == GUEST_WIRE_TO_GUEST ? to_guest : to_host;
  size_t n = dir == GUEST_WIRE_TO_GUEST ? sizeof(to_guest) : sizeof(to_host);
  for (size_t i = 0; i < n; i++)
    if ((uint32_t)(unsigned char)set[i] == type)
      return true;
  return false;
}

void guest_wire_header_encode(enum guest_wire_type type, uint32_t exec_id, uint32_t length,
                              unsigned char out[sizeof(struct guest_wire_header)]) {
  struct guest_wire_header h = {GUEST_WIRE_FRAME_MAGIC, (uint32_t)type, exec_id, length};
  memcpy(out, &h, sizeof(h));
}

int guest_wire_parse(enum guest_wire_direction dir, const unsigned char *bytes, size_t length,
                     struct guest_wire_header *h, struct cordon_error **err) {
  memset(h, 0, sizeof(*h));
  if (length < sizeof(*h))
    return 0;
  struct guest_wire_header got;
  memcpy(&got, bytes, sizeof(got));
  if (got.magic != GUEST_WIRE_FRAME_MAGIC)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "guest frame: bad magic 0x%08x", got.magic);
  if (!type_allowed(dir, got.type))
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "guest frame: unexpected type 0x%x",
                            got.type);
  /* REPLY is exactly one exec wire reply; the others at most their bound. */
  size_t max = guest_wire_max_length(got.type);
  if (got.length > max || (got.type == GUEST_WIRE_REPLY && got.length != max))
    return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                            "guest frame: length %u out of bounds for type '%c'", got.length,
                            (char)got.type);
  if (length - sizeof(got) < got.length)
    return 0;
  *h = got;
  return 1;
}
