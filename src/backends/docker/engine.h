/* A small client of the Docker Engine API on its unix socket.
 *
 * JSON requests go through libcurl (CURLOPT_UNIX_SOCKET_PATH, HTTP/1.1, one kept-alive
 * connection per client, serialised by a mutex). The one request libcurl cannot carry is
 * `POST /exec/ID/start` with stdin: the engine upgrades that connection to a raw
 * bidirectional stream (stdin in, multiplexed stdout/stderr out, end of stdin signalled by
 * half-closing the socket), so that request is written by hand on a socket of its own; see
 * docker_exec_stream_open(). The API version is pinned so that answers keep their shape on
 * newer engines. */
#ifndef CORDON_BACKENDS_DOCKER_ENGINE_H
#define CORDON_BACKENDS_DOCKER_ENGINE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include <cordon/error.h>

#include "backends/docker/stream.h"

#define DOCKER_API_VERSION "v1.41"
#define DOCKER_DEFAULT_SOCKET "/var/run/docker.sock"

/* The socket path DOCKER_HOST names ("unix:///path"); NULL or empty gives the default
 * socket. Any other scheme is refused by name: cordon speaks to engines over unix sockets. */
int docker_host_socket(const char *docker_host, char **socket_path, struct cordon_error **err);

struct docker_engine;

/* No connection is made yet; socket_path NULL: from $DOCKER_HOST. */
int docker_engine_open(const char *socket_path, struct docker_engine **out,
                       struct cordon_error **err);
void docker_engine_free(struct docker_engine *e);
const char *docker_engine_socket(const struct docker_engine *e);

/* One request. path is below the version prefix ("/containers/json?all=1"); body may be NULL.
 * Returns 0 when the engine answered (whatever the status; *response gets the parsed JSON
 * body or NULL), -1 when it could not be reached (the error names the socket). */
int docker_engine_request(struct docker_engine *e, const char *method, const char *path,
                          json_t *body, long *status, json_t **response, struct cordon_error **err);

/* A request that must succeed with a 2xx status; any other becomes an error carrying the
 * engine's message. 404 maps to CORDON_ERR_NOT_FOUND, 409 to CORDON_ERR_INVALID. */
int docker_engine_call(struct docker_engine *e, const char *method, const char *path, json_t *body,
                       json_t **response, struct cordon_error **err);

/* Is the engine there? (GET /_ping) 0, or -1 with an error naming the socket. */
int docker_engine_ping(struct docker_engine *e, struct cordon_error **err);

/* ---- exec streams --------------------------------------------------------------------------- */

struct docker_exec_stream;

/* Connect and POST /exec/ID/start with the connection upgraded; on return the multiplexed
 * stream is ready. stdin_data (may be NULL when the exec does not attach stdin) is written as
 * the stream allows, then the write side is shut to give the command end-of-file. The stream
 * keeps pointers to stdin_data: it must outlive the stream. */
int docker_exec_stream_open(struct docker_engine *e, const char *exec_id, const void *stdin_data,
                            size_t stdin_length, bool attach_stdin, struct docker_exec_stream **out,
                            struct cordon_error **err);

/* Pump until end of stream (*ended = true) or until the monotonic deadline (0: none) passes
 * (*ended = false). Frames go to sink. */
int docker_exec_stream_pump(struct docker_exec_stream *s, double deadline, docker_frame_sink sink,
                            void *data, bool *ended, struct cordon_error **err);

void docker_exec_stream_close(struct docker_exec_stream *s);

#endif
