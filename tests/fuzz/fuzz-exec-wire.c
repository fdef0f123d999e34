/* libFuzzer target for the exec request wire format (src/exec/wire.c), under both protocols
 * that use it (the ns holder's, backends/ns/proto.c; the docker exec agent's,
 * backends/docker/agent.c):
 *   - the host's reply parser, which reads bytes from inside an untrusted sandbox: any input
 *     gives either a reply whose every field is in range for that protocol, or a one-line
 *     error and a zeroed reply;
 *   - the helper's request decoder, which reads bytes from whoever connects to its socket
 *     (in a docker container, the workload can): any input gives either pointers that stay
 *     inside the payload and terminate within it, or an error;
 *   - the ns holder's handshake messages (hello, challenge), which each end reads from the
 *     other before it knows who that is: accepted only at their exact size and magic.
 * The same bytes feed all. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backends/docker/agent.h"
#include "backends/ns/proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_reply(const struct exec_wire_protocol *p, const uint8_t *data, size_t size) {
  struct exec_wire_reply r;
  struct cordon_error *err = NULL;
  if (exec_wire_reply_parse(p, data, size, &r, &err) < 0) {
    if (!err || !err->message || strchr(err->message, '\n') || r.type != 0 || r.magic != 0)
      abort();
    cordon_error_free(err);
    return;
  }
  if (err || size != sizeof(r) || r.magic != p->reply_magic || r.type == 0 || r.type > 0x7f ||
      !strchr(p->reply_types, (int)r.type))
    abort();
  switch (r.type) {
  case EXEC_WIRE_RUNNING:
  case EXEC_WIRE_TIMED_OUT:
    if (r.a || r.b)
      abort();
    break;
  case EXEC_WIRE_FAILED:
    if (r.a < 1 || r.a > p->last_stage || r.b < 0 || r.b > EXEC_WIRE_MAX_ERRNO)
      abort();
    break;
  case EXEC_WIRE_EXITED:
    if (r.a < 0 || r.a > 255 || r.b < 0 || r.b > 64 || (r.b && r.a != 128 + r.b))
      abort();
    break;
  default: abort();
  }
}

static void check_request(const struct exec_wire_protocol *p, const uint8_t *data, size_t size) {
  struct exec_wire_header h;
  if (size < sizeof(h))
    return;
  memcpy(&h, data, sizeof(h));
  struct cordon_error *err = NULL;
  if (exec_wire_check_header(p, &h, &err) < 0) {
    cordon_error_free(err);
    return;
  }
  /* The helper reads exactly h.length bytes: give the decoder a buffer of that size. */
  size_t have = size - sizeof(h);
  if (have < h.length)
    return;
  unsigned char *payload = malloc(h.length);
  if (!payload)
    return;
  memcpy(payload, data + sizeof(h), h.length);
  struct exec_wire_request r;
  if (exec_wire_decode(p, &h, payload, &r, &err) < 0) {
    if (!err || r.cwd || r.argv || r.envp)
      abort();
    cordon_error_free(err);
  } else {
    const char *end = (const char *)payload + h.length;
    if (r.cwd[0] != '/' || !r.argv[0] || !r.argv[0][0] || r.timeout_ms != h.timeout_ms)
      abort();
    for (size_t i = 0; r.argv[i]; i++)
      if (r.argv[i] < (const char *)payload || r.argv[i] + strlen(r.argv[i]) >= end)
        abort();
    for (size_t i = 0; r.envp[i]; i++)
      if (r.envp[i] < (const char *)payload || r.envp[i] + strlen(r.envp[i]) >= end)
        abort();
    exec_wire_request_clear(&r);
  }
  free(payload);
}

static void check_handshake(const uint8_t *data, size_t size) {
  uint8_t nonce[NS_AUTH_NONCE_LEN], proof[NS_AUTH_PROOF_LEN];
  struct cordon_error *err = NULL;
  int r = ns_auth_parse_hello(data, size, nonce, &err);
  if ((r == 0) != (size == NS_AUTH_HELLO_LEN && !memcmp(data, &(uint32_t){NS_AUTH_HELLO_MAGIC}, 4)))
    abort();
  if (r < 0 && (!err || strchr(err->message, '\n')))
    abort();
  cordon_error_free(err);
  err = NULL;
  r = ns_auth_parse_challenge(data, size, nonce, proof, &err);
  if ((r == 0) !=
      (size == NS_AUTH_CHALLENGE_LEN && !memcmp(data, &(uint32_t){NS_AUTH_CHALLENGE_MAGIC}, 4)))
    abort();
  if (r < 0 && (!err || strchr(err->message, '\n')))
    abort();
  cordon_error_free(err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  check_handshake(data, size);
  const struct exec_wire_protocol *protocols[] = {&docker_agent_protocol, &ns_protocol};
  for (size_t i = 0; i < sizeof(protocols) / sizeof(protocols[0]); i++) {
    check_reply(protocols[i], data, size);
    check_request(protocols[i], data, size);
  }
  return 0;
}
