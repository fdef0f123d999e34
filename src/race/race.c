/* Fork-and-race (include/cordon/race.h): K candidates resumed from one base snapshot, the same
 * command in each, their terminal snapshots scored and ranked, and the choice sealed in a
 * signed selection receipt that is appended to the audit chain.
 *
 * The pure parts (the change between two manifests, the score vector, the receipt body) are
 * kept apart from the effects (sessions, threads, files). Work happens in two phases so that a
 * candidate that cannot start stops the race before any command runs: first every session is
 * resumed (one batch, cordon_session_resume_many: all or none), then every command runs; each
 * phase is a pool of at most one thread per core pulling candidate indices. Only the generic
 * session API is used, so any backend that declares SNAPSHOT can race. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include <cordon/audit.h>
#include <cordon/keys.h>
#include <cordon/race.h>
#include <cordon/receipt.h>
#include <cordon/session.h>
#include <cordon/snapshot.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/strv-json.h"
#include "crypto/digest.h"
#include "crypto/jcs.h"
#include "race/cost.h"
#include "race/logs.h"
#include "race/protect.h"
#include "race/inputs.h"

/* ---- the change between two manifests (pure) ---------------------------------------------- */

static int compare_entry_paths(const void *pa, const void *pb) {
  const struct cordon_snapshot_entry *a = *(const struct cordon_snapshot_entry *const *)pa;
  const struct cordon_snapshot_entry *b = *(const struct cordon_snapshot_entry *const *)pb;
  size_t n = a->path_length < b->path_length ? a->path_length : b->path_length;
  int c = memcmp(a->path, b->path, n);
  if (c)
    return c;
  return a->path_length < b->path_length ? -1 : a->path_length > b->path_length;
}

static uint64_t content_bytes(const struct cordon_snapshot_entry *e) {
  if (e->kind == CORDON_SNAPSHOT_FILE)
    return e->size;
  if (e->kind == CORDON_SNAPSHOT_SYMLINK && e->target)
    return strlen(e->target);
  return 0;
}

static const struct cordon_snapshot_entry **sorted_view(const struct cordon_snapshot_entry *e,
                                                        size_t n) {
  const struct cordon_snapshot_entry **v = calloc(n ? n : 1, sizeof(*v));
  if (!v)
    return NULL;
  for (size_t i = 0; i < n; i++)
    v[i] = &e[i];
  qsort(v, n, sizeof(*v), compare_entry_paths);
  return v;
}

/* Walk the two manifests in path order; with cas, also measure what the cost rule counts. */
static int change_walk(struct cordon_cas *cas, const struct cordon_snapshot_entry *base,
                       size_t n_base, const struct cordon_snapshot_entry *terminal,
                       size_t n_terminal, struct cordon_race_change *out,
                       struct cordon_error **err) {
  memset(out, 0, sizeof(*out));
  /* Manifests come sorted, but their order is the snapshot module's business: sort views here
   * so the merge below depends only on the bytes of the paths. */
  _cleanup_free_ const struct cordon_snapshot_entry **a = sorted_view(base, n_base);
  _cleanup_free_ const struct cordon_snapshot_entry **b = sorted_view(terminal, n_terminal);
  if (!a || !b)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "snapshot change");
  out->base_entries = n_base;
  out->content_measured = cas != NULL;
  size_t i = 0, j = 0;
  while (i < n_base || j < n_terminal) {
    int c = i == n_base ? 1 : j == n_terminal ? -1 : compare_entry_paths(&a[i], &b[j]);
    const struct cordon_snapshot_entry *was = NULL, *now = NULL;
    if (c < 0) {
      out->removed++;
      out->bytes_removed += content_bytes(was = a[i++]);
    } else if (c > 0) {
      out->added++;
      out->bytes_added += content_bytes(now = b[j++]);
    } else {
      if (!race_entry_same(a[i], b[j])) {
        out->modified++;
        out->bytes_removed += content_bytes(was = a[i]);
        out->bytes_added += content_bytes(now = b[j]);
      }
      i++;
      j++;
    }
    if (cas && (was || now) && race_cost_measure(cas, was, now, out, err) < 0)
      return -1;
  }
  return 0;
}

int cordon_race_change_compute(const struct cordon_snapshot_entry *base, size_t n_base,
                               const struct cordon_snapshot_entry *terminal, size_t n_terminal,
                               struct cordon_race_change *out, struct cordon_error **err) {
  return change_walk(NULL, base, n_base, terminal, n_terminal, out, err);
}

int cordon_race_change_measure(struct cordon_cas *cas, const struct cordon_snapshot_entry *base,
                               size_t n_base, const struct cordon_snapshot_entry *terminal,
                               size_t n_terminal, struct cordon_race_change *out,
                               struct cordon_error **err) {
  if (!cas)
    return cordon_error_set(err, CORDON_ERR_INVALID, EINVAL, "snapshot change: no store");
  return change_walk(cas, base, n_base, terminal, n_terminal, out, err);
}

void cordon_race_score(struct cordon_race_outcome *o) {
  bool passed = o->exit_code == 0 && !o->timed_out;
  if (o->judged) {
    bool judged_ok = o->judge_exit_code == 0 && !o->judge_timed_out;
    o->correctness = ((passed ? 1.0 : 0.0) + (judged_ok ? 1.0 : 0.0)) / 2;
  } else {
    o->correctness = passed ? 1.0 : 0.0;
  }
  const struct cordon_race_change *c = &o->change;
  if (c->content_measured)
    o->cost = (double)(c->added + c->removed + c->meta_changed) + (double)c->lines_changed +
              (double)c->bytes_changed;
  else
    o->cost = (double)(c->added + c->removed + c->modified) + (double)c->bytes_added +
              (double)c->bytes_removed;
  uint64_t touched = c->removed + c->modified;
  if (c->base_entries == 0)
    o->reversibility = 1.0;
  else if (touched >= c->base_entries)
    o->reversibility = 0.0;
  else
    o->reversibility = (double)(c->base_entries - touched) / (double)c->base_entries;
}

const char *cordon_race_phase_name(enum cordon_race_phase phase) {
  switch (phase) {
  case CORDON_RACE_WAITING: return "waiting";
  case CORDON_RACE_STARTING: return "starting";
  case CORDON_RACE_READY: return "ready";
  case CORDON_RACE_RUNNING: return "running";
  case CORDON_RACE_SNAPSHOT: return "snapshot";
  case CORDON_RACE_JUDGING: return "judging";
  case CORDON_RACE_DONE: return "done";
  case CORDON_RACE_FAILED: return "failed";
  case CORDON_RACE_CANCELLED: return "cancelled";
  }
  return "unknown";
}

/* The manifest every session of a race starts from: the caller's (run's options), else the
 * defaults; sealed in the receipt ("manifest"). */
static struct cordon_manifest effective_manifest(const struct cordon_race_options *o) {
  struct cordon_manifest m = {0};
  if (o->manifest) {
    m = *o->manifest;
  } else {
    /* No policy asked for: the backend's own default egress (loopback on ns and docker, open on
     * worktree). */
    m.policy.egress = cordon_backend_default_egress(o->backend);
    m.policy.require_enforcement = true;
  }
  m.ephemeral = true;
  m.one_shot = true;
  if (o->fsize_bytes)
    m.policy.limits.fsize_bytes = o->fsize_bytes;
  return m;
}

/* ---- the receipt body (pure) --------------------------------------------------------------- */

static json_t *outcome_json(const struct cordon_race_outcome *o) {
  json_t *j =
      json_pack("{s:I, s:b}", "exit_code", (json_int_t)o->exit_code, "timed_out", o->timed_out);
  if (j && o->judged &&
      (json_object_set_new(j, "judge_exit_code", json_integer(o->judge_exit_code)) < 0 ||
       json_object_set_new(j, "judge_timed_out", json_boolean(o->judge_timed_out)) < 0)) {
    json_decref(j);
    return NULL;
  }
  return j;
}

static json_t *change_json(const struct cordon_race_change *c) {
  json_t *j = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "added", (json_int_t)c->added,
                        "base_entries", (json_int_t)c->base_entries, "bytes_added",
                        (json_int_t)c->bytes_added, "bytes_removed", (json_int_t)c->bytes_removed,
                        "modified", (json_int_t)c->modified, "removed", (json_int_t)c->removed);
  /* What the cost rule measured (a receipt's cost is derived from these). */
  if (j && c->content_measured &&
      (json_object_set_new(j, "bytes_changed", json_integer((json_int_t)c->bytes_changed)) < 0 ||
       json_object_set_new(j, "lines_changed", json_integer((json_int_t)c->lines_changed)) < 0 ||
       json_object_set_new(j, "meta_changed", json_integer((json_int_t)c->meta_changed)) < 0)) {
    json_decref(j);
    return NULL;
  }
  return j;
}

/* "protected_paths", when the race has any: the lists as normalised (the same function as
 * the race's own, so the receipt names exactly what was enforced and compared). */
static int protected_paths_json(const struct cordon_race_options *o, json_t *body,
                                struct cordon_error **err) {
  struct race_protect p;
  if (race_protect_init(&p, o->read_only, o->hidden, o->protect, err) < 0)
    return -1;
  int r = 0;
  if (race_protect_any(&p) &&
      json_object_set_new(body, "protected_paths", race_protect_json(&p)) < 0)
    r = cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "receipt");
  race_protect_clear(&p);
  return r;
}

/* What the race gave its sessions, by digest: "manifest" always, "inputs" when a candidate had
 * its own. */
static int receipt_inputs(json_t *body, const struct cordon_race_options *o) {
  struct cordon_manifest m = effective_manifest(o);
  json_t *inputs = NULL;
  if (json_object_set_new(body, "manifest", race_manifest_receipt(&m)) < 0 ||
      race_inputs_receipt(o->inputs, o->k, &inputs) < 0)
    return -1;
  return inputs ? json_object_set_new(body, "inputs", inputs) : 0;
}

/* The body without its signer: everything in it is a function of the inputs and the results,
 * nothing of the clock, the host or this run. */
static int receipt_body(const char *base, const struct cordon_race_options *o,
                        const struct cordon_rank_profile *profile,
                        const struct cordon_race_candidate *c, size_t n, size_t winner, char **out,
                        struct cordon_error **err) {
  _cleanup_free_ char *profile_text = NULL;
  if (cordon_rank_profile_to_json(profile, &profile_text, err) < 0)
    return -1;
  json_t *profile_json = NULL;
  if (jcs_parse(profile_text, strlen(profile_text), 0, "ranking profile", &profile_json, err) < 0)
    return -1;
  json_t *candidates = json_array(), *losers = json_array();
  /* No candidate passed (winner == n): "winner": null, and every candidate is a loser. */
  bool no_pass = winner >= n;
  json_t *winner_json = no_pass ? json_null()
                                : json_pack("{s:s, s:s}", "snapshot", c[winner].snapshot, "task_id",
                                            c[winner].task_id);
  json_t *body =
      json_pack("{s:s, s:o, s:o, s:o, s:s, s:o, s:s, s:o}", "base", base, "candidates", candidates,
                "command", strv_to_json(o->argv), "losers", losers, "outcome",
                no_pass ? CORDON_RACE_OUTCOME_NO_PASS : CORDON_RACE_OUTCOME_WINNER, "profile",
                profile_json, "type", CORDON_RECEIPT_TYPE, "winner", winner_json);
  if (!body)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "receipt");
  /* Only when asked for, so a race run the default way keeps the receipt it always had, and a
   * verifier sees that a non-passing candidate was allowed to win. */
  if (o->allow_no_pass && json_object_set_new(body, "allow_no_pass", json_true()) < 0)
    goto oom;
  if (o->judge_argv && o->judge_argv[0] &&
      json_object_set_new(body, "judge", strv_to_json(o->judge_argv)) < 0)
    goto oom;
  if (protected_paths_json(o, body, err) < 0) {
    json_decref(body);
    return -1;
  }
  if (receipt_inputs(body, o) < 0)
    goto oom;
  const char *tier = cordon_tier_name(o->backend->tier);
  json_t *failed = NULL;
  for (size_t i = 0; i < n; i++) {
    if (c[i].failure) {
      /* Scored as failed: not ranked, named with its reason (fixed text, nothing of the host). */
      if ((!failed &&
           (!(failed = json_array()) || json_object_set_new(body, "failed", failed) < 0)) ||
          json_array_append_new(
              failed, json_pack("{s:s, s:s}", "reason", c[i].failure, "task_id", c[i].task_id)) < 0)
        goto oom;
      continue;
    }
    const struct cordon_race_outcome *x = &c[i].outcome;
    json_t *entry = json_pack("{s:s, s:o, s:f, s:s, s:o, s:{s:f, s:f, s:f}, s:s, s:s}", "backend",
                              o->backend->name, "change", change_json(&x->change), "closeness",
                              c[i].closeness, "isolation_tier", tier, "outcome", outcome_json(x),
                              "scores", CORDON_SCORE_CORRECTNESS, x->correctness, CORDON_SCORE_COST,
                              x->cost, CORDON_SCORE_REVERSIBILITY, x->reversibility, "snapshot",
                              c[i].snapshot, "task_id", c[i].task_id);
    if (!entry || json_array_append_new(candidates, entry) < 0)
      goto oom;
    /* The digests of what the command and the judge printed (race/logs.c). */
    if (json_object_set_new(entry, "logs", race_logs_json(c[i].logs)) < 0)
      goto oom;
    if (i != winner &&
        json_array_append_new(losers, json_pack("{s:s, s:s}", "snapshot", c[i].snapshot, "task_id",
                                                c[i].task_id)) < 0)
      goto oom;
  }
  int r = jcs_dump(body, out, NULL, err);
  json_decref(body);
  return r;
oom:
  json_decref(body);
  return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "receipt");
}

/* ---- checks made before anything runs ---------------------------------------------------- */

static bool known_axis(const char *name) {
  return !strcmp(name, CORDON_SCORE_CORRECTNESS) || !strcmp(name, CORDON_SCORE_COST) ||
         !strcmp(name, CORDON_SCORE_REVERSIBILITY);
}

/* The receipt is written by rename into its directory: that directory must exist and take a
 * new file (probed with an unnamed temp file, which also catches a read-only mount where
 * access(2) would say yes to root), and the path itself must not be a directory. */
static int check_out_path(const char *path, struct cordon_error **err) {
  if (!path || !*path)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "no receipt path (--out) given");
  struct stat st;
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
    return cordon_error_set(err, CORDON_ERR_USAGE, EISDIR, "receipt %s", path);
  _cleanup_free_ char *copy = strdup(path);
  if (!copy)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "receipt %s", path);
  char *slash = strrchr(copy, '/');
  const char *dir = slash ? (slash == copy ? "/" : (*slash = 0, copy)) : ".";
  if (stat(dir, &st) < 0)
    return cordon_error_set(err, CORDON_ERR_USAGE, errno, "receipt %s: directory %s", path, dir);
  if (!S_ISDIR(st.st_mode))
    return cordon_error_set(err, CORDON_ERR_USAGE, ENOTDIR, "receipt %s: %s", path, dir);
  int fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
  if (fd >= 0) {
    close(fd);
    return 0;
  }
  int e = errno;
  if (e == EOPNOTSUPP || e == EISDIR || e == EINVAL) /* no O_TMPFILE on this filesystem */
    e = access(dir, W_OK | X_OK) == 0 ? 0 : errno;
  if (e)
    return cordon_error_set(err, CORDON_ERR_DENIED, e, "receipt %s: cannot write in %s", path, dir);
  return 0;
}

static int check_options(const struct cordon_race_options *o,
                         const struct cordon_rank_profile *profile, struct cordon_error **err) {
  if (!o->base || !cordon_digest_valid(o->base))
    return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                            "--base '%s' is not a snapshot id (64 lowercase hex digits)",
                            o->base ? o->base : "");
  if (o->k < 1 || o->k > CORDON_RACE_MAX_K)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "K must be between 1 and %u, not %u",
                            CORDON_RACE_MAX_K, o->k);
  if (!o->argv || !o->argv[0] || !*o->argv[0])
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "no command to race");
  if (!o->backend)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "no backend");
  if (!(o->backend->capabilities & CORDON_CAP_SNAPSHOT) || !o->backend->resume ||
      !o->backend->snapshot)
    return cordon_error_set(err, CORDON_ERR_UNSUPPORTED, 0,
                            "backend %s does not declare SNAPSHOT: it cannot fork candidates "
                            "from a snapshot",
                            o->backend->name);
  if (o->backend->available) {
    _cleanup_free_ char *reason = NULL;
    if (o->backend->available(o->backend, &reason) != 1)
      return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0, "backend %s is not available: %s",
                              o->backend->name, reason ? reason : "unknown reason");
  }
  if (o->log_limit > CORDON_RACE_LOG_MAX_LIMIT)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "the log limit is at most %u bytes",
                            CORDON_RACE_LOG_MAX_LIMIT);
  if (!isfinite(o->timeout) || o->timeout < 0)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "the timeout must be >= 0 seconds");
  if (cordon_rank_profile_check(profile, err) < 0)
    return -1;
  for (size_t j = 0; j < profile->n_axes; j++)
    if (!known_axis(profile->axes[j].name))
      return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                              "ranking profile: a race scores correctness, cost and "
                              "reversibility, not \"%s\"",
                              profile->axes[j].name);
  return check_out_path(o->out_path, err);
}

/* ---- running the candidates ---------------------------------------------------------------- */

struct race;

struct slot {
  struct race *race;
  size_t index;
  char task_id[CORDON_RACE_TASK_ID_MAX];
  struct cordon_session *session;
  char *snapshot;
  struct cordon_race_outcome outcome;
  enum cordon_race_phase phase;
  const char *failure; /* CORDON_RACE_FAILURE_*: scored as failed */
  char failure_detail[256];
  char *judge_snapshot; /* the judge's tree (protected paths from the base); NULL: snapshot */
  struct cordon_race_log logs[CORDON_RACE_LOG_STREAMS]; /* moved to the result at the end */
};

struct race {
  struct cordon_context *ctx;
  const struct cordon_race_options *o;
  const struct cordon_snapshot_entry *base_entries;
  size_t n_base;
  struct cordon_race_change unchanged; /* the change of a candidate whose tree is the base */
  struct slot *slots;
  size_t k;
  pthread_mutex_t mu;
  size_t next;
  bool stop;
  struct cordon_error *first_error; /* the original failure, reported as it is */
  int (*step)(struct slot *s, struct cordon_error **err);
  struct race_protect protect; /* the options' protected lists, normalised */
};

static void announce_locked(struct slot *s, enum cordon_race_phase phase) {
  s->phase = phase;
  const struct cordon_race_observer *ob = s->race->o->observer;
  if (ob && ob->update) {
    struct cordon_race_event ev = {s->index, s->task_id, phase,
                                   phase == CORDON_RACE_DONE ? &s->outcome : NULL};
    ob->update(ob->data, &ev);
  }
}

static void announce(struct slot *s, enum cordon_race_phase phase) {
  pthread_mutex_lock(&s->race->mu);
  announce_locked(s, phase);
  pthread_mutex_unlock(&s->race->mu);
}

static bool stopping(struct race *r) {
  pthread_mutex_lock(&r->mu);
  bool stop = r->stop || cordon_interrupted();
  pthread_mutex_unlock(&r->mu);
  return stop;
}

/* One batch of start_all: which slots its sessions are (its index i is slot slot_of[i]). */
struct start_batch {
  struct race *race;
  const size_t *slot_of;
};

static void start_progress(void *data, size_t index, struct cordon_session *ready) {
  struct start_batch *g = data;
  announce(&g->race->slots[g->slot_of[index]], ready ? CORDON_RACE_READY : CORDON_RACE_STARTING);
}

/* The manifest of every session of a race, candidates and judges alike (same limits, same
 * network). Ephemeral: the race destroys its sessions itself, so their state needs no fsync.
 * One-shot: a candidate's session runs its command only; a judge runs in a session of its own. */
static struct cordon_manifest race_manifest(const struct race *r) {
  return effective_manifest(r->o);
}

/* Whether candidate i has files or a patch to place in its workspace before its command (its
 * environment goes with the command). */
static bool places_input(const struct cordon_race_options *o, size_t i) {
  return o->inputs && (o->inputs[i].n_files || o->inputs[i].patch);
}

/* Resume the n sessions of slots slot_of[0..n) with manifest m; all or none. */
static int start_group(struct race *r, const struct cordon_manifest *m, const size_t *slot_of,
                       size_t n, struct cordon_error **err) {
  struct start_batch g = {r, slot_of};
  struct cordon_session_batch batch = {
      .count = n, .jobs = r->o->jobs, .progress = start_progress, .data = &g};
  _cleanup_free_ struct cordon_session **sessions = calloc(n, sizeof(*sessions));
  if (!sessions)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "race");
  if (cordon_session_resume_many(r->ctx, r->o->backend, m, r->o->base, &batch, sessions, err) < 0) {
    if (batch.failed_index < n) {
      struct slot *failed = &r->slots[slot_of[batch.failed_index]];
      cordon_error_prefix(err, "%s cannot start", failed->task_id);
      announce(failed, CORDON_RACE_FAILED);
    }
    return -1;
  }
  for (size_t i = 0; i < n; i++)
    r->slots[slot_of[i]].session = sessions[i];
  return 0;
}

/* Every candidate is forked from the base as batches of sessions (the library's
 * cordon_session_resume_many, as `cordon session create --count` does): all of them, or none,
 * with the first failure reported. Two batches at most: a candidate with files or a patch of
 * its own has them written into its workspace before its command, so its sandbox cannot be a
 * one-shot one (ns builds an overlay fork's merged view with the command: nothing to write into
 * before); the others stay one-shot, the cheaper start. */
static int start_all(struct race *r, struct cordon_error **err) {
  struct cordon_manifest one_shot = race_manifest(r);
  /* Only the candidates' sandboxes: the judge sees the hidden paths (its tree holds them). */
  one_shot.policy.read_only = (const char *const *)r->protect.read_only;
  one_shot.policy.hidden = (const char *const *)r->protect.hidden;
  struct cordon_manifest placed = one_shot;
  placed.one_shot = false;
  _cleanup_free_ size_t *slot_of = calloc(r->k, sizeof(*slot_of));
  if (!slot_of)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "race");
  /* slot_of: the one-shot slots, then the placed ones, each in index order. */
  size_t n = 0;
  for (size_t i = 0; i < r->k; i++)
    if (!places_input(r->o, i))
      slot_of[n++] = i;
  size_t n_one_shot = n;
  for (size_t i = 0; i < r->k; i++)
    if (places_input(r->o, i))
      slot_of[n++] = i;
  size_t n_placed = n - n_one_shot;
  int ret = 0;
  if (n_one_shot)
    ret = start_group(r, &one_shot, slot_of, n_one_shot, err);
  if (ret == 0 && n_placed)
    ret = start_group(r, &placed, slot_of + n_one_shot, n_placed, err);
  /* On failure none of the race runs: the caller destroys the first batch's sessions when the
   * second failed (destroy_all). */
  for (size_t i = 0; ret < 0 && i < r->k; i++)
    if (r->slots[i].phase == CORDON_RACE_STARTING || r->slots[i].phase == CORDON_RACE_READY)
      announce(&r->slots[i], CORDON_RACE_CANCELLED);
  return ret;
}

/* The command's or the judge's (first: which of the slot's logs), its output kept as logs. */
static int exec_in(struct slot *s, struct cordon_session *session, const char *const *argv,
                   const char *const *env, enum cordon_race_log_stream first,
                   struct cordon_exec_result *res, struct cordon_error **err) {
  struct race *r = s->race;
  struct cordon_exec_request req = {
      .argv = argv,
      .env = env,
      .timeout = r->o->timeout > 0 ? r->o->timeout : -1,
  };
  size_t limit = r->o->log_limit ? (size_t)r->o->log_limit : CORDON_RACE_LOG_DEFAULT_LIMIT;
  return race_exec_logged(session, &req, limit, r->o->output, s->index, first, &s->logs[first], res,
                          err);
}

/* A candidate that cannot be scored (what it left cannot be snapshotted, or judged): recorded
 * as failed with a fixed reason and the error's text, alone; the others go on. */
static int fail_candidate(struct slot *s, const char *reason, struct cordon_error *e) {
  s->failure = reason;
  snprintf(s->failure_detail, sizeof(s->failure_detail), "%s: %s", s->task_id,
           e && e->message ? e->message : reason);
  cordon_error_free(e);
  struct cordon_session *session = steal_ptr(&s->session);
  if (session) {
    struct cordon_error *ignored = NULL;
    cordon_session_destroy(session, &ignored);
    cordon_error_free(ignored);
  }
  announce(s, CORDON_RACE_FAILED);
  return 0;
}

/* The judge runs on what the candidate shipped, its terminal snapshot, in a fresh session of
 * the same backend resumed from it: none of the candidate's processes, /tmp, environment or
 * root file system changes reach it. The session is destroyed after the judge. */
static int judge(struct slot *s, const char *const *env, struct cordon_error **err) {
  struct race *r = s->race;
  struct cordon_manifest m = race_manifest(r);
  struct cordon_session *session = NULL;
  struct cordon_error *e = NULL;
  const char *tree = s->judge_snapshot ? s->judge_snapshot : s->snapshot;
  if (cordon_session_resume(r->ctx, r->o->backend, &m, tree, &session, &e) < 0) {
    if (!e || stopping(r) || e->kind == CORDON_ERR_INTERRUPTED) {
      if (!e)
        return cordon_error_set(err, CORDON_ERR_SYSTEM, 0, "%s: judge's session", s->task_id);
      *err = e;
      return -1;
    }
    return fail_candidate(s, CORDON_RACE_FAILURE_JUDGE_SANDBOX, e);
  }
  struct cordon_exec_result res = {0};
  int rc = exec_in(s, session, r->o->judge_argv, env, CORDON_RACE_LOG_JUDGE_STDOUT, &res, err);
  if (rc == 0) {
    s->outcome.judged = true;
    s->outcome.judge_exit_code = res.exit_code;
    s->outcome.judge_timed_out = res.timed_out;
  }
  cordon_exec_result_clear(&res);
  struct cordon_error *destroy_err = NULL;
  if (cordon_session_destroy(session, rc < 0 ? &destroy_err : err) < 0 && rc == 0)
    rc = cordon_error_prefix(err, "%s: destroy the judge's session", s->task_id);
  cordon_error_free(destroy_err);
  return rc < 0 ? cordon_error_prefix(err, "%s: judge", s->task_id) : 0;
}

static int terminal_change(struct slot *s, struct cordon_error **err) {
  /* The base itself (a candidate that changed nothing): same id, same tree, nothing to load. */
  if (strcmp(s->snapshot, s->race->o->base) == 0) {
    s->outcome.change = s->race->unchanged;
    return 0;
  }
  struct cordon_cas *cas = NULL;
  struct cordon_snapshot_entry *entries = NULL;
  size_t n = 0;
  int r = -1;
  if (cordon_cas_open_project(s->race->ctx, &cas, err) == 0 &&
      cordon_snapshot_entries(cas, s->snapshot, &entries, &n, err) == 0)
    r = cordon_race_change_measure(cas, s->race->base_entries, s->race->n_base, entries, n,
                                   &s->outcome.change, err);
  cordon_snapshot_entries_free(entries, n);
  cordon_cas_close(cas);
  return r;
}

/* Protected paths: a candidate whose tree differs from the base under one fails, alone (the
 * judge never runs on it); otherwise the judge's tree is stored: the candidate's entries
 * outside the protected paths and the base's under them, so what the judge reads there
 * (tests, a hidden evaluator) is the base's whatever the candidate saw or did. */
static int check_protected(struct slot *s, struct cordon_error **err) {
  struct race *r = s->race;
  struct cordon_cas *cas = NULL;
  struct cordon_snapshot_entry *entries = NULL;
  const struct cordon_snapshot_entry **tree = NULL;
  size_t n = 0, n_tree = 0;
  int ret = -1;
  if (cordon_cas_open_project(r->ctx, &cas, err) < 0 ||
      cordon_snapshot_entries(cas, s->snapshot, &entries, &n, err) < 0)
    goto out;
  const char *changed =
      race_protect_first_change(&r->protect, r->base_entries, r->n_base, entries, n);
  if (changed) {
    struct cordon_error *why = NULL;
    cordon_error_set(&why, CORDON_ERR_DENIED, 0, "changed the protected path %s",
                     *changed ? changed : ".");
    ret = fail_candidate(s, CORDON_RACE_FAILURE_PROTECTED, why);
    goto out;
  }
  if (r->o->judge_argv && r->o->judge_argv[0]) {
    char id[CORDON_DIGEST_HEX_SIZE];
    if (race_protect_compose(&r->protect, r->base_entries, r->n_base, entries, n, &tree, &n_tree,
                             err) < 0 ||
        race_protect_store(cas, tree, n_tree, id, err) < 0)
      goto out;
    /* The same tree as the candidate's (nothing to restore): one snapshot, one ref. */
    if (strcmp(id, s->snapshot) && !(s->judge_snapshot = strdup(id))) {
      cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "%s", s->task_id);
      goto out;
    }
  }
  ret = 0;
out:
  free(tree);
  cordon_snapshot_entries_free(entries, n);
  cordon_cas_close(cas);
  return ret;
}

/* The judge's tree is the race's own work, not a result: its ref goes once the judge is done
 * (its blobs are the base's and the candidate's, which stay). err NULL: after another error. */
static int forget_judge_tree(struct slot *s, struct cordon_error **err) {
  _cleanup_free_ char *id = steal_ptr(&s->judge_snapshot);
  if (!id || !strcmp(id, s->race->o->base))
    return 0;
  struct cordon_cas *cas = NULL;
  struct cordon_error *ignored = NULL, **e = err ? err : &ignored;
  int r = cordon_cas_open_project(s->race->ctx, &cas, e);
  if (r == 0)
    r = cordon_snapshot_forget(cas, id, e);
  cordon_cas_close(cas);
  cordon_error_free(ignored);
  return err ? r : 0;
}

/* The candidate's own environment, then its index (which it cannot override). */
static const char **candidate_env(const struct cordon_race_inputs *in, const char *index_var) {
  size_t n = 0;
  while (in && in->env && in->env[n])
    n++;
  const char **env = calloc(n + 2, sizeof(*env));
  for (size_t i = 0; env && i < n; i++)
    env[i] = in->env[i];
  if (env)
    env[n] = index_var;
  return env;
}

/* Command, terminal snapshot, judge. The snapshot is taken before the judge runs, and the judge
 * runs in a session of its own resumed from it (see judge()), so what the judge leaves behind
 * (test logs, caches) is not part of the candidate's result and nothing the candidate left
 * outside its tree reaches the judge. */
static int run_step(struct slot *s, struct cordon_error **err) {
  struct race *r = s->race;
  char index_var[64], exit_var[64];
  snprintf(index_var, sizeof(index_var), "CORDON_CANDIDATE_INDEX=%zu", s->index);
  struct cordon_exec_result res = {0};
  announce(s, CORDON_RACE_RUNNING);
  const struct cordon_race_inputs *in = r->o->inputs ? &r->o->inputs[s->index] : NULL;
  const char *reason = NULL;
  char detail[192];
  int placed = race_inputs_place(s->session, in, &reason, detail, sizeof(detail), err);
  if (placed < 0)
    return cordon_error_prefix(err, "%s", s->task_id);
  if (placed > 0) {
    struct cordon_error *why = NULL;
    cordon_error_set(&why, CORDON_ERR_INVALID, 0, "%s: %s", reason, detail);
    return fail_candidate(s, reason, why);
  }
  _cleanup_free_ const char **env = candidate_env(in, index_var);
  if (!env)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "%s", s->task_id);
  if (exec_in(s, s->session, r->o->argv, env, CORDON_RACE_LOG_STDOUT, &res, err) < 0)
    return cordon_error_prefix(err, "%s", s->task_id);
  s->outcome.exit_code = res.exit_code;
  s->outcome.timed_out = res.timed_out;
  cordon_exec_result_clear(&res);
  if (stopping(r))
    return 0;
  announce(s, CORDON_RACE_SNAPSHOT);
  s->session->max_snapshot_bytes = r->o->max_snapshot_bytes;
  struct cordon_error *snap_err = NULL;
  if (cordon_session_snapshot(s->session, &s->snapshot, &snap_err) < 0) {
    if (snap_err && snap_err->kind == CORDON_ERR_INTERRUPTED) {
      *err = snap_err;
      return -1;
    }
    /* What this candidate left cannot be snapshotted (a tree the walker refuses): it fails,
     * alone. */
    return fail_candidate(s, CORDON_RACE_FAILURE_SNAPSHOT, snap_err);
  }
  if (terminal_change(s, err) < 0)
    return cordon_error_prefix(err, "%s: terminal snapshot %s", s->task_id, s->snapshot);
  if (race_protect_any(&r->protect) && check_protected(s, err) < 0)
    return cordon_error_prefix(err, "%s: protected paths", s->task_id);
  if (s->failure)
    return 0;
  /* Done with the candidate's session: its snapshot is in the store; free the workspace now
   * rather than hold K of them until the end (and before the judge: it never sees it). */
  struct cordon_session *session = steal_ptr(&s->session);
  if (cordon_session_destroy(session, err) < 0)
    return cordon_error_prefix(err, "%s: destroy", s->task_id);
  if (r->o->judge_argv && r->o->judge_argv[0]) {
    if (stopping(r))
      return 0;
    announce(s, CORDON_RACE_JUDGING);
    snprintf(exit_var, sizeof(exit_var), "CORDON_CANDIDATE_EXIT_CODE=%d", s->outcome.exit_code);
    const char *const judge_env[] = {index_var, exit_var, NULL};
    int judged = judge(s, judge_env, err);
    if (forget_judge_tree(s, judged < 0 ? NULL : err) < 0 || judged < 0)
      return -1;
    if (s->failure)
      return 0;
  }
  cordon_race_score(&s->outcome);
  announce(s, CORDON_RACE_DONE);
  return 0;
}

static void *worker(void *arg) {
  struct race *r = arg;
  for (;;) {
    pthread_mutex_lock(&r->mu);
    /* Interrupted: every candidate's exec is being killed; no further step starts, and the
     * race fails (no receipt) once the running ones have returned. */
    if (!r->stop && cordon_interrupted()) {
      r->stop = true;
      if (!r->first_error)
        cordon_error_set(&r->first_error, CORDON_ERR_INTERRUPTED, 0, "interrupted");
    }
    if (r->stop || r->next >= r->k) {
      pthread_mutex_unlock(&r->mu);
      return NULL;
    }
    struct slot *s = &r->slots[r->next++];
    pthread_mutex_unlock(&r->mu);
    struct cordon_error *e = NULL;
    if (r->step(s, &e) < 0) {
      pthread_mutex_lock(&r->mu);
      r->stop = true;
      if (!r->first_error)
        r->first_error = steal_ptr(&e);
      announce_locked(s, CORDON_RACE_FAILED);
      pthread_mutex_unlock(&r->mu);
      cordon_error_free(e);
    }
  }
}

static unsigned online_cores(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (unsigned)n : 1;
}

/* Run step on every slot with a pool of threads; < 0 with the first failure. */
static int run_phase(struct race *r, int (*step)(struct slot *, struct cordon_error **),
                     struct cordon_error **err) {
  r->step = step;
  r->next = 0;
  unsigned jobs = r->o->jobs ? r->o->jobs : online_cores();
  if (jobs > r->k)
    jobs = (unsigned)r->k;
  pthread_t threads[CORDON_RACE_MAX_K];
  unsigned started = 0;
  /* The calling thread is a worker too, so a race never depends on creating threads. */
  for (unsigned t = 1; t < jobs; t++) {
    if (pthread_create(&threads[started], NULL, worker, r) != 0)
      break;
    started++;
  }
  worker(r);
  for (unsigned t = 0; t < started; t++)
    pthread_join(threads[t], NULL);
  if (!r->first_error)
    return 0;
  for (size_t i = 0; i < r->k; i++)
    if (r->slots[i].phase != CORDON_RACE_FAILED && r->slots[i].phase != CORDON_RACE_DONE &&
        r->slots[i].phase != CORDON_RACE_WAITING)
      announce(&r->slots[i], CORDON_RACE_CANCELLED);
  if (err && !*err)
    *err = steal_ptr(&r->first_error);
  return -1;
}

/* Destroy whatever sessions are still alive; teardown errors after a failure are secondary to
 * the one being reported. */
static void destroy_all(struct race *r) {
  for (size_t i = 0; i < r->k; i++) {
    struct cordon_session *s = steal_ptr(&r->slots[i].session);
    if (s) {
      struct cordon_error *ignored = NULL;
      cordon_session_destroy(s, &ignored);
      cordon_error_free(ignored);
    }
  }
}

/* ---- sealing: rank, sign, audit, write ---------------------------------------------------- */

/* Pure: what makes a candidate eligible to win. */
bool cordon_race_outcome_passed(const struct cordon_race_outcome *o) {
  if (o->exit_code != 0 || o->timed_out)
    return false;
  return !o->judged || (o->judge_exit_code == 0 && !o->judge_timed_out);
}

static int compare_task_ids(const void *a, const void *b) {
  return strcmp(((const struct cordon_race_candidate *)a)->task_id,
                ((const struct cordon_race_candidate *)b)->task_id);
}

/* Rank the candidates that can win: those that were scored and, unless allow_no_pass, passed
 * (cordon_race_outcome_passed). The others keep closeness 0 and never win: a candidate that
 * ran but failed is listed with its scores in the receipt, not ranked, so it cannot move the
 * ideal point the passing ones are measured against. No candidate that can win: *winner is
 * n_all (no pass), an error only with allow_no_pass (nothing scored at all, as before). */
static int rank(const struct cordon_rank_profile *profile, struct cordon_race_candidate *c,
                size_t n_all, bool allow_no_pass, size_t *winner, struct cordon_error **err) {
  _cleanup_free_ struct cordon_rank_candidate *in = calloc(n_all, sizeof(*in));
  _cleanup_free_ struct cordon_rank_score *scores =
      calloc(n_all * profile->n_axes, sizeof(*scores));
  _cleanup_free_ size_t *of = calloc(n_all, sizeof(*of));
  if (!in || !scores || !of)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "ranking");
  size_t n = 0;
  for (size_t all = 0; all < n_all; all++) {
    c[all].closeness = 0;
    if (!c[all].failure && (allow_no_pass || cordon_race_outcome_passed(&c[all].outcome)))
      of[n++] = all;
  }
  if (n == 0 && !allow_no_pass) {
    *winner = n_all;
    return 0;
  }
  if (n == 0)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "no candidate could be scored (%s)",
                            c[0].failure_detail);
  for (size_t i = 0; i < n; i++) {
    struct cordon_rank_score *row = scores + i * profile->n_axes;
    for (size_t j = 0; j < profile->n_axes; j++) {
      const char *axis = profile->axes[j].name;
      row[j].axis = axis;
      const struct cordon_race_outcome *x = &c[of[i]].outcome;
      row[j].value = !strcmp(axis, CORDON_SCORE_CORRECTNESS) ? x->correctness
                     : !strcmp(axis, CORDON_SCORE_COST)      ? x->cost
                                                             : x->reversibility;
    }
    in[i] = (struct cordon_rank_candidate){c[of[i]].task_id, row, profile->n_axes};
  }
  struct cordon_rank_result *results = NULL;
  if (cordon_rank_topsis(profile, in, n, &results, err) < 0)
    return -1;
  for (size_t i = 0; i < n; i++)
    c[of[results[i].input_index]].closeness = results[i].closeness;
  *winner = of[results[0].input_index];
  cordon_rank_results_free(results, n);
  return 0;
}

static int audit_receipt(struct cordon_context *ctx, const struct cordon_race_options *o,
                         struct cordon_race_result *res, struct cordon_error **err) {
  json_t *receipt = NULL;
  if (jcs_parse(res->receipt, res->receipt_length - 1, CORDON_DOCUMENT_MAX, "receipt", &receipt,
                err) < 0)
    return -1;
  /* No pass: the entry names the base as its subject (no winner snapshot exists) and
   * "winner": null, so the chain records the failed race as it does a won one. */
  const struct cordon_race_candidate *w = res->no_pass ? NULL : &res->candidates[res->winner];
  json_t *details = json_pack(
      "{s:s, s:I, s:s, s:o, s:s, s:o}", "base", o->base, "k", (json_int_t)res->n_candidates,
      "outcome", res->no_pass ? CORDON_RACE_OUTCOME_NO_PASS : CORDON_RACE_OUTCOME_WINNER, "receipt",
      receipt, "receipt_sha256", res->receipt_sha256, "winner",
      w ? json_string(w->task_id) : json_null());
  _cleanup_free_ char *details_text = NULL;
  if (!details || jcs_dump(details, &details_text, NULL, err) < 0) {
    json_decref(details);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "audit entry");
  }
  json_decref(details);
  char uid_actor[32];
  snprintf(uid_actor, sizeof(uid_actor), "uid:%u", (unsigned)geteuid());
  struct cordon_audit_event ev = {"race.select", o->actor && *o->actor ? o->actor : uid_actor,
                                  "snapshot", w ? w->snapshot : o->base, details_text};
  struct cordon_audit_options ao = {.key_dir = o->key_dir};
  struct cordon_audit_log *log = NULL;
  if (cordon_audit_open_project(ctx, &ao, &log, err) < 0)
    return -1;
  /* One append: the lock serialises it against every other writer, so concurrent races
   * extend one chain. */
  int r = cordon_audit_append(log, &ev, res->audit_hmac, err);
  cordon_audit_close(log);
  return r < 0 ? cordon_error_prefix(err, "audit") : 0;
}

/* A copy under <project>/.cordon/receipts keeps the snapshots it names from `cas gc` even
 * once their refs are forgotten, and lists the project's receipts in one place. */
static int keep_receipt(struct cordon_context *ctx, const struct cordon_race_result *res,
                        struct cordon_error **err) {
  _cleanup_free_ char *dir = NULL, *path = NULL;
  if (asprintf(&dir, "%s/receipts", cordon_context_state_dir(ctx)) < 0 ||
      asprintf(&path, "%s/%s.json", dir, res->receipt_sha256) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "receipt");
  if (fs_mkdir_p(dir, 0700, err) < 0)
    return -1;
  return fs_write_atomic(path, res->receipt, res->receipt_length, 0644, err);
}

static int seal(struct cordon_context *ctx, const struct cordon_race_options *o,
                const struct cordon_rank_profile *profile, const struct cordon_signing_key *key,
                struct cordon_race_result *res, struct cordon_error **err) {
  qsort(res->candidates, res->n_candidates, sizeof(*res->candidates), compare_task_ids);
  if (rank(profile, res->candidates, res->n_candidates, o->allow_no_pass, &res->winner, err) < 0)
    return -1;
  res->no_pass = res->winner >= res->n_candidates;
  _cleanup_free_ char *body = NULL;
  if (receipt_body(o->base, o, profile, res->candidates, res->n_candidates, res->winner, &body,
                   err) < 0)
    return -1;
  if (cordon_document_sign(key, body, strlen(body), &res->receipt, &res->receipt_length, err) < 0)
    return -1;
  if (crypto_sha256_hex(res->receipt, res->receipt_length, res->receipt_sha256, err) < 0)
    return -1;
  /* The chain first: should writing the file fail afterwards, the chain still holds the whole
   * receipt; the other way round a receipt could exist that the chain never saw. */
  if (audit_receipt(ctx, o, res, err) < 0)
    return -1;
  if (keep_receipt(ctx, res, err) < 0)
    return -1;
  if (fs_write_atomic(o->out_path, res->receipt, res->receipt_length, 0644, err) < 0)
    return cordon_error_prefix(err, "receipt");
  return 0;
}

void cordon_race_result_clear(struct cordon_race_result *result) {
  if (!result)
    return;
  for (size_t i = 0; result->candidates && i < result->n_candidates; i++)
    for (int l = 0; l < CORDON_RACE_LOG_STREAMS; l++)
      race_log_clear(&result->candidates[i].logs[l]);
  free(result->candidates);
  free(result->receipt);
  memset(result, 0, sizeof(*result));
}

int cordon_race_run(struct cordon_context *ctx, const struct cordon_race_options *o,
                    struct cordon_race_result *result, struct cordon_error **err) {
  memset(result, 0, sizeof(*result));
  /* The profile sealed in the receipt names the cost rule its costs were measured by. */
  struct cordon_rank_profile measured_profile =
      *(o->profile ? o->profile : cordon_rank_default_profile());
  measured_profile.cost_rule = CORDON_COST_RULE;
  const struct cordon_rank_profile *profile = &measured_profile;
  if (check_options(o, profile, err) < 0)
    return -1;
  struct race_protect protect;
  if (race_protect_init(&protect, o->read_only, o->hidden, o->protect, err) < 0)
    return -1;
  struct cordon_signing_key *key = NULL;
  if (cordon_signing_key_load(o->key_dir, &key, err) < 0) {
    race_protect_clear(&protect);
    return cordon_error_prefix(err, "the receipt's signing key");
  }
  struct cordon_cas *cas = NULL;
  struct cordon_snapshot_entry *base_entries = NULL;
  size_t n_base = 0;
  struct race r = {.ctx = ctx, .o = o, .k = o->k, .protect = protect};
  int ret = -1;
  if (cordon_cas_open_project(ctx, &cas, err) < 0)
    goto out;
  /* Reading the base's manifest proves it is a snapshot in this store (the manifest is
   * verified against its id) and gives the entries every candidate is compared with. */
  if (cordon_snapshot_entries(cas, o->base, &base_entries, &n_base, err) < 0) {
    cordon_error_prefix(err, "--base %s is not a snapshot in the store", o->base);
    goto out;
  }
  r.base_entries = base_entries;
  r.n_base = n_base;
  if (cordon_race_change_measure(cas, base_entries, n_base, base_entries, n_base, &r.unchanged,
                                 err) < 0)
    goto out;
  pthread_mutex_init(&r.mu, NULL);
  r.slots = calloc(r.k, sizeof(*r.slots));
  result->candidates = calloc(r.k, sizeof(*result->candidates));
  if (!r.slots || !result->candidates) {
    cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "race");
    goto out_mutex;
  }
  for (size_t i = 0; i < r.k; i++) {
    r.slots[i].race = &r;
    r.slots[i].index = i;
    snprintf(r.slots[i].task_id, sizeof(r.slots[i].task_id), "candidate-%zu", i);
    announce(&r.slots[i], CORDON_RACE_WAITING);
  }
  if (start_all(&r, err) < 0 || run_phase(&r, run_step, err) < 0) {
    destroy_all(&r);
    goto out_mutex;
  }
  if (cordon_interrupted()) { /* after the last step: nothing is sealed */
    cordon_error_set(err, CORDON_ERR_INTERRUPTED, 0, "interrupted");
    destroy_all(&r);
    goto out_mutex;
  }
  result->n_candidates = r.k;
  for (size_t i = 0; i < r.k; i++) {
    struct cordon_race_candidate *c = &result->candidates[i];
    memcpy(c->task_id, r.slots[i].task_id, sizeof(c->task_id));
    c->index = i;
    snprintf(c->snapshot, sizeof(c->snapshot), "%s",
             r.slots[i].snapshot && !r.slots[i].failure ? r.slots[i].snapshot : "");
    c->outcome = r.slots[i].outcome;
    c->failure = r.slots[i].failure;
    memcpy(c->failure_detail, r.slots[i].failure_detail, sizeof(c->failure_detail));
    memcpy(c->logs, r.slots[i].logs, sizeof(c->logs)); /* the result owns them now */
    memset(r.slots[i].logs, 0, sizeof(r.slots[i].logs));
  }
  if (seal(ctx, o, profile, key, result, err) < 0)
    goto out_mutex;
  ret = 0;
out_mutex:
  pthread_mutex_destroy(&r.mu);
out:
  for (size_t i = 0; r.slots && i < r.k; i++) {
    free(r.slots[i].snapshot);
    free(r.slots[i].judge_snapshot);
    for (int l = 0; l < CORDON_RACE_LOG_STREAMS; l++)
      race_log_clear(&r.slots[i].logs[l]);
  }
  race_protect_clear(&r.protect);
  free(r.slots);
  cordon_error_free(r.first_error);
  cordon_snapshot_entries_free(base_entries, n_base);
  cordon_cas_close(cas);
  cordon_signing_key_free(key);
  if (ret < 0)
    cordon_race_result_clear(result);
  return ret;
}
