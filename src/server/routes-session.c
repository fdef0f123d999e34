/* The session routes of `cordon serve` (docs/api.md): create (or resume) with the full
 * manifest, list, show, destroy; and per session read, write, ls, exec, snapshot, shutdown.
 * Each request opens its own context and session handle, exactly as one CLI invocation does,
 * and closes them when it has answered. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "protocol/exec-json.h"
#include "protocol/session-json.h"
#include "server/manifest-json.h"
#include "server/server.h"

/* An open session for one request; closed (not destroyed) by session_handle_clear. */
struct session_handle {
  struct cordon_context *ctx;
  struct cordon_session *s;
};

static void session_handle_clear(struct session_handle *h) {
  if (h->s)
    cordon_session_close(h->s);
  cordon_context_free(h->ctx);
  memset(h, 0, sizeof(*h));
}

/* Open the session `given` names (a unique prefix will do); replies 404 when there is none. */
static int session_handle_open(struct request *req, const char *given, struct session_handle *h,
                               enum MHD_Result *replied) {
  struct cordon_error *err = NULL;
  _cleanup_free_ char *id = NULL;
  memset(h, 0, sizeof(*h));
  if (server_context(req->srv, &h->ctx, &err) < 0 ||
      cordon_session_resolve_id(h->ctx, given, &id, &err) < 0 ||
      cordon_session_open(h->ctx, req->srv->reg, id, &h->s, &err) < 0) {
    session_handle_clear(h);
    *replied = reply_cordon_error(req, err);
    return -1;
  }
  return 0;
}

enum MHD_Result route_session_create(struct request *req, const char *unused) {
  enum MHD_Result replied = MHD_NO;
  json_t *doc = request_json(req, &replied);
  if (!doc)
    return replied;
  struct manifest_json m;
  _cleanup_free_ char *why = NULL;
  if (manifest_json_parse(doc, &m, &why) < 0) {
    manifest_json_clear(&m);
    json_decref(doc);
    return reply_error(req, 400, "bad_manifest", "%s", why ? why : "bad manifest");
  }
  /* Host paths are the server's files: only an admin may have one bound into a sandbox. */
  if ((m.manifest.workspace || m.manifest.repo || m.allow_ro) &&
      !jwt_scope_allows(req->scopes, JWT_SCOPE_ADMIN)) {
    manifest_json_clear(&m);
    json_decref(doc);
    return reply_error(req, 403, "forbidden",
                       "workspace, repo and policy.allow_ro name host paths: scope admin needed");
  }
  struct cordon_error *err = NULL;
  struct cordon_context *ctx = NULL;
  struct cordon_session *s = NULL;
  const struct cordon_backend *b = NULL;
  const char *name = m.backend ? m.backend : cordon_registry_default_name();
  int r = cordon_registry_find(req->srv->reg, name, &b, &err);
  /* A backend that isolates nothing runs commands as the server's user on its host, and a
   * waiver runs without what was asked: either is an admin's choice, never a client's. */
  if (r == 0 && (b->tier == CORDON_TIER_NONE || !m.manifest.policy.require_enforcement) &&
      !jwt_scope_allows(req->scopes, JWT_SCOPE_ADMIN)) {
    manifest_json_clear(&m);
    json_decref(doc);
    return reply_error(req, 403, "forbidden",
                       "backend %s isolates nothing, or enforcement is waived: scope admin "
                       "needed",
                       b->name);
  }
  if (r == 0) {
    /* No "net": the backend's default class, as the CLI without --net. */
    if (!m.egress_given)
      m.manifest.policy.egress = cordon_backend_default_egress(b);
    r = server_context(req->srv, &ctx, &err);
  }
  if (r == 0)
    r = m.from ? cordon_session_resume(ctx, b, &m.manifest, m.from, &s, &err)
               : cordon_session_create(ctx, b, &m.manifest, &s, &err);
  manifest_json_clear(&m);
  json_decref(doc);
  if (r < 0) {
    cordon_context_free(ctx);
    return reply_cordon_error(req, err);
  }
  json_t *out = session_json(s);
  cordon_session_close(s);
  cordon_context_free(ctx);
  return reply_json(req, 201, out);
}

enum MHD_Result route_session_list(struct request *req, const char *unused) {
  struct cordon_error *err = NULL;
  struct cordon_context *ctx = NULL;
  char **ids = NULL;
  if (server_context(req->srv, &ctx, &err) < 0 || cordon_session_list(ctx, &ids, &err) < 0) {
    cordon_context_free(ctx);
    return reply_cordon_error(req, err);
  }
  json_t *list = json_array();
  for (size_t i = 0; ids && ids[i]; i++) {
    struct cordon_session *s = NULL;
    struct cordon_error *open_err = NULL;
    /* A session whose state cannot be read is listed with the reason, as `session list`. */
    if (cordon_session_open(ctx, req->srv->reg, ids[i], &s, &open_err) < 0) {
      json_array_append_new(list, session_json_unreadable(ids[i], open_err));
      cordon_error_free(open_err);
      continue;
    }
    json_array_append_new(list, session_json(s));
    cordon_session_close(s);
  }
  cordon_strv_free(ids);
  cordon_context_free(ctx);
  return reply_json(req, 200, json_pack("{s:o}", "sessions", list));
}

enum MHD_Result route_session_show(struct request *req, const char *id) {
  struct session_handle h;
  enum MHD_Result replied;
  if (session_handle_open(req, id, &h, &replied) < 0)
    return replied;
  json_t *out = session_json_detail(h.s);
  session_handle_clear(&h);
  return reply_json(req, 200, out);
}

enum MHD_Result route_session_destroy(struct request *req, const char *id) {
  struct session_handle h;
  enum MHD_Result replied;
  if (session_handle_open(req, id, &h, &replied) < 0)
    return replied;
  _cleanup_free_ char *session_id = strdup(h.s->id);
  struct cordon_error *err = NULL;
  int r = cordon_session_destroy(steal_ptr(&h.s), &err); /* frees the handle either way */
  session_handle_clear(&h);
  if (r < 0)
    return reply_cordon_error(req, err);
  return reply_json(req, 200, json_pack("{s:s?, s:b}", "id", session_id, "destroyed", 1));
}

/* A session that was shut down takes no more work: 409, as the CLI's "shut down" refusal. */
static bool refuse_shut_down(struct request *req, struct session_handle *h,
                             enum MHD_Result *replied) {
  if (!h->s->shut_down)
    return false;
  *replied = reply_error(req, 409, "shut_down", "session %s is shut down", h->s->id);
  session_handle_clear(h);
  return true;
}

enum MHD_Result route_session_read(struct request *req, const char *id) {
  const char *path = request_query(req, "path");
  if (!path)
    return reply_error(req, 400, "bad_request", "?path= is required");
  struct session_handle h;
  enum MHD_Result replied;
  if (session_handle_open(req, id, &h, &replied) < 0)
    return replied;
  unsigned char *data = NULL;
  size_t length = 0;
  struct cordon_error *err = NULL;
  int r = cordon_session_read(h.s, path, &data, &length, &err);
  session_handle_clear(&h);
  if (r < 0)
    return reply_cordon_error(req, err);
  replied = reply_bytes(req, 200, "application/octet-stream", data, length);
  free(data);
  return replied;
}

enum MHD_Result route_session_write(struct request *req, const char *id) {
  const char *path = request_query(req, "path");
  const char *mode_text = request_query(req, "mode");
  if (!path)
    return reply_error(req, 400, "bad_request", "?path= is required");
  unsigned long mode = 0644;
  if (mode_text) {
    char *end = NULL;
    mode = strtoul(mode_text, &end, 8);
    if (!*mode_text || *end || mode > 07777)
      return reply_error(req, 400, "bad_request", "?mode= must be octal permission bits");
  }
  struct session_handle h;
  enum MHD_Result replied;
  if (session_handle_open(req, id, &h, &replied) < 0)
    return replied;
  if (refuse_shut_down(req, &h, &replied))
    return replied;
  struct cordon_error *err = NULL;
  int r = cordon_session_write(h.s, path, req->body ? req->body : "", req->length, (unsigned)mode,
                               &err);
  session_handle_clear(&h);
  if (r < 0)
    return reply_cordon_error(req, err);
  return reply_json(req, 200,
                    json_pack("{s:s, s:I}", "path", path, "bytes", (json_int_t)req->length));
}

enum MHD_Result route_session_ls(struct request *req, const char *id) {
  const char *path = request_query(req, "path");
  struct session_handle h;
  enum MHD_Result replied;
  if (session_handle_open(req, id, &h, &replied) < 0)
    return replied;
  struct cordon_dirent *entries = NULL;
  size_t count = 0;
  struct cordon_error *err = NULL;
  int r = cordon_session_ls(h.s, path && *path ? path : ".", &entries, &count, &err);
  session_handle_clear(&h);
  if (r < 0)
    return reply_cordon_error(req, err);
  json_t *list = json_array();
  for (size_t i = 0; i < count; i++) {
    char mode[8];
    snprintf(mode, sizeof(mode), "%04o", entries[i].mode & 07777);
    json_array_append_new(list, json_pack("{s:s, s:s, s:s, s:I}", "name", entries[i].name, "kind",
                                          cordon_file_kind_name(entries[i].kind), "mode", mode,
                                          "size", (json_int_t)entries[i].size));
  }
  cordon_dirents_free(entries, count);
  return reply_json(req, 200, json_pack("{s:o}", "entries", list));
}

enum MHD_Result route_session_exec(struct request *req, const char *id) {
  enum MHD_Result replied = MHD_NO;
  json_t *doc = request_json(req, &replied);
  if (!doc)
    return replied;
  struct cordon_exec_request x;
  _cleanup_free_ char *why = NULL;
  if (exec_request_parse(doc, &x, &why) < 0) {
    exec_request_clear(&x);
    json_decref(doc);
    return reply_error(req, 400, "bad_exec", "%s", why ? why : "bad exec request");
  }
  struct session_handle h;
  if (session_handle_open(req, id, &h, &replied) < 0 || refuse_shut_down(req, &h, &replied)) {
    exec_request_clear(&x);
    json_decref(doc);
    return replied;
  }
  const char *stream = request_query(req, "stream");
  if (stream && strcmp(stream, "0")) /* takes h, x's strings stay in doc, which it keeps */
    return exec_stream_start(req, h.ctx, h.s, &x, doc);
  struct cordon_exec_result res = {0};
  struct cordon_error *err = NULL;
  int r = cordon_session_exec(h.s, &x, &res, &err);
  session_handle_clear(&h);
  exec_request_clear(&x);
  json_decref(doc);
  if (r < 0)
    return reply_cordon_error(req, err);
  json_t *out = exec_result_json(&res, true);
  cordon_exec_result_clear(&res);
  return reply_json(req, 200, out);
}

enum MHD_Result route_session_snapshot(struct request *req, const char *id) {
  struct session_handle h;
  enum MHD_Result replied;
  if (session_handle_open(req, id, &h, &replied) < 0)
    return replied;
  char *snapshot = NULL;
  struct cordon_error *err = NULL;
  int r = cordon_session_snapshot(h.s, &snapshot, &err);
  json_t *out = r == 0 ? json_pack("{s:s, s:s}", "session", h.s->id, "snapshot", snapshot) : NULL;
  free(snapshot);
  session_handle_clear(&h);
  return r < 0 ? reply_cordon_error(req, err) : reply_json(req, 200, out);
}

enum MHD_Result route_session_shutdown(struct request *req, const char *id) {
  struct session_handle h;
  enum MHD_Result replied;
  if (session_handle_open(req, id, &h, &replied) < 0)
    return replied;
  struct cordon_error *err = NULL;
  int r = cordon_session_shutdown(h.s, &err);
  json_t *out = r == 0 ? json_pack("{s:s, s:b}", "id", h.s->id, "shut_down", 1) : NULL;
  session_handle_clear(&h);
  return r < 0 ? reply_cordon_error(req, err) : reply_json(req, 200, out);
}
