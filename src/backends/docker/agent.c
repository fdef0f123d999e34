/* The exec agent's wire protocol (see agent.h). Pure: no I/O. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "backends/docker/agent.h"

static size_t vector_length(const char *const *v) {
  size_t n = 0;
  while (v && v[n])
    n++;
  return n;
}

int docker_agent_request_encode(const char *cwd, const char *const *argv, const char *const *envp,
                                uint32_t timeout_ms, unsigned char **out, size_t *out_length,
                                struct cordon_error **err) {
  size_t argc = vector_length(argv), envc = vector_length(envp);
  if (!cwd || cwd[0] != '/' || argc == 0 || !argv[0][0])
    return cordon_error_set(err, CORDON_ERR_USAGE, EINVAL,
                            "exec request without an absolute cwd or a program");
  if (argc + envc + 1 > DOCKER_AGENT_MAX_STRINGS)
    return cordon_error_set(err, CORDON_ERR_USAGE, E2BIG, "exec request has too many strings");
  size_t payload = strlen(cwd) + 1;
  for (size_t i = 0; i < argc && payload <= DOCKER_AGENT_MAX_PAYLOAD; i++)
    payload += strlen(argv[i]) + 1;
  for (size_t i = 0; i < envc && payload <= DOCKER_AGENT_MAX_PAYLOAD; i++)
    payload += strlen(envp[i]) + 1;
  if (payload > DOCKER_AGENT_MAX_PAYLOAD)
    return cordon_error_set(err, CORDON_ERR_USAGE, E2BIG,
                            "exec request (argv and environment) is larger than %u bytes",
                            DOCKER_AGENT_MAX_PAYLOAD);
  struct docker_agent_request_header h = {
      .magic = DOCKER_AGENT_REQUEST_MAGIC,
      .length = (uint32_t)payload,
      .argc = (uint32_t)argc,
      .envc = (uint32_t)envc,
      .timeout_ms = timeout_ms,
  };
  unsigned char *buf = malloc(sizeof(h) + payload);
  if (!buf)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "exec request");
  memcpy(buf, &h, sizeof(h));
  unsigned char *p = buf + sizeof(h);
  size_t n = strlen(cwd) + 1;
  memcpy(p, cwd, n);
  p += n;
  for (size_t i = 0; i < argc; i++) {
    n = strlen(argv[i]) + 1;
    memcpy(p, argv[i], n);
    p += n;
  }
  for (size_t i = 0; i < envc; i++) {
    n = strlen(envp[i]) + 1;
    memcpy(p, envp[i], n);
    p += n;
  }
  *out = buf;
  *out_length = sizeof(h) + payload;
  return 0;
}

int docker_agent_request_check_header(const struct docker_agent_request_header *h,
                                      struct cordon_error **err) {
  if (h->magic != DOCKER_AGENT_REQUEST_MAGIC)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "exec request: bad magic");
  if (h->length == 0 || h->length > DOCKER_AGENT_MAX_PAYLOAD)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "exec request: bad length %u", h->length);
  if (h->argc == 0 || h->argc > DOCKER_AGENT_MAX_STRINGS || h->envc > DOCKER_AGENT_MAX_STRINGS ||
      (uint64_t)h->argc + h->envc + 1 > h->length)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "exec request: bad counts");
  return 0;
}

void docker_agent_request_clear(struct docker_agent_request *r) {
  free(r->argv);
  free(r->envp);
  memset(r, 0, sizeof(*r));
}

int docker_agent_request_decode(const struct docker_agent_request_header *h,
                                const unsigned char *payload, struct docker_agent_request *out,
                                struct cordon_error **err) {
  memset(out, 0, sizeof(*out));
  if (docker_agent_request_check_header(h, err) < 0)
    return -1;
  if (payload[h->length - 1] != 0)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "exec request: unterminated string");
  const char **argv = calloc((size_t)h->argc + 1, sizeof(char *));
  const char **envp = calloc((size_t)h->envc + 1, sizeof(char *));
  const char *why = NULL;
  if (!argv || !envp) {
    free(argv);
    free(envp);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "exec request");
  }
  const char *p = (const char *)payload, *end = (const char *)payload + h->length;
  size_t total = (size_t)h->argc + h->envc + 1;
  for (size_t i = 0; i < total && !why; i++) {
    if (p >= end) {
      why = "too few strings";
      break;
    }
    if (i == 0)
      out->cwd = p;
    else if (i <= h->argc)
      argv[i - 1] = p;
    else
      envp[i - 1 - h->argc] = p;
    p += strlen(p) + 1; /* the last byte is NUL, so this stays within the payload */
  }
  if (!why && p != end)
    why = "trailing bytes";
  if (!why && (out->cwd[0] != '/' || !argv[0][0]))
    why = "relative cwd or empty program";
  if (why) {
    free(argv);
    free(envp);
    out->cwd = NULL;
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "exec request: %s", why);
  }
  out->argv = argv;
  out->envp = envp;
  out->timeout_ms = h->timeout_ms;
  return 0;
}

struct docker_agent_reply docker_agent_reply_make(enum docker_agent_reply_type type, int32_t a,
                                                  int32_t b) {
  return (struct docker_agent_reply){
      .magic = DOCKER_AGENT_REPLY_MAGIC, .type = (uint32_t)type, .a = a, .b = b};
}

int docker_agent_reply_parse(const unsigned char *bytes, size_t length,
                             struct docker_agent_reply *out, struct cordon_error **err) {
  struct docker_agent_reply r;
  memset(out, 0, sizeof(*out));
  if (length != sizeof(r))
    return cordon_error_set(err, CORDON_ERR_INVALID, EPROTO,
                            "malformed reply from the exec agent: %zu bytes instead of %zu", length,
                            sizeof(r));
  memcpy(&r, bytes, sizeof(r));
  if (r.magic != DOCKER_AGENT_REPLY_MAGIC)
    return cordon_error_set(err, CORDON_ERR_INVALID, EPROTO,
                            "malformed reply from the exec agent: bad magic 0x%08x", r.magic);
  bool ok = false;
  switch (r.type) {
  case DOCKER_AGENT_RUNNING:
  case DOCKER_AGENT_TIMED_OUT: ok = r.a == 0 && r.b == 0; break;
  case DOCKER_AGENT_FAILED:
    ok = r.a >= DOCKER_AGENT_STAGE_SETUP && r.a <= DOCKER_AGENT_STAGE_NO_SECCOMP && r.b >= 0 &&
         r.b <= DOCKER_AGENT_MAX_ERRNO;
    break;
  case DOCKER_AGENT_EXITED:
    /* An exit code, or 128+N for a command killed by signal N. */
    ok = r.a >= 0 && r.a <= 255 && r.b >= 0 && r.b <= 64 && (r.b == 0 || r.a == 128 + r.b);
    break;
  default:
    return cordon_error_set(err, CORDON_ERR_INVALID, EPROTO,
                            "malformed reply from the exec agent: unknown type 0x%08x", r.type);
  }
  if (!ok)
    return cordon_error_set(err, CORDON_ERR_INVALID, EPROTO,
                            "malformed reply from the exec agent: type '%c' with values %d, %d "
                            "out of range",
                            (char)r.type, (int)r.a, (int)r.b);
  *out = r;
  return 0;
}
