/* The routes of `cordon serve` that are not a session's (docs/api.md): backends, snapshots
 * (take, show, export as a tar stream, import), receipt and audit verification, metrics, the
 * install key's JWKS and liveness. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "server/metrics.h"
#include "server/server.h"

enum MHD_Result route_healthz(struct request *req, const char *unused) {
  return reply_json(req, 200, json_pack("{s:s}", "status", "ok"));
}

enum MHD_Result route_jwks(struct request *req, const char *unused) {
  if (!req->srv->jwks)
    return reply_error(req, 404, "no_key", "there is no install key yet (cordon key init)");
  return reply_bytes(req, 200, "application/json", req->srv->jwks, strlen(req->srv->jwks));
}

enum MHD_Result route_metrics(struct request *req, const char *unused) {
  _cleanup_free_ char *text = metrics_render(req->srv->metrics);
  if (!text)
    return reply_error(req, 500, "internal", "out of memory");
  return reply_bytes(req, 200, "text/plain; version=0.0.4; charset=utf-8", text, strlen(text));
}

static json_t *names_json(uint32_t mask, unsigned count, const char *(*name)(unsigned bit)) {
  json_t *list = json_array();
  for (unsigned i = 0; i < count; i++)
    if (mask & (1u << i))
      json_array_append_new(list, json_string(name(1u << i)));
  return list;
}

static const char *capability_name(unsigned bit) {
  return cordon_capability_name((enum cordon_capability)bit);
}

static const char *feature_name(unsigned bit) {
  return cordon_feature_name((enum cordon_policy_feature)bit);
}

enum MHD_Result route_backends(struct request *req, const char *unused) {
  const struct cordon_registry *reg = req->srv->reg;
  const char *default_name = cordon_registry_default_name();
  json_t *list = json_array();
  for (size_t i = 0; i < cordon_registry_count(reg); i++) {
    const struct cordon_registry_entry *e = cordon_registry_entry(reg, i);
    const struct cordon_backend *b = e->backend;
    char *reason = NULL;
    int available = b ? b->available(b, &reason) == 1 : 0;
    const char *why = b ? (available ? NULL : reason ? reason : "unavailable") : e->load_error;
    json_t *o = json_pack("{s:s, s:s, s:b, s:b}", "name", e->name, "origin", e->origin, "available",
                          available, "default", strcmp(e->name, default_name) == 0);
    if (b) {
      json_object_set_new(o, "tier", json_string(cordon_tier_name(b->tier)));
      json_object_set_new(
          o, "capabilities",
          names_json(cordon_backend_capabilities(b), CORDON_CAP_COUNT, capability_name));
      json_object_set_new(o, "enforces",
                          names_json(b->enforces, CORDON_FEATURE_COUNT, feature_name));
      json_object_set_new(o, "summary", json_string(b->summary ? b->summary : ""));
    }
    if (why)
      json_object_set_new(o, b ? "unavailable_reason" : "load_error", json_string(why));
    json_array_append_new(list, o);
    free(reason);
  }
  return reply_json(req, 200, json_pack("{s:o}", "backends", list));
}

/* ---- snapshots ---------------------------------------------------------------------------- */

struct store_handle {
  struct cordon_context *ctx;
  struct cordon_cas *cas;
};

static void store_handle_clear(struct store_handle *h) {
  cordon_cas_close(h->cas);
  cordon_context_free(h->ctx);
  memset(h, 0, sizeof(*h));
}

static int store_open(struct request *req, struct store_handle *h, struct cordon_error **err) {
  memset(h, 0, sizeof(*h));
  if (server_context(req->srv, &h->ctx, err) < 0 ||
      cordon_cas_open_project(h->ctx, &h->cas, err) < 0) {
    store_handle_clear(h);
    return -1;
  }
  return 0;
}

enum MHD_Result route_snapshot_take(struct request *req, const char *unused) {
  enum MHD_Result replied = MHD_NO;
  json_t *doc = request_json(req, &replied);
  if (!doc)
    return replied;
  const char *path = json_string_value(json_object_get(doc, "path"));
  if (!path || json_object_size(doc) != 1 || path[0] != '/') {
    json_decref(doc);
    return reply_error(req, 400, "bad_request", "the body must be {\"path\": ABSOLUTE_DIR}");
  }
  /* A host directory of the server's choosing: only an admin may name one. */
  if (!jwt_scope_allows(req->scopes, JWT_SCOPE_ADMIN)) {
    json_decref(doc);
    return reply_error(req, 403, "forbidden", "snapshotting a host directory needs scope admin");
  }
  struct store_handle h;
  struct cordon_error *err = NULL;
  char id[CORDON_DIGEST_HEX_SIZE];
  struct cordon_snapshot_stats stats = {0};
  int r = store_open(req, &h, &err);
  if (r == 0)
    r = cordon_snapshot_take(h.cas, path, NULL, id, &stats, &err);
  store_handle_clear(&h);
  json_decref(doc);
  if (r < 0)
    return reply_cordon_error(req, err);
  return reply_json(req, 201,
                    json_pack("{s:s, s:I, s:I, s:I}", "snapshot", id, "entries",
                              (json_int_t)stats.entries, "files", (json_int_t)stats.files, "bytes",
                              (json_int_t)stats.bytes));
}

enum MHD_Result route_snapshot_show(struct request *req, const char *given) {
  struct store_handle h;
  struct cordon_error *err = NULL;
  _cleanup_free_ char *id = NULL;
  struct cordon_snapshot_entry *entries = NULL;
  size_t count = 0;
  if (store_open(req, &h, &err) < 0 || cordon_snapshot_resolve_id(h.cas, given, &id, &err) < 0 ||
      cordon_snapshot_entries(h.cas, id, &entries, &count, &err) < 0) {
    store_handle_clear(&h);
    return reply_cordon_error(req, err);
  }
  store_handle_clear(&h);
  json_t *list = json_array();
  for (size_t i = 0; i < count; i++) {
    const struct cordon_snapshot_entry *e = &entries[i];
    char kind[2] = {(char)e->kind, 0}, mode[8];
    snprintf(mode, sizeof(mode), "%04o", e->mode & 07777);
    json_t *o = json_pack("{s:s#, s:s, s:s, s:I}", "path", e->path, (int)e->path_length, "kind",
                          kind, "mode", mode, "size", (json_int_t)e->size);
    if (!o) /* a path that is not UTF-8 */
      o = json_pack("{s:n, s:s, s:s, s:I}", "path", "kind", kind, "mode", mode, "size",
                    (json_int_t)e->size);
    if (e->digest[0])
      json_object_set_new(o, "digest", json_string(e->digest));
    if (e->target)
      json_object_set_new(o, "target", json_string(e->target));
    json_array_append_new(list, o);
  }
  cordon_snapshot_entries_free(entries, count);
  return reply_json(req, 200, json_pack("{s:s, s:o}", "snapshot", id, "entries", list));
}

/* An export streams the canonical tar image as it is written: a thread writes it into a pipe
 * that the reply reads. A client that goes away closes the pipe, which stops the writer. */
struct export_stream {
  struct store_handle store;
  char *id;
  int pipe[2];
  pthread_t thread;
};

static void *export_thread(void *data) {
  struct export_stream *ex = data;
  struct cordon_error *err = NULL;
  if (cordon_snapshot_export(ex->store.cas, ex->id, ex->pipe[1], NULL, &err) < 0)
    cordon_error_free(err); /* the image then ends without its end-of-archive marker */
  close(ex->pipe[1]);
  ex->pipe[1] = -1;
  return NULL;
}

static ssize_t export_read(void *cls, uint64_t pos, char *buf, size_t max) {
  struct export_stream *ex = cls;
  for (;;) {
    ssize_t n = read(ex->pipe[0], buf, max);
    if (n > 0)
      return n;
    if (n == 0)
      return MHD_CONTENT_READER_END_OF_STREAM;
    if (errno != EINTR)
      return MHD_CONTENT_READER_END_WITH_ERROR;
  }
}

static void export_free(void *cls) {
  struct export_stream *ex = cls;
  close(ex->pipe[0]);
  pthread_join(ex->thread, NULL);
  store_handle_clear(&ex->store);
  free(ex->id);
  free(ex);
}

enum MHD_Result route_snapshot_export(struct request *req, const char *given) {
  struct export_stream *ex = calloc(1, sizeof(*ex));
  if (!ex)
    return MHD_NO;
  struct cordon_error *err = NULL;
  if (store_open(req, &ex->store, &err) < 0 ||
      cordon_snapshot_resolve_id(ex->store.cas, given, &ex->id, &err) < 0) {
    store_handle_clear(&ex->store);
    free(ex);
    return reply_cordon_error(req, err);
  }
  /* The snapshot must exist before the 200 goes out: a missing one is a 404, not a torn tar. */
  struct cordon_snapshot_entry *entries = NULL;
  size_t count = 0;
  if (cordon_snapshot_entries(ex->store.cas, ex->id, &entries, &count, &err) < 0 ||
      pipe2(ex->pipe, O_CLOEXEC) < 0) {
    if (!err)
      cordon_error_set(&err, CORDON_ERR_SYSTEM, errno, "pipe");
    store_handle_clear(&ex->store);
    free(ex->id);
    free(ex);
    return reply_cordon_error(req, err);
  }
  cordon_snapshot_entries_free(entries, count);
  if (pthread_create(&ex->thread, NULL, export_thread, ex) != 0) {
    close(ex->pipe[0]);
    close(ex->pipe[1]);
    store_handle_clear(&ex->store);
    free(ex->id);
    free(ex);
    return reply_error(req, 500, "internal", "cannot start the export");
  }
  struct MHD_Response *r =
      MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, export_read, ex, export_free);
  if (!r) {
    export_free(ex);
    return MHD_NO;
  }
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/x-tar");
  enum MHD_Result ret = MHD_queue_response(req->conn, 200, r);
  MHD_destroy_response(r);
  return ret;
}

enum MHD_Result route_snapshot_import(struct request *req, const char *unused) {
  /* The body (bounded) goes through a memory file: import reads an fd. */
  _cleanup_close_ int fd = memfd_create("cordon-import", MFD_CLOEXEC);
  if (fd < 0 || fs_write_all(fd, req->body ? req->body : "", req->length) < 0 ||
      lseek(fd, 0, SEEK_SET) < 0)
    return reply_error(req, 500, "internal", "memfd: %s", strerror(errno));
  struct store_handle h;
  struct cordon_error *err = NULL;
  char id[CORDON_DIGEST_HEX_SIZE];
  int r = store_open(req, &h, &err);
  if (r == 0)
    r = cordon_snapshot_import(h.cas, fd, NULL, id, &err);
  store_handle_clear(&h);
  if (r < 0) {
    /* A refused archive is the client's: 400, whatever the library calls it. */
    if (err && (err->kind == CORDON_ERR_INVALID || err->kind == CORDON_ERR_DENIED))
      err->kind = CORDON_ERR_INVALID;
    return reply_cordon_error(req, err);
  }
  return reply_json(req, 201, json_pack("{s:s}", "snapshot", id));
}

/* ---- verification ------------------------------------------------------------------------- */

enum MHD_Result route_receipt_verify(struct request *req, const char *unused) {
  if (!req->length)
    return reply_error(req, 400, "bad_request", "the body must be the receipt document");
  const char *kid = request_query(req, "expected_keyid");
  struct store_handle h;
  struct cordon_error *err = NULL;
  struct cordon_receipt_report report = {0};
  int r = store_open(req, &h, &err);
  if (r == 0)
    r = cordon_receipt_verify(h.cas, req->body, req->length, kid && *kid ? kid : NULL, &report,
                              &err);
  store_handle_clear(&h);
  if (r < 0)
    return reply_cordon_error(req, err);
  json_t *out = json_pack(
      "{s:s, s:b, s:s?, s:s?, s:s?, s:s?, s:I}", "verdict", cordon_verdict_name(report.verdict),
      "verified", report.verdict == CORDON_VERDICT_VERIFIED, "reason", report.reason, "kid",
      report.kid[0] ? report.kid : NULL, "base", report.base[0] ? report.base : NULL,
      "winner_snapshot", report.winner_snapshot[0] ? report.winner_snapshot : NULL, "candidates",
      (json_int_t)report.n_candidates);
  cordon_receipt_report_clear(&report);
  return reply_json(req, 200, out);
}

enum MHD_Result route_audit_verify(struct request *req, const char *unused) {
  struct cordon_context *ctx = NULL;
  struct cordon_audit_log *log = NULL;
  struct cordon_error *err = NULL;
  struct cordon_audit_report report = {0};
  int r = server_context(req->srv, &ctx, &err);
  if (r == 0)
    r = cordon_audit_open_project(ctx, NULL, &log, &err);
  if (r == 0)
    r = cordon_audit_verify(log, &report, &err);
  cordon_audit_close(log);
  cordon_context_free(ctx);
  if (r < 0)
    return reply_cordon_error(req, err);
  json_t *out = json_pack("{s:b, s:s, s:I, s:I, s:s, s:s?, s:s?}", "intact",
                          report.problem == CORDON_AUDIT_OK, "problem",
                          cordon_audit_problem_name(report.problem), "entries",
                          (json_int_t)report.entries, "segments", (json_int_t)report.segments,
                          "head", report.head, "file", report.file, "reason", report.reason);
  if (report.problem != CORDON_AUDIT_OK) {
    json_object_set_new(out, "line", json_integer((json_int_t)report.line));
    json_object_set_new(out, "entry", json_integer((json_int_t)report.entry));
  }
  cordon_audit_report_clear(&report);
  return reply_json(req, 200, out);
}
