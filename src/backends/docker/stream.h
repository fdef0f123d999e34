/* Pure parsers for what the Docker engine sends back on a hijacked exec connection: the HTTP
 * response head, the multiplexed stream (8-byte frame headers: stream type, three zero bytes,
 * big-endian payload length), bounded output captures, and the exec wrapper's status trailer
 * at the end of stderr. No I/O here: fed byte ranges, tested without a daemon. */
#ifndef CORDON_BACKENDS_DOCKER_STREAM_H
#define CORDON_BACKENDS_DOCKER_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cordon/error.h>

#include "backends/docker/protocol.h"

/* ---- HTTP response head ---------------------------------------------------------------- */

#define DOCKER_HTTP_HEAD_MAX (64u * 1024u)

struct docker_http_head {
  int status;
  size_t head_length;       /* bytes up to and including the blank line */
  long long content_length; /* -1 when absent */
  bool chunked;
};

/* 1 when buf holds a complete head (filled in), 0 when more bytes are needed, -1 when it is
 * malformed or longer than DOCKER_HTTP_HEAD_MAX. */
int docker_http_parse_head(const char *buf, size_t length, struct docker_http_head *head);

/* Decode a complete chunked body in place; returns the decoded length, or -1 if malformed. */
long long docker_http_dechunk(char *buf, size_t length);

/* ---- the multiplexed stream -------------------------------------------------------------- */

enum docker_stream_id {
  DOCKER_STREAM_STDIN = 0,
  DOCKER_STREAM_STDOUT = 1,
  DOCKER_STREAM_STDERR = 2,
  DOCKER_STREAM_SYSTEMERR = 3, /* the engine's own error text */
};

typedef void (*docker_frame_sink)(void *data, enum docker_stream_id stream,
                                  const unsigned char *bytes, size_t length);

struct docker_demux {
  unsigned char header[8];
  size_t header_have;
  enum docker_stream_id stream;
  uint32_t remaining; /* payload bytes left in the current frame */
};

/* Feed bytes; payload ranges go to sink as they arrive (a frame may span many feeds). Returns
 * 0, or -1 on a frame header that is not Docker's (unknown stream type, non-zero padding). */
int docker_demux_feed(struct docker_demux *d, const unsigned char *bytes, size_t length,
                      docker_frame_sink sink, void *data);
/* True when the stream ended on a frame boundary. */
bool docker_demux_complete(const struct docker_demux *d);

/* ---- bounded capture ----------------------------------------------------------------------- */

struct docker_capture {
  unsigned char *data; /* NUL-terminated when not NULL */
  size_t length, capacity, max;
  uint64_t total;
  bool truncated;
  bool failed; /* out of memory: the capture stops growing */
};

void docker_capture_init(struct docker_capture *c, size_t max);
void docker_capture_append(struct docker_capture *c, const unsigned char *bytes, size_t length);
/* Hand the buffer over (never NULL unless out of memory: an empty capture gives ""). */
unsigned char *docker_capture_take(struct docker_capture *c, size_t *length);
void docker_capture_free(struct docker_capture *c);

/* ---- stderr with the trailer held back --------------------------------------------------- */

/* The last DOCKER_TRAILER_MAX bytes of stderr are held back until the end, when a trailer is
 * stripped from them (and not counted) and the rest goes to the capture. */
struct docker_tail {
  struct docker_capture *capture;
  unsigned char held[DOCKER_TRAILER_MAX];
  size_t held_length;
};

enum docker_status_kind {
  DOCKER_STATUS_NONE = 0, /* no trailer: the wrapper did not finish */
  DOCKER_STATUS_EXIT,
  DOCKER_STATUS_SIGNAL,
  DOCKER_STATUS_TIMEOUT,
  DOCKER_STATUS_CHDIR,
  DOCKER_STATUS_SETUP,
  DOCKER_STATUS_NO_SECCOMP,  /* the engine applied no seccomp profile: refused, fail closed */
  DOCKER_STATUS_EXEC_FAILED, /* execve failed: value 127 not found, 126 cannot execute */
};

struct docker_status {
  enum docker_status_kind kind;
  int value; /* exit code, signal or errno */
};

void docker_tail_feed(struct docker_tail *t, const unsigned char *bytes, size_t length);
/* Strip a trailer that ends the stream, flush the rest to the capture. */
void docker_tail_finish(struct docker_tail *t, struct docker_status *status);

/* The exit code the wrapper exits with for a status (what exec inspect reports). */
int docker_status_exit_code(const struct docker_status *status);

#endif
