/* The replies every route of `cordon serve` gives (bytes, JSON, the one error body), the
 * request's JSON body and query, and the context a request opens: below the route table
 * (http.c) and the routes, which all use them. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "server/server.h"

enum MHD_Result reply_bytes(struct request *req, unsigned status, const char *content_type,
                            const void *data, size_t length) {
  struct MHD_Response *r =
      MHD_create_response_from_buffer(length, (void *)data, MHD_RESPMEM_MUST_COPY);
  if (!r)
    return MHD_NO;
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
  enum MHD_Result ret = MHD_queue_response(req->conn, status, r);
  MHD_destroy_response(r);
  return ret;
}

enum MHD_Result reply_json(struct request *req, unsigned status, json_t *doc) {
  static const char oom[] = "{\"error\":{\"code\":\"internal\",\"message\":\"out of memory\"}}\n";
  if (!doc)
    return reply_bytes(req, 500, "application/json", oom, sizeof(oom) - 1);
  char *text = json_dumps(doc, JSON_COMPACT);
  json_decref(doc);
  if (!text)
    return MHD_NO;
  size_t n = strlen(text);
  char *line = realloc(text, n + 2);
  if (!line) {
    free(text);
    return MHD_NO;
  }
  line[n] = '\n';
  enum MHD_Result ret = reply_bytes(req, status, "application/json", line, n + 1);
  free(line);
  return ret;
}

enum MHD_Result reply_error(struct request *req, unsigned status, const char *code, const char *fmt,
                            ...) {
  va_list ap;
  va_start(ap, fmt);
  _cleanup_free_ char *message = NULL;
  if (vasprintf(&message, fmt, ap) < 0)
    message = NULL;
  va_end(ap);
  return reply_json(
      req, status,
      json_pack("{s:{s:s, s:s}}", "error", "code", code, "message", message ? message : code));
}

enum MHD_Result reply_cordon_error(struct request *req, struct cordon_error *err) {
  unsigned status = 500;
  const char *code = "internal";
  switch (err ? err->kind : CORDON_ERR_SYSTEM) {
  case CORDON_ERR_NOT_FOUND: status = 404, code = "not_found"; break;
  case CORDON_ERR_USAGE: status = 400, code = "bad_request"; break;
  case CORDON_ERR_INVALID: status = 400, code = "invalid"; break;
  case CORDON_ERR_DENIED: status = 403, code = "denied"; break;
  case CORDON_ERR_UNSUPPORTED: status = 422, code = "unsupported"; break;
  case CORDON_ERR_UNAVAILABLE: status = 503, code = "unavailable"; break;
  case CORDON_ERR_INTEGRITY: status = 422, code = "integrity"; break;
  case CORDON_ERR_INTERRUPTED: status = 503, code = "interrupted"; break;
  case CORDON_ERR_SYSTEM:
    if (err && (err->errnum == ENOENT))
      status = 404, code = "not_found";
    else if (err && err->errnum == EEXIST)
      status = 409, code = "conflict";
    break;
  }
  enum MHD_Result ret =
      reply_error(req, status, code, "%s", err && err->message ? err->message : "failed");
  cordon_error_free(err);
  return ret;
}

json_t *request_json(struct request *req, enum MHD_Result *replied) {
  if (req->length == 0)
    return json_object();
  json_error_t jerr;
  json_t *doc = json_loadb(req->body, req->length, JSON_REJECT_DUPLICATES, &jerr);
  if (!doc) {
    *replied = reply_error(req, 400, "malformed_json", "request body is not JSON: %s (line %d)",
                           jerr.text, jerr.line);
    return NULL;
  }
  if (!json_is_object(doc)) {
    json_decref(doc);
    *replied = reply_error(req, 400, "malformed_json", "request body must be a JSON object");
    return NULL;
  }
  return doc;
}

const char *request_query(struct request *req, const char *name) {
  return MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, name);
}

int server_context(struct server *srv, struct cordon_context **ctx, struct cordon_error **err) {
  return cordon_context_open(srv->project_dir, ctx, err);
}
