/* The exec request wire format, shared by every backend that starts commands in a helper of
 * its own over a unix stream socket: the ns backend's holder (backends/ns/proto.h) and the
 * docker backend's exec agent (backends/docker/agent.h). One connection per exec:
 *
 *   host   -> helper  request: header + payload (cwd, argv, environment), the command's
 *                     stdin/stdout/stderr attached to the first bytes (SCM_RIGHTS, 3 fds)
 *   helper -> host    reply 'R' (running) or 'F' (could not start: stage, errno)
 *   host   -> helper  optional byte 'K' (or hanging up): kill the command's process tree now
 *   helper -> host    reply 'X' (ended: exit code, signal) or, where the protocol has it, 'T'
 *                     (the helper's own timeout fired); then the connection closes
 *
 * A protocol (struct exec_wire_protocol) names its own magic numbers, reply types and failure
 * stages; the code is this one. docs/formats.md has the byte layout. Both ends share one
 * kernel, so integers travel in native byte order.
 *
 * Both directions are parsed as untrusted input: the helper parses requests from whoever
 * reaches its socket, and the host parses replies from inside a sandbox, which is hostile.
 * Requests are bounded before anything is allocated; replies are a fixed 16 bytes, so the host
 * never sizes anything by what the sandbox says, and they are read without a control buffer,
 * so fds a sandbox attaches are discarded by the kernel. Encoding and parsing are pure; the
 * I/O functions are thin. This file is also compiled into cordon-docker-init (static, with
 * base/error.c only). */
#ifndef CORDON_EXEC_WIRE_H
#define CORDON_EXEC_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include <cordon/error.h>

/* argv + environment + cwd: above what execve accepts (6 MiB of strings since Linux 4.13),
 * well below harm. */
#define EXEC_WIRE_MAX_PAYLOAD (8u << 20)
#define EXEC_WIRE_MAX_STRINGS (1u << 20)
/* Largest errno a helper may report (Linux errnos stay far below). */
#define EXEC_WIRE_MAX_ERRNO 4095
#define EXEC_WIRE_KILL_BYTE 'K'
/* The fds a request carries: the command's stdin, stdout and stderr. */
#define EXEC_WIRE_STDIO_FDS 3
/* How long a helper waits for a complete request: the host sends it at once, and a
 * connection that never does must not hold a helper forever. */
#define EXEC_WIRE_REQUEST_TIMEOUT_MS 10000

struct exec_wire_header {
  uint32_t magic;
  uint32_t length; /* payload bytes */
  uint32_t argc;
  uint32_t envc;
  uint32_t timeout_ms; /* 0: none */
};

enum exec_wire_reply_type {
  EXEC_WIRE_RUNNING = 'R',
  EXEC_WIRE_FAILED = 'F',
  EXEC_WIRE_EXITED = 'X',
  EXEC_WIRE_TIMED_OUT = 'T',
  /* The helper could not execve the command: .a 127 (not found) or 126 (cannot execute), .b
   * the errno. The command's result all the same, with its message on stderr; the type tells
   * it from a command that exits 126/127 itself. */
  EXEC_WIRE_EXEC_FAILED = 'E',
};

/* Why a command could not start (EXEC_WIRE_FAILED .a). */
enum exec_wire_stage {
  EXEC_WIRE_STAGE_SETUP = 1,      /* the helper could not prepare the process */
  EXEC_WIRE_STAGE_CHDIR = 2,      /* the working directory is not usable */
  EXEC_WIRE_STAGE_NO_SECCOMP = 3, /* docker: the engine applied no seccomp profile */
  /* microvm: the command ran but no status of it was collected (.b: EIO, its keeper died
   * without a word; ECONNABORTED, the agent ended it because its host had hung up) */
  EXEC_WIRE_STAGE_LOST = 4,
};

/* The 16 bytes of a reply. */
struct exec_wire_reply {
  uint32_t magic;
  uint32_t type;
  int32_t a; /* exit code, or stage */
  int32_t b; /* signal, or errno */
};

_Static_assert(sizeof(struct exec_wire_header) == 20, "the header is 20 bytes on the wire");
_Static_assert(sizeof(struct exec_wire_reply) == 16, "the reply is 16 bytes on the wire");

/* What tells one protocol from another. */
struct exec_wire_protocol {
  uint32_t request_magic;
  uint32_t reply_magic;
  const char *reply_types; /* the reply types this helper sends, e.g. "RFX" */
  int32_t last_stage;      /* the highest enum exec_wire_stage it reports */
  const char *peer;        /* the helper, as error messages name it: "the exec agent" */
};

/* A decoded request: pointers into the payload. */
struct exec_wire_request {
  const char *cwd;
  const char **argv; /* malloc'd, NULL-terminated */
  const char **envp; /* malloc'd, NULL-terminated */
  uint32_t timeout_ms;
  unsigned char *payload; /* owned when received (exec_wire_receive_request), else NULL */
};

/* ---- pure ---------------------------------------------------------------------------------- */

/* Header and payload in one malloc'd buffer. cwd must be absolute and argv[0] not empty. */
int exec_wire_encode(const struct exec_wire_protocol *p, const char *cwd, const char *const *argv,
                     const char *const *envp, uint32_t timeout_ms, unsigned char **out,
                     size_t *out_length, struct cordon_error **err);

/* Check a header before reading its payload: magic, and sizes within the bounds. */
int exec_wire_check_header(const struct exec_wire_protocol *p, const struct exec_wire_header *h,
                           struct cordon_error **err);

/* Decode a payload of h->length bytes (which must outlive *out). Any bytes give either
 * strings that all end within the payload, or an error. */
int exec_wire_decode(const struct exec_wire_protocol *p, const struct exec_wire_header *h,
                     const unsigned char *payload, struct exec_wire_request *out,
                     struct cordon_error **err);
void exec_wire_request_clear(struct exec_wire_request *r);

/* Seconds (<= 0: none) as the header's timeout_ms: never 0 for a real timeout. */
uint32_t exec_wire_timeout_ms(double seconds);

/* Parse and validate `length` bytes read as one reply: exactly 16, the protocol's magic, one
 * of its types, every value in range. Anything else is a one-line error and *out is zeroed. */
int exec_wire_reply_parse(const struct exec_wire_protocol *p, const unsigned char *bytes,
                          size_t length, struct exec_wire_reply *out, struct cordon_error **err);

/* ---- I/O ------------------------------------------------------------------------------------ */

/* Send `length` bytes with fds[0..n_fds) attached to the first of them. Returns 0, or -1 with
 * errno set. */
int exec_wire_send_with_fds(int sock, const void *bytes, size_t length, const int *fds,
                            size_t n_fds);

/* Receive one request and its three stdio fds within timeout_ms (-1: no limit). Returns 1 with
 * *req filled (free with exec_wire_request_clear) and stdio[] open; 0 when the connection
 * ended before a complete header (a readiness probe: nothing to answer); -1 on a malformed,
 * truncated or late request (err set, errnum EINVAL, ETIMEDOUT or ENOMEM). On 0 and -1 no fd
 * is left open. */
int exec_wire_receive_request(int conn, const struct exec_wire_protocol *p, int timeout_ms,
                              int stdio[EXEC_WIRE_STDIO_FDS], struct exec_wire_request *req,
                              struct cordon_error **err);

/* Send one reply (the helper's side). Returns 0, or -1 when the host hung up. */
int exec_wire_send_reply(int conn, const struct exec_wire_protocol *p,
                         enum exec_wire_reply_type type, int32_t a, int32_t b);

/* Read one reply within timeout_ms (-1: no limit). Returns 1 with *reply parsed and checked,
 * 0 when the connection ended before any byte of it, -1 on a malformed, truncated or late
 * reply (err set). */
int exec_wire_read_reply(int conn, const struct exec_wire_protocol *p, int timeout_ms,
                         struct exec_wire_reply *reply, struct cordon_error **err);

/* Ask the helper to kill the command's tree now; never blocks. */
void exec_wire_send_kill(int conn);

#endif
