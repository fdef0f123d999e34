/* libFuzzer target for the docker exec agent's wire protocol (src/backends/docker/agent.c):
 *   - the host's reply parser, which reads bytes from inside the untrusted container: any
 *     input gives either a reply whose every field is in range, or a one-line error;
 *   - the agent's request decoder, which reads bytes from whoever connects to the socket
 *     (the workload can): any input gives either pointers that stay inside the payload and
 *     terminate within it, or an error. The same bytes feed both. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backends/docker/agent.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_reply(const uint8_t *data, size_t size) {
  struct docker_agent_reply r;
  struct cordon_error *err = NULL;
  if (docker_agent_reply_parse(data, size, &r, &err) < 0) {
    if (!err || !err->message || strchr(err->message, '\n') || r.type != 0)
      abort();
    cordon_error_free(err);
    return;
  }
  if (size != sizeof(r) || r.magic != DOCKER_AGENT_REPLY_MAGIC)
    abort();
  switch (r.type) {
  case DOCKER_AGENT_RUNNING:
  case DOCKER_AGENT_TIMED_OUT:
    if (r.a || r.b)
      abort();
    break;
  case DOCKER_AGENT_FAILED:
    if (r.a < 1 || r.a > 3 || r.b < 0 || r.b > DOCKER_AGENT_MAX_ERRNO)
      abort();
    break;
  case DOCKER_AGENT_EXITED:
    if (r.a < 0 || r.a > 255 || r.b < 0 || r.b > 64 || (r.b && r.a != 128 + r.b))
      abort();
    break;
  default: abort();
  }
}

static void check_request(const uint8_t *data, size_t size) {
  struct docker_agent_request_header h;
  if (size < sizeof(h))
    return;
  memcpy(&h, data, sizeof(h));
  struct cordon_error *err = NULL;
  if (docker_agent_request_check_header(&h, &err) < 0) {
    cordon_error_free(err);
    return;
  }
  /* The agent reads exactly h.length bytes: give the decoder a buffer of that size. */
  size_t have = size - sizeof(h);
  if (have < h.length)
    return;
  unsigned char *payload = malloc(h.length);
  if (!payload)
    return;
  memcpy(payload, data + sizeof(h), h.length);
  struct docker_agent_request r;
  if (docker_agent_request_decode(&h, payload, &r, &err) < 0) {
    cordon_error_free(err);
  } else {
    const char *end = (const char *)payload + h.length;
    if (r.cwd[0] != '/' || !r.argv[0] || !r.argv[0][0])
      abort();
    for (size_t i = 0; r.argv[i]; i++)
      if (r.argv[i] < (const char *)payload || r.argv[i] + strlen(r.argv[i]) >= end)
        abort();
    for (size_t i = 0; r.envp[i]; i++)
      if (r.envp[i] < (const char *)payload || r.envp[i] + strlen(r.envp[i]) >= end)
        abort();
    docker_agent_request_clear(&r);
  }
  free(payload);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  check_reply(data, size);
  check_request(data, size);
  return 0;
}
