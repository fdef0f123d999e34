/* The ns holder's wire protocol, over a unix stream socket in the session's state directory.
 *
 *   client -> holder  request: header + payload, with the command's stdin/stdout/stderr
 *                     attached to the header (SCM_RIGHTS)
 *   holder -> client  reply 'R' (running) or 'F' (could not start: stage, errno)
 *   client -> holder  optional byte 'K': kill the command's process tree now
 *   holder -> client  reply 'X' (ended: exit code, signal), then the connection closes
 *
 * A closed connection also kills the tree: an exec never outlives its client. Encoding and
 * decoding are pure; decode is the one parser of this untrusted-by-default input. */
#ifndef CORDON_NS_PROTO_H
#define CORDON_NS_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include <cordon/error.h>

#define NS_PROTO_MAGIC 0x314e4443u /* "CDN1" little-endian */
#define NS_PROTO_MAX_PAYLOAD (16u << 20)
#define NS_PROTO_MAX_STRINGS (1u << 20)

struct ns_request_header {
  uint32_t magic;
  uint32_t length; /* payload bytes */
  uint32_t argc;
  uint32_t envc;
};

enum ns_reply_type {
  NS_REPLY_RUNNING = 'R',
  NS_REPLY_FAILED = 'F',
  NS_REPLY_EXITED = 'X',
};

/* Why a command could not start (NS_REPLY_FAILED .a). */
enum ns_fail_stage {
  NS_STAGE_SETUP = 1, /* the holder could not prepare the process */
  NS_STAGE_CHDIR = 2, /* the working directory is not usable */
};

struct ns_reply {
  uint32_t type;
  int32_t a; /* exit code, or stage */
  int32_t b; /* signal, or errno */
};

#define NS_KILL_BYTE 'K'

/* A decoded request: pointers into the payload buffer (which must outlive it). */
struct ns_request {
  const char *cwd;
  const char **argv; /* malloc'd, NULL-terminated */
  const char **envp; /* malloc'd, NULL-terminated */
};

/* Header and payload in one malloc'd buffer. */
int ns_request_encode(const char *cwd, const char *const *argv, const char *const *envp,
                      unsigned char **out, size_t *out_length, struct cordon_error **err);

/* Check a header before reading its payload. */
int ns_request_check_header(const struct ns_request_header *h, struct cordon_error **err);

/* Decode a payload of h->length bytes. */
int ns_request_decode(const struct ns_request_header *h, const unsigned char *payload,
                      struct ns_request *out, struct cordon_error **err);
void ns_request_clear(struct ns_request *r);

#endif
