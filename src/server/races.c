/* The race routes of `cordon serve`: POST /v1/races starts cordon_race_run on a thread of its
 * own and answers at once with the race's id; GET /v1/races/ID reports each candidate's phase
 * as the race's observer sees it, then the outcome; GET /v1/races/ID/receipt gives the signed
 * receipt once it is written (.cordon/serve-races/ID.json). Races live as long as the server;
 * stopping it interrupts those still running (cordon_interrupt) and waits for them. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "server/races.h"
#include "server/server.h"

#define RACES_DIR "serve-races"
#define RACE_ID_BYTES 8

struct race {
  struct race *next;
  char id[2 * RACE_ID_BYTES + 1];
  struct server *srv;
  json_t *doc; /* the request: the options' strings point into it */
  const char **argv, **judge, **read_only, **hidden, **protect;
  char *base;
  char *receipt_path;
  const struct cordon_backend *backend;
  unsigned k;
  double timeout;
  bool allow_no_pass;
  pthread_t thread;
  /* Under races.lock: */
  enum cordon_race_phase *phases;
  bool done;
  bool failed;
  char *error;
  json_t *outcome;
};

struct races {
  pthread_mutex_t lock;
  struct race *list;
};

struct races *races_new(void) {
  struct races *r = calloc(1, sizeof(*r));
  if (r)
    pthread_mutex_init(&r->lock, NULL);
  return r;
}

static void race_free(struct race *race) {
  json_decref(race->doc);
  free(race->argv);
  free(race->judge);
  free(race->read_only);
  free(race->hidden);
  free(race->protect);
  free(race->base);
  free(race->receipt_path);
  free(race->phases);
  free(race->error);
  json_decref(race->outcome);
  free(race);
}

void races_free(struct races *r) {
  if (!r)
    return;
  bool running = false;
  for (struct race *race = r->list; race; race = race->next) {
    pthread_mutex_lock(&r->lock);
    running |= !race->done;
    pthread_mutex_unlock(&r->lock);
  }
  if (running)
    cordon_interrupt(); /* the server stops: running races stop and undo what they made */
  while (r->list) {
    struct race *race = r->list;
    r->list = race->next;
    pthread_join(race->thread, NULL);
    race_free(race);
  }
  pthread_mutex_destroy(&r->lock);
  free(r);
}

static void observe(void *data, const struct cordon_race_event *event) {
  struct race *race = data;
  pthread_mutex_lock(&race->srv->races->lock);
  if (event->index < race->k)
    race->phases[event->index] = event->phase;
  pthread_mutex_unlock(&race->srv->races->lock);
}

static void *race_thread(void *data) {
  struct race *race = data;
  struct cordon_error *err = NULL;
  struct cordon_context *ctx = NULL;
  struct cordon_race_result res = {0};
  struct cordon_race_observer observer = {observe, race};
  struct cordon_race_options o = {
      .base = race->base,
      .k = race->k,
      .backend = race->backend,
      .argv = race->argv,
      .judge_argv = race->judge,
      .out_path = race->receipt_path,
      .timeout = race->timeout,
      .actor = "cordon-serve",
      .observer = &observer,
      .allow_no_pass = race->allow_no_pass,
      .read_only = race->read_only,
      .hidden = race->hidden,
      .protect = race->protect,
  };
  int r = server_context(race->srv, &ctx, &err);
  if (r == 0)
    r = cordon_race_run(ctx, &o, &res, &err);
  json_t *outcome = NULL;
  if (r == 0) {
    json_t *candidates = json_array();
    for (size_t i = 0; i < res.n_candidates; i++) {
      const struct cordon_race_candidate *c = &res.candidates[i];
      json_array_append_new(candidates,
                            json_pack("{s:s, s:s?, s:i, s:b, s:f, s:s?}", "task_id", c->task_id,
                                      "snapshot", c->snapshot[0] ? c->snapshot : NULL, "exit_code",
                                      c->outcome.exit_code, "timed_out", c->outcome.timed_out,
                                      "closeness", c->closeness, "failure", c->failure));
    }
    const struct cordon_race_candidate *w = res.no_pass ? NULL : &res.candidates[res.winner];
    outcome = json_pack("{s:s?, s:s?, s:b, s:s, s:o}", "winner", w ? w->task_id : NULL,
                        "winner_snapshot", w ? w->snapshot : NULL, "no_pass", res.no_pass,
                        "receipt_sha256", res.receipt_sha256, "candidates", candidates);
  }
  cordon_race_result_clear(&res);
  cordon_context_free(ctx);
  pthread_mutex_lock(&race->srv->races->lock);
  race->done = true;
  race->failed = r < 0;
  race->outcome = outcome;
  if (r < 0)
    race->error = strdup(err && err->message ? err->message : "race failed");
  pthread_mutex_unlock(&race->srv->races->lock);
  cordon_error_free(err);
  return NULL;
}

/* An optional list of strings as a NULL-terminated vector pointing into doc. */
static int strings(json_t *doc, const char *key, bool required, const char ***out) {
  json_t *v = json_object_get(doc, key);
  if (!v || json_is_null(v))
    return required ? -1 : 0;
  if (!json_is_array(v) || (required && !json_array_size(v)))
    return -1;
  const char **list = calloc(json_array_size(v) + 1, sizeof(*list));
  if (!list)
    return -1;
  size_t i;
  json_t *item;
  json_array_foreach(v, i, item) {
    if (!json_is_string(item)) {
      free(list);
      return -1;
    }
    list[i] = json_string_value(item);
  }
  *out = list;
  return 0;
}

static const char *parse_race(json_t *doc, struct race *race) {
  static const char *const keys[] = {
      "base",          "k",         "argv",   "backend", "judge", "timeout_seconds",
      "allow_no_pass", "read_only", "hidden", "protect", NULL};
  const char *key;
  json_t *value;
  json_object_foreach(doc, key, value) {
    size_t i = 0;
    while (keys[i] && strcmp(keys[i], key))
      i++;
    if (!keys[i])
      return "unknown field (base, k, argv, backend, judge, timeout_seconds, allow_no_pass, "
             "read_only, hidden, protect)";
  }
  json_t *k = json_object_get(doc, "k");
  if (!json_is_string(json_object_get(doc, "base")))
    return "'base' (a snapshot id) is required";
  if (!json_is_integer(k) || json_integer_value(k) < 1 || json_integer_value(k) > CORDON_RACE_MAX_K)
    return "'k' must be an integer from 1 to the most candidates a race takes";
  race->k = (unsigned)json_integer_value(k);
  if (strings(doc, "argv", true, &race->argv) < 0)
    return "'argv' must be a non-empty list of strings";
  if (strings(doc, "judge", false, &race->judge) < 0 ||
      strings(doc, "read_only", false, &race->read_only) < 0 ||
      strings(doc, "hidden", false, &race->hidden) < 0 ||
      strings(doc, "protect", false, &race->protect) < 0)
    return "'judge', 'read_only', 'hidden' and 'protect' must be lists of strings";
  json_t *timeout = json_object_get(doc, "timeout_seconds");
  if (timeout && (!json_is_number(timeout) || json_number_value(timeout) < 0))
    return "'timeout_seconds' must be a non-negative number";
  race->timeout = timeout ? json_number_value(timeout) : 0;
  json_t *allow = json_object_get(doc, "allow_no_pass");
  if (allow && !json_is_boolean(allow))
    return "'allow_no_pass' must be true or false";
  race->allow_no_pass = json_is_true(allow);
  json_t *backend = json_object_get(doc, "backend");
  if (backend && !json_is_string(backend))
    return "'backend' must be a string";
  return NULL;
}

enum MHD_Result route_race_start(struct request *req, const char *unused) {
  enum MHD_Result replied = MHD_NO;
  json_t *doc = request_json(req, &replied);
  if (!doc)
    return replied;
  struct race *race = calloc(1, sizeof(*race));
  if (!race) {
    json_decref(doc);
    return reply_error(req, 500, "internal", "out of memory");
  }
  race->doc = doc;
  race->srv = req->srv;
  const char *why = parse_race(doc, race);
  if (why) {
    race_free(race);
    return reply_error(req, 400, "bad_race", "%s", why);
  }
  struct cordon_error *err = NULL;
  struct cordon_context *ctx = NULL;
  struct cordon_cas *cas = NULL;
  const char *backend = json_string_value(json_object_get(doc, "backend"));
  _cleanup_free_ char *hex = NULL, *dir = NULL;
  int r = cordon_registry_find(req->srv->reg, backend ? backend : cordon_registry_default_name(),
                               &race->backend, &err);
  if (r == 0)
    r = server_context(req->srv, &ctx, &err);
  if (r == 0)
    r = cordon_cas_open_project(ctx, &cas, &err);
  if (r == 0)
    r = cordon_snapshot_resolve_id(cas, json_string_value(json_object_get(doc, "base")),
                                   &race->base, &err);
  cordon_cas_close(cas);
  cordon_context_free(ctx);
  if (r == 0 && (fs_random_hex(RACE_ID_BYTES, &hex, &err) < 0 ||
                 asprintf(&dir, "%s/%s", req->srv->state_dir, RACES_DIR) < 0 ||
                 fs_mkdir_p(dir, 0755, &err) < 0 ||
                 asprintf(&race->receipt_path, "%s/%s.json", dir, hex) < 0))
    r = cordon_error_set(&err, CORDON_ERR_SYSTEM, err ? 0 : ENOMEM, "race");
  race->phases = r == 0 ? calloc(race->k, sizeof(*race->phases)) : NULL;
  if (r < 0 || !race->phases) {
    race_free(race);
    return err ? reply_cordon_error(req, err) : reply_error(req, 500, "internal", "out of memory");
  }
  snprintf(race->id, sizeof(race->id), "%s", hex);
  if (pthread_create(&race->thread, NULL, race_thread, race) != 0) {
    race_free(race);
    return reply_error(req, 500, "internal", "cannot start the race's thread");
  }
  struct races *races = req->srv->races;
  pthread_mutex_lock(&races->lock);
  race->next = races->list;
  races->list = race;
  pthread_mutex_unlock(&races->lock);
  return reply_json(req, 202,
                    json_pack("{s:s, s:s, s:s, s:i}", "id", race->id, "status", "running", "base",
                              race->base, "k", race->k));
}

/* The race `id` names, or NULL after replying 404. Its fields are read under the lock. */
static struct race *race_find(struct request *req, const char *id, enum MHD_Result *replied) {
  struct races *races = req->srv->races;
  pthread_mutex_lock(&races->lock);
  struct race *race = races->list;
  while (race && strcmp(race->id, id))
    race = race->next;
  pthread_mutex_unlock(&races->lock);
  if (!race)
    *replied = reply_error(req, 404, "not_found", "no such race '%s'", id);
  return race;
}

enum MHD_Result route_race_status(struct request *req, const char *id) {
  enum MHD_Result replied = MHD_NO;
  struct race *race = race_find(req, id, &replied);
  if (!race)
    return replied;
  struct races *races = req->srv->races;
  pthread_mutex_lock(&races->lock);
  json_t *phases = json_array();
  for (unsigned i = 0; i < race->k; i++)
    json_array_append_new(phases, json_string(cordon_race_phase_name(race->phases[i])));
  json_t *out = json_pack("{s:s, s:s, s:s, s:i, s:o}", "id", race->id, "status",
                          !race->done    ? "running"
                          : race->failed ? "failed"
                                         : "done",
                          "base", race->base, "k", race->k, "phases", phases);
  if (race->error)
    json_object_set_new(out, "error", json_string(race->error));
  if (race->outcome)
    json_object_update(out, race->outcome);
  pthread_mutex_unlock(&races->lock);
  return reply_json(req, 200, out);
}

enum MHD_Result route_race_receipt(struct request *req, const char *id) {
  enum MHD_Result replied = MHD_NO;
  struct race *race = race_find(req, id, &replied);
  if (!race)
    return replied;
  struct races *races = req->srv->races;
  pthread_mutex_lock(&races->lock);
  bool done = race->done, failed = race->failed;
  pthread_mutex_unlock(&races->lock);
  if (!done)
    return reply_error(req, 409, "race_running", "race %s is still running", id);
  if (failed)
    return reply_error(req, 404, "not_found", "race %s failed: it has no receipt", id);
  unsigned char *data = NULL;
  size_t length = 0;
  struct cordon_error *err = NULL;
  if (fs_read_file(race->receipt_path, CORDON_DOCUMENT_MAX, &data, &length, &err) < 0)
    return reply_cordon_error(req, err);
  replied = reply_bytes(req, 200, "application/json", data, length);
  free(data);
  return replied;
}
