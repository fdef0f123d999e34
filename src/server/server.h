/* `cordon serve`: the HTTP API over the library (docs/api.md). This header is what the parts of
 * src/server/ share: the server, one request, the reply helpers and the route handlers. The
 * server calls only the public library API (include/cordon/), the calls the CLI makes, plus the
 * shared shaping below both (protocol/exec-json.h) and the token checks (crypto/jwt.h). */
#ifndef CORDON_SERVER_SERVER_H
#define CORDON_SERVER_SERVER_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include <cordon/cordon.h>

#include "crypto/jwt.h"
#include "server/mhd-loader.h"

/* The bound of a request body (JSON, a file written, a snapshot image imported): 64 MiB. */
#define SERVER_MAX_BODY (64u << 20)

struct metrics;
struct races;

struct server {
  struct cordon_registry *reg;
  char *project_dir;  /* the project the server was started in */
  char *state_dir;    /* its .cordon/ */
  bool require_token; /* a TCP listener: every route but /healthz and the JWKS needs a token */
  bool unix_socket;   /* peers are checked by SO_PEERCRED: only our own uid */
  uint8_t public_key[CORDON_ED25519_PUBLIC_LEN];
  char kid[CORDON_KEY_ID_LEN + 1];
  char *jwks; /* the install key's JWKS document, NULL when there is no key */
  struct metrics *metrics;
  struct races *races; /* races started through the API */
};

/* One request: its body (bounded) and what the route matched. */
struct request {
  struct server *srv;
  struct MHD_Connection *conn;
  const char *method;
  const char *url;
  char *body;
  size_t length;
  size_t capacity; /* of body: grown by doubling, so a large body is not copied per chunk */
  bool too_large;
  uint32_t scopes; /* what the caller may do: the token's, or everything on the unix socket */
};

/* Replies: each queues a response and returns what the access handler returns. */
enum MHD_Result reply_json(struct request *req, unsigned status, json_t *doc); /* steals doc */
enum MHD_Result reply_error(struct request *req, unsigned status, const char *code, const char *fmt,
                            ...) __attribute__((format(printf, 4, 5)));
/* A library error, by its kind: not_found 404, usage/invalid 400, denied 403, unsupported 422,
 * unavailable 503, anything else 500. Frees err. */
enum MHD_Result reply_cordon_error(struct request *req, struct cordon_error *err);
enum MHD_Result reply_bytes(struct request *req, unsigned status, const char *content_type,
                            const void *data, size_t length);

/* The request body as a JSON object (an empty body is {}); NULL after replying 400. */
json_t *request_json(struct request *req, enum MHD_Result *replied);
const char *request_query(struct request *req, const char *name);

/* A context for the server's project (one per request: the library's context is not shared
 * across threads). */
int server_context(struct server *srv, struct cordon_context **ctx, struct cordon_error **err);

/* Routes (routes-*.c). `id` is the path's one variable segment, or NULL. */
typedef enum MHD_Result (*route_fn)(struct request *req, const char *id);
enum MHD_Result route_session_create(struct request *req, const char *id);
enum MHD_Result route_session_list(struct request *req, const char *id);
enum MHD_Result route_session_show(struct request *req, const char *id);
enum MHD_Result route_session_destroy(struct request *req, const char *id);
enum MHD_Result route_session_read(struct request *req, const char *id);
enum MHD_Result route_session_write(struct request *req, const char *id);
enum MHD_Result route_session_ls(struct request *req, const char *id);
enum MHD_Result route_session_exec(struct request *req, const char *id);
enum MHD_Result route_session_snapshot(struct request *req, const char *id);
enum MHD_Result route_session_shutdown(struct request *req, const char *id);
enum MHD_Result route_snapshot_take(struct request *req, const char *id);
enum MHD_Result route_snapshot_show(struct request *req, const char *id);
enum MHD_Result route_snapshot_export(struct request *req, const char *id);
enum MHD_Result route_snapshot_import(struct request *req, const char *id);
enum MHD_Result route_backends(struct request *req, const char *id);
enum MHD_Result route_receipt_verify(struct request *req, const char *id);
enum MHD_Result route_audit_verify(struct request *req, const char *id);
enum MHD_Result route_metrics(struct request *req, const char *id);
enum MHD_Result route_jwks(struct request *req, const char *id);
enum MHD_Result route_healthz(struct request *req, const char *id);
enum MHD_Result route_race_start(struct request *req, const char *id);
enum MHD_Result route_race_status(struct request *req, const char *id);
enum MHD_Result route_race_receipt(struct request *req, const char *id);
enum MHD_Result route_pool_submit(struct request *req, const char *pool);
enum MHD_Result route_pool_dispatch(struct request *req, const char *pool);

/* exec-stream.c: POST .../exec?stream=1 on an open session (takes ownership of s and ctx). */
enum MHD_Result exec_stream_start(struct request *req, struct cordon_context *ctx,
                                  struct cordon_session *s, const struct cordon_exec_request *x,
                                  json_t *request_doc);

/* Parse an exec request body ({"argv", "cwd", "env", "timeout", "stdin", "max_output"}) into x;
 * its strings point into doc, the vectors and stdin are malloc'd (exec_request_clear). */
int exec_request_parse(json_t *doc, struct cordon_exec_request *x, char **why);
void exec_request_clear(struct cordon_exec_request *x);

#endif
