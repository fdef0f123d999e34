/* The ns holder's wire protocol (see proto.h). Pure: no I/O. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backends/ns/proto.h"
#include "base/cleanup.h"

static size_t vector_length(const char *const *v) {
  size_t n = 0;
  while (v && v[n])
    n++;
  return n;
}

int ns_request_encode(const char *cwd, const char *const *argv, const char *const *envp,
                      unsigned char **out, size_t *out_length, struct cordon_error **err) {
  size_t argc = vector_length(argv), envc = vector_length(envp);
  if (!cwd || argc == 0)
    return cordon_error_set(err, CORDON_ERR_USAGE, EINVAL, "exec request without cwd or argv");
  if (argc + envc + 1 > NS_PROTO_MAX_STRINGS)
    return cordon_error_set(err, CORDON_ERR_USAGE, E2BIG, "exec request has too many strings");
  size_t payload = strlen(cwd) + 1;
  for (size_t i = 0; i < argc; i++)
    payload += strlen(argv[i]) + 1;
  for (size_t i = 0; i < envc; i++)
    payload += strlen(envp[i]) + 1;
  if (payload > NS_PROTO_MAX_PAYLOAD)
    return cordon_error_set(err, CORDON_ERR_USAGE, E2BIG,
                            "exec request (argv and environment) is larger than %u bytes",
                            NS_PROTO_MAX_PAYLOAD);
  struct ns_request_header h = {
      .magic = NS_PROTO_MAGIC,
      .length = (uint32_t)payload,
      .argc = (uint32_t)argc,
      .envc = (uint32_t)envc,
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

int ns_request_check_header(const struct ns_request_header *h, struct cordon_error **err) {
  if (h->magic != NS_PROTO_MAGIC)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "exec request: bad magic");
  if (h->length == 0 || h->length > NS_PROTO_MAX_PAYLOAD)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "exec request: bad length %u", h->length);
  if (h->argc == 0 || h->argc > NS_PROTO_MAX_STRINGS || h->envc > NS_PROTO_MAX_STRINGS ||
      (uint64_t)h->argc + h->envc + 1 > h->length)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "exec request: bad counts");
  return 0;
}

void ns_request_clear(struct ns_request *r) {
  free(r->argv);
  free(r->envp);
  memset(r, 0, sizeof(*r));
}

int ns_request_decode(const struct ns_request_header *h, const unsigned char *payload,
                      struct ns_request *out, struct cordon_error **err) {
  memset(out, 0, sizeof(*out));
  if (ns_request_check_header(h, err) < 0)
    return -1;
  if (payload[h->length - 1] != 0)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "exec request: unterminated string");
  const char **argv = calloc((size_t)h->argc + 1, sizeof(char *));
  const char **envp = calloc((size_t)h->envc + 1, sizeof(char *));
  if (!argv || !envp) {
    free(argv);
    free(envp);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "exec request");
  }
  const char *p = (const char *)payload, *end = (const char *)payload + h->length;
  size_t total = (size_t)h->argc + h->envc + 1;
  for (size_t i = 0; i < total; i++) {
    if (p >= end) {
      free(argv);
      free(envp);
      return cordon_error_set(err, CORDON_ERR_INVALID, 0, "exec request: too few strings");
    }
    if (i == 0)
      out->cwd = p;
    else if (i <= h->argc)
      argv[i - 1] = p;
    else
      envp[i - 1 - h->argc] = p;
    p += strlen(p) + 1; /* the last byte is NUL, so this stays within the payload */
  }
  if (p != end) {
    free(argv);
    free(envp);
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "exec request: trailing bytes");
  }
  if (out->cwd[0] != '/' || !argv[0][0]) {
    free(argv);
    free(envp);
    return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                            "exec request: relative cwd or empty program");
  }
  out->argv = argv;
  out->envp = envp;
  return 0;
}
