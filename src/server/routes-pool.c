/* The pool dispatch queue through `cordon serve` (issue 23, item 5): submit a dispatch to a
 * registered pool and read where it stands. Workers (`cordon worker run`) claim and run it as
 * they do a dispatch that `cordon pool submit` queued: this is the same queue. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "pool/pool.h"
#include "pool/queue.h"
#include "server/server.h"

/* POST /v1/pools/NAME/dispatches  {"argv": [...], "recipe": {...}} (recipe optional; when given
 * it must name the pool). */
enum MHD_Result route_pool_submit(struct request *req, const char *pool) {
  enum MHD_Result replied = MHD_NO;
  json_auto_t *doc = request_json(req, &replied);
  if (!doc)
    return replied;
  json_t *argv_json = json_object_get(doc, "argv"), *recipe = json_object_get(doc, "recipe");
  const char *key;
  json_t *value;
  json_object_foreach(doc, key, value) {
    if (strcmp(key, "argv") && strcmp(key, "recipe"))
      return reply_error(req, 400, "bad_dispatch", "unknown member '%s'", key);
  }
  size_t n = json_array_size(argv_json);
  if (!json_is_array(argv_json) || n == 0 || n > POOL_DISPATCH_ARGV_MAX)
    return reply_error(req, 400, "bad_dispatch", "argv: a non-empty array of strings (at most %u)",
                       POOL_DISPATCH_ARGV_MAX);
  _cleanup_free_ const char **argv = calloc(n + 1, sizeof(char *));
  if (!argv)
    return reply_error(req, 500, "internal", "out of memory");
  for (size_t i = 0; i < n; i++)
    if (!(argv[i] = json_string_value(json_array_get(argv_json, i))))
      return reply_error(req, 400, "bad_dispatch", "argv[%zu]: not a string", i);
  if (recipe && json_is_null(recipe))
    recipe = NULL;
  if (recipe) {
    const char *named = json_string_value(json_object_get(recipe, "pool"));
    if (!json_is_object(recipe) || !named)
      return reply_error(req, 400, "bad_dispatch", "recipe: an object naming its pool");
    if (strcmp(named, pool))
      return reply_error(req, 400, "bad_dispatch", "the recipe names pool %s, not %s", named, pool);
  }
  struct cordon_error *err = NULL;
  struct cordon_context *ctx = NULL;
  struct pool_manifest m = {0};
  struct pool_dispatch d = {0};
  /* The pool must exist now: a dispatch for no pool would wait forever. */
  if (server_context(req->srv, &ctx, &err) < 0 || pool_lookup(ctx, pool, &m, &err) < 0 ||
      pool_queue_submit(cordon_context_state_dir(ctx), pool, recipe, argv, &d, &err) < 0) {
    pool_manifest_clear(&m);
    cordon_context_free(ctx);
    return reply_cordon_error(req, err);
  }
  replied = reply_json(req, 201, json_pack("{s:s, s:s}", "dispatch_id", d.id, "pool", pool));
  pool_dispatch_clear(&d);
  pool_manifest_clear(&m);
  cordon_context_free(ctx);
  return replied;
}

/* GET /v1/pools/NAME/dispatches?id=ID: {"dispatch_id", "pool", "state", "result"?}. */
enum MHD_Result route_pool_dispatch(struct request *req, const char *pool) {
  const char *id = request_query(req, "id");
  if (!id)
    return reply_error(req, 400, "bad_request", "give the dispatch as ?id=ID");
  struct cordon_error *err = NULL;
  struct cordon_context *ctx = NULL;
  enum pool_dispatch_state state;
  json_t *result = NULL;
  if (server_context(req->srv, &ctx, &err) < 0 ||
      pool_queue_status(cordon_context_state_dir(ctx), pool, id, &state, &result, &err) < 0) {
    cordon_context_free(ctx);
    return reply_cordon_error(req, err);
  }
  cordon_context_free(ctx);
  if (state == POOL_DISPATCH_UNKNOWN)
    return reply_error(req, 404, "not_found", "no dispatch %s in pool %s", id, pool);
  json_t *out = json_pack("{s:s, s:s, s:s}", "dispatch_id", id, "pool", pool, "state",
                          pool_dispatch_state_name(state));
  if (result)
    json_object_set_new(out, "result", result);
  return reply_json(req, 200, out);
}
