/* The wire protocol between the docker backend (host) and the exec agent that
 * cordon-docker-init (pid 1 of every session container) serves on a unix socket; the socket
 * lives in a host directory private to the session, bind-mounted into the container at
 * DOCKER_AGENT_TARGET. docs/formats.md has the byte layout.
 *
 *   host  -> agent  request: header + payload (cwd, argv, environment), the command's
 *                   stdin/stdout/stderr attached to the first bytes (SCM_RIGHTS, 3 fds)
 *   agent -> host   reply 'R' (running) or 'F' (could not start: stage, errno)
 *   host  -> agent  optional byte 'K': kill the command's process tree now
 *   agent -> host   reply 'X' (ended: exit code, signal) or 'T' (the agent's own timeout
 *                   fired and killed the tree); then the connection closes
 *
 * A closed connection also kills the tree: an exec never outlives its client. Replies are a
 * fixed 16 bytes, so the host never sizes anything by what the container says; the host
 * parses them as hostile input (docker_agent_reply_parse, fuzzed) and accepts no fds back.
 * Both ends share one kernel, so integers travel in native byte order. Encoding and decoding
 * are pure; this file is also compiled into the static init. */
#ifndef CORDON_BACKENDS_DOCKER_AGENT_H
#define CORDON_BACKENDS_DOCKER_AGENT_H

#include <stddef.h>
#include <stdint.h>

#include <cordon/error.h>

#define DOCKER_AGENT_REQUEST_MAGIC 0x31414443u /* "CDA1" little-endian */
#define DOCKER_AGENT_REPLY_MAGIC 0x31524443u   /* "CDR1" little-endian */
/* argv + environment + cwd: far above what execve accepts (ARG_MAX), well below harm. */
#define DOCKER_AGENT_MAX_PAYLOAD (8u << 20)
#define DOCKER_AGENT_MAX_STRINGS (1u << 18)
#define DOCKER_AGENT_KILL_BYTE 'K'
/* Largest errno the agent may report (Linux errnos stay far below). */
#define DOCKER_AGENT_MAX_ERRNO 4095

struct docker_agent_request_header {
  uint32_t magic;
  uint32_t length; /* payload bytes */
  uint32_t argc;
  uint32_t envc;
  uint32_t timeout_ms; /* 0: none */
};

enum docker_agent_reply_type {
  DOCKER_AGENT_RUNNING = 'R',
  DOCKER_AGENT_FAILED = 'F',
  DOCKER_AGENT_EXITED = 'X',
  DOCKER_AGENT_TIMED_OUT = 'T',
};

/* Why a command could not start (FAILED .a). */
enum docker_agent_stage {
  DOCKER_AGENT_STAGE_SETUP = 1,      /* the agent could not prepare the process */
  DOCKER_AGENT_STAGE_CHDIR = 2,      /* the working directory is not usable */
  DOCKER_AGENT_STAGE_NO_SECCOMP = 3, /* the engine applied no seccomp profile: fail closed */
};

/* The 16 bytes of a reply. */
struct docker_agent_reply {
  uint32_t magic;
  uint32_t type;
  int32_t a; /* exit code, or stage */
  int32_t b; /* signal, or errno */
};

_Static_assert(sizeof(struct docker_agent_reply) == 16, "the reply is 16 bytes on the wire");
_Static_assert(sizeof(struct docker_agent_request_header) == 20, "the header is 20 bytes");

/* A decoded request: pointers into the payload buffer (which must outlive it). */
struct docker_agent_request {
  const char *cwd;
  const char **argv; /* malloc'd, NULL-terminated */
  const char **envp; /* malloc'd, NULL-terminated */
  uint32_t timeout_ms;
};

/* Header and payload in one malloc'd buffer. */
int docker_agent_request_encode(const char *cwd, const char *const *argv, const char *const *envp,
                                uint32_t timeout_ms, unsigned char **out, size_t *out_length,
                                struct cordon_error **err);

/* Check a header before reading its payload (agent side). */
int docker_agent_request_check_header(const struct docker_agent_request_header *h,
                                      struct cordon_error **err);

/* Decode a payload of h->length bytes (agent side). */
int docker_agent_request_decode(const struct docker_agent_request_header *h,
                                const unsigned char *payload, struct docker_agent_request *out,
                                struct cordon_error **err);
void docker_agent_request_clear(struct docker_agent_request *r);

/* A reply as the agent writes it. */
struct docker_agent_reply docker_agent_reply_make(enum docker_agent_reply_type type, int32_t a,
                                                  int32_t b);

/* Parse and validate `length` bytes the host read as one reply (host side; hostile input:
 * any bytes give either a reply whose every field is in range, or a one-line error). A
 * reply is exactly 16 bytes: fewer is "truncated". */
int docker_agent_reply_parse(const unsigned char *bytes, size_t length,
                             struct docker_agent_reply *out, struct cordon_error **err);

#endif
