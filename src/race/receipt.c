/* Verifying selection receipts (include/cordon/receipt.h). One verdict, computed here and
 * shared by the CLI: the document and its signature, the body's internal consistency (scores
 * re-derived from the recorded outcomes and changes, the ranking re-run), then the store: the
 * base's and every candidate's manifest and every blob they name, re-hashed.
 *
 * Blobs are opened through the store's own safe open (no symlink followed anywhere below the
 * store root, non-blocking, a regular file required) and hashed here as a stream: the public
 * read calls report a planted FIFO and a corrupt blob with the same error kind and stage the
 * bytes in memory, while the verdict must tell "unreadable" from "tampered" and should not copy
 * a whole tree to hash it. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include <cordon/backend.h>
#include <cordon/race.h>
#include <cordon/receipt.h>
#include <cordon/snapshot.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "crypto/jcs.h"
#include "race/protect.h"
#include "race/inputs.h"
#include "store/cas.h"
#include "race/logs.h"

/* Closeness is re-derived with the same arithmetic; the tolerance only absorbs a platform
 * that contracts a multiply-add where this one does not. */
#define CLOSENESS_TOLERANCE 1e-9
#define READ_BUFFER ((size_t)1 << 20)

/* ---- the report ---------------------------------------------------------------------------- */

static void report_verdict(struct cordon_receipt_report *r, enum cordon_verdict v,
                           const char *object, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Record a problem. The verdict worsens by precedence; the reason is the first problem of the
 * worst verdict seen. */
static void report_verdict(struct cordon_receipt_report *r, enum cordon_verdict v,
                           const char *object, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *message = NULL;
  if (vasprintf(&message, fmt, ap) < 0)
    message = NULL;
  va_end(ap);
  enum cordon_verdict worse = cordon_verdict_worse(r->verdict, v);
  if (worse != r->verdict || !r->reason) {
    free(r->reason);
    r->reason = message ? strdup(message) : NULL;
  }
  r->verdict = worse;
  r->problems_total++;
  if (r->n_problems < CORDON_RECEIPT_MAX_PROBLEMS) {
    if (!r->problems)
      r->problems = calloc(CORDON_RECEIPT_MAX_PROBLEMS, sizeof(*r->problems));
    if (r->problems) {
      struct cordon_receipt_problem *p = &r->problems[r->n_problems++];
      p->verdict = v;
      p->object = strdup(object ? object : "receipt");
      p->message = steal_ptr(&message);
    }
  }
  free(message);
}

void cordon_receipt_report_clear(struct cordon_receipt_report *r) {
  if (!r)
    return;
  free(r->reason);
  free(r->winner_task);
  for (size_t i = 0; i < r->n_problems; i++) {
    free(r->problems[i].object);
    free(r->problems[i].message);
  }
  free(r->problems);
  memset(r, 0, sizeof(*r));
}

/* ---- the body: shape and internal consistency (pure) --------------------------------------- */

struct body_candidate {
  const char *task_id;
  const char *snapshot;
  double closeness;
  struct cordon_race_outcome outcome; /* as recorded: scores and change included */
};

struct body {
  json_t *root;
  const char *base;
  struct body_candidate *c;
  size_t n;
  size_t winner; /* n when no candidate passed */
  struct cordon_rank_profile *profile;
  bool no_pass;       /* "outcome": "no_pass" */
  bool allow_no_pass; /* every scored candidate was ranked (also a receipt without outcome) */
  struct race_protect protect; /* "protected_paths"; all lists NULL when absent */
};

static void body_free(struct body *b) {
  json_decref(b->root);
  free(b->c);
  cordon_rank_profile_free(b->profile);
  race_protect_clear(&b->protect);
  memset(b, 0, sizeof(*b));
}

static bool has_exactly(const json_t *o, const char *const *names, size_t n, size_t optional) {
  if (!json_is_object(o))
    return false;
  size_t present = 0;
  for (size_t i = 0; i < n; i++) {
    if (json_object_get(o, names[i]))
      present++;
    else if (i < n - optional)
      return false;
  }
  return json_object_size(o) == present;
}

static bool plain_string(const json_t *v, size_t max) {
  return json_is_string(v) && json_string_length(v) > 0 && json_string_length(v) <= max &&
         strlen(json_string_value(v)) == json_string_length(v);
}

static const char *digest_of(const json_t *v) {
  const char *s = json_string_value(v);
  return s && cordon_digest_valid(s) ? s : NULL;
}

static bool string_list(const json_t *v) {
  if (!json_is_array(v) || json_array_size(v) == 0)
    return false;
  for (size_t i = 0; i < json_array_size(v); i++)
    if (!json_is_string(json_array_get(v, i)))
      return false;
  return true;
}

/* A number that is an integer in [min, max] (every number read back is a double). */
static bool integer_in(const json_t *v, double min, double max, uint64_t *out) {
  if (!json_is_number(v))
    return false;
  double d = json_number_value(v);
  if (!(d >= min && d <= max) || d != floor(d))
    return false;
  *out = (uint64_t)(d < 0 ? 0 : d);
  return true;
}

static bool tier_known(const char *name) {
  for (int t = CORDON_TIER_NONE; t <= CORDON_TIER_VM; t++)
    if (!strcmp(name, cordon_tier_name((enum cordon_isolation_tier)t)))
      return true;
  return false;
}

/* Fill one candidate from its JSON; NULL on success, else why not. */
static const char *read_candidate(const json_t *j, bool judged, struct body_candidate *c) {
  static const char *const members[] = {"backend", "change", "closeness", "isolation_tier",
                                        "outcome", "scores", "snapshot",  "task_id",
                                        "logs"}; /* logs: absent from older receipts */
  /* The last three: what the cost rule measured (CORDON_COST_RULE); absent from receipts
   * written before it, whose cost is the older byte count. */
  static const char *const change_members[] = {"added",         "base_entries",  "bytes_added",
                                               "bytes_removed", "modified",      "removed",
                                               "bytes_changed", "lines_changed", "meta_changed"};
  static const char *const score_members[] = {CORDON_SCORE_CORRECTNESS, CORDON_SCORE_COST,
                                              CORDON_SCORE_REVERSIBILITY};
  static const char *const outcome_members[] = {"exit_code", "timed_out", "judge_exit_code",
                                                "judge_timed_out"};
  if (!has_exactly(j, members, ARRAY_SIZE(members), 1))
    return "a candidate must have exactly backend, change, closeness, isolation_tier, outcome, "
           "scores, snapshot and task_id (and logs)";
  const char *logs_why = NULL;
  if (json_object_get(j, "logs") &&
      (logs_why = race_logs_check(json_object_get(j, "logs"), judged)))
    return logs_why;
  json_t *task = json_object_get(j, "task_id");
  if (!plain_string(task, CORDON_RACE_TASK_ID_MAX - 1))
    return "a candidate's task_id must be a non-empty string of at most 31 bytes";
  c->task_id = json_string_value(task);
  if (!(c->snapshot = digest_of(json_object_get(j, "snapshot"))))
    return "a candidate's snapshot is not a digest (64 lowercase hex digits)";
  if (!plain_string(json_object_get(j, "backend"), 256))
    return "a candidate's backend must be a non-empty string";
  const char *tier = json_string_value(json_object_get(j, "isolation_tier"));
  if (!tier || !tier_known(tier))
    return "a candidate's isolation_tier must be none, process, container or vm";
  json_t *closeness = json_object_get(j, "closeness");
  c->closeness = json_number_value(closeness);
  if (!json_is_number(closeness) || !(c->closeness >= 0 && c->closeness <= 1))
    return "a candidate's closeness must be a number in [0, 1]";

  json_t *outcome = json_object_get(j, "outcome");
  if (!has_exactly(outcome, outcome_members, judged ? 4 : 2, 0))
    return judged ? "a candidate's outcome must have exactly exit_code, timed_out, "
                    "judge_exit_code and judge_timed_out (the race had a judge)"
                  : "a candidate's outcome must have exactly exit_code and timed_out";
  struct cordon_race_outcome *o = &c->outcome;
  uint64_t v;
  if (!integer_in(json_object_get(outcome, "exit_code"), 0, 255, &v) ||
      !json_is_boolean(json_object_get(outcome, "timed_out")))
    return "a candidate's exit_code must be 0..255 and timed_out a boolean";
  o->exit_code = (int)v;
  o->timed_out = json_is_true(json_object_get(outcome, "timed_out"));
  if (judged) {
    if (!integer_in(json_object_get(outcome, "judge_exit_code"), 0, 255, &v) ||
        !json_is_boolean(json_object_get(outcome, "judge_timed_out")))
      return "a candidate's judge_exit_code must be 0..255 and judge_timed_out a boolean";
    o->judged = true;
    o->judge_exit_code = (int)v;
    o->judge_timed_out = json_is_true(json_object_get(outcome, "judge_timed_out"));
  }

  json_t *change = json_object_get(j, "change");
  size_t measured = json_object_get(change, "bytes_changed") != NULL;
  measured += json_object_get(change, "lines_changed") != NULL;
  measured += json_object_get(change, "meta_changed") != NULL;
  if (!has_exactly(change, change_members, ARRAY_SIZE(change_members), 3) ||
      (measured != 0 && measured != 3))
    return "a candidate's change must have exactly added, base_entries, bytes_added, "
           "bytes_removed, modified and removed, and either all or none of bytes_changed, "
           "lines_changed and meta_changed";
  o->change.content_measured = measured == 3;
  uint64_t *fields[] = {
      &o->change.added,         &o->change.base_entries,  &o->change.bytes_added,
      &o->change.bytes_removed, &o->change.modified,      &o->change.removed,
      &o->change.bytes_changed, &o->change.lines_changed, &o->change.meta_changed};
  for (size_t i = 0; i < (measured ? 9u : 6u); i++)
    if (!integer_in(json_object_get(change, change_members[i]), 0, 9007199254740992.0, fields[i]))
      return "a candidate's change counts must be non-negative integers";

  json_t *scores = json_object_get(j, "scores");
  if (!has_exactly(scores, score_members, ARRAY_SIZE(score_members), 0))
    return "a candidate's scores must be exactly correctness, cost and reversibility";
  /* The scores are a function of the outcome and the change: derive them again. */
  struct cordon_race_outcome derived = *o;
  cordon_race_score(&derived);
  o->correctness = json_number_value(json_object_get(scores, CORDON_SCORE_CORRECTNESS));
  o->cost = json_number_value(json_object_get(scores, CORDON_SCORE_COST));
  o->reversibility = json_number_value(json_object_get(scores, CORDON_SCORE_REVERSIBILITY));
  if (o->correctness != derived.correctness || o->cost != derived.cost ||
      o->reversibility != derived.reversibility)
    return "a candidate's scores do not follow from its outcome and change";
  return NULL;
}

static int compare_strings(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Re-run the ranking on the recorded scores of the candidates that could win (every one with
 * allow_no_pass, else the passing ones): every recorded closeness must be what the profile
 * gives, the others' 0, and no candidate may rank above the winner. With no pass, no candidate
 * may have passed and none is ranked. */
static const char *check_ranking(struct body *b, struct cordon_error **err, int *failed) {
  const struct cordon_rank_profile *p = b->profile;
  size_t n_all = b->n ? b->n : 1;
  _cleanup_free_ struct cordon_rank_candidate *in = calloc(n_all, sizeof(*in));
  _cleanup_free_ struct cordon_rank_score *scores = calloc(n_all * p->n_axes, sizeof(*scores));
  _cleanup_free_ size_t *of = calloc(n_all, sizeof(*of));
  if (!in || !scores || !of) {
    *failed = cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "receipt");
    return NULL;
  }
  size_t n = 0;
  for (size_t i = 0; i < b->n; i++) {
    if (b->allow_no_pass || cordon_race_outcome_passed(&b->c[i].outcome))
      of[n++] = i;
    else if (b->c[i].closeness != 0)
      return "a candidate that did not pass has a closeness (only passing ones are ranked)";
  }
  if (b->no_pass)
    return n ? "the outcome is no_pass, but a candidate passed" : NULL;
  if (n == 0)
    return "the race has a winner, but no candidate that could win";
  bool winner_ranked = false;
  for (size_t i = 0; i < n; i++)
    winner_ranked |= of[i] == b->winner;
  if (!winner_ranked)
    return "the winner did not pass (and the race was not run with allow_no_pass)";
  for (size_t i = 0; i < n; i++) {
    struct cordon_rank_score *row = scores + i * p->n_axes;
    const struct cordon_race_outcome *o = &b->c[of[i]].outcome;
    for (size_t j = 0; j < p->n_axes; j++) {
      row[j].axis = p->axes[j].name;
      row[j].value = !strcmp(row[j].axis, CORDON_SCORE_CORRECTNESS) ? o->correctness
                     : !strcmp(row[j].axis, CORDON_SCORE_COST)      ? o->cost
                                                                    : o->reversibility;
    }
    in[i] = (struct cordon_rank_candidate){b->c[of[i]].task_id, row, p->n_axes};
  }
  struct cordon_rank_result *res = NULL;
  struct cordon_error *rank_err = NULL;
  if (cordon_rank_topsis(p, in, n, &res, &rank_err) < 0) {
    static char why[] = "the ranking cannot be re-run on the recorded scores";
    cordon_error_free(rank_err);
    return why;
  }
  const char *why = NULL;
  double winner_closeness = 0;
  for (size_t i = 0; i < n; i++)
    if (of[res[i].input_index] == b->winner)
      winner_closeness = res[i].closeness;
  for (size_t i = 0; i < n && !why; i++) {
    const struct body_candidate *c = &b->c[of[res[i].input_index]];
    if (fabs(c->closeness - res[i].closeness) > CLOSENESS_TOLERANCE)
      why = "a candidate's closeness is not what the profile gives for the recorded scores";
    else if (res[i].closeness > winner_closeness + CLOSENESS_TOLERANCE)
      why = "the winner is not the candidate the profile ranks first";
  }
  cordon_rank_results_free(res, n);
  return why;
}

/* The winner (null with no pass, else a candidate and its snapshot) and the losers (every other
 * candidate, in task_id order, with its snapshot); sets b->winner (b->n: none). NULL, or why
 * not. */
static const char *read_winner_and_losers(const json_t *root, struct body *b) {
  static const char *const pair[] = {"snapshot", "task_id"};
  json_t *winner = json_object_get(root, "winner");
  b->winner = b->n;
  if (b->no_pass && !json_is_null(winner))
    return "the outcome is no_pass, but the winner is not null";
  const char *winner_task = json_string_value(json_object_get(winner, "task_id"));
  const char *winner_snapshot = digest_of(json_object_get(winner, "snapshot"));
  if (!b->no_pass && (!has_exactly(winner, pair, 2, 0) || !winner_task || !winner_snapshot))
    return "the winner must be {snapshot: a digest, task_id}";
  for (size_t i = 0; !b->no_pass && i < b->n; i++)
    if (!strcmp(b->c[i].task_id, winner_task))
      b->winner = i;
  if (!b->no_pass && b->winner == b->n)
    return "the winner is not among the candidates";
  if (!b->no_pass && strcmp(b->c[b->winner].snapshot, winner_snapshot))
    return "the winner's snapshot is not the one recorded for that candidate";
  json_t *losers = json_object_get(root, "losers");
  if (!json_is_array(losers) || json_array_size(losers) != b->n - (b->no_pass ? 0 : 1))
    return "the losers are not the candidates other than the winner";
  for (size_t i = 0, l = 0; i < b->n; i++) {
    if (i == b->winner)
      continue;
    json_t *x = json_array_get(losers, l++);
    const char *task = json_string_value(json_object_get(x, "task_id"));
    const char *snapshot = digest_of(json_object_get(x, "snapshot"));
    if (!has_exactly(x, pair, 2, 0) || !task || !snapshot || strcmp(task, b->c[i].task_id) ||
        strcmp(snapshot, b->c[i].snapshot)) {
      return "the losers are not the candidates other than the winner (in task_id order, with "
             "their snapshots)";
    }
  }
  return NULL;
}

/* "outcome" and "allow_no_pass": a receipt written before they existed has neither and ranked
 * every scored candidate, which is what allow_no_pass does now. NULL, or why not. */
static const char *read_outcome(const json_t *root, struct body *b) {
  json_t *outcome = json_object_get(root, "outcome");
  json_t *allow = json_object_get(root, "allow_no_pass");
  if (allow && !json_is_true(allow))
    return "allow_no_pass, when present, must be true";
  if (!outcome) {
    if (allow)
      return "allow_no_pass without an outcome";
    b->allow_no_pass = true;
    return NULL;
  }
  const char *text = json_string_value(outcome);
  if (!text ||
      (strcmp(text, CORDON_RACE_OUTCOME_WINNER) && strcmp(text, CORDON_RACE_OUTCOME_NO_PASS)))
    return "the outcome must be \"" CORDON_RACE_OUTCOME_WINNER
           "\" or \"" CORDON_RACE_OUTCOME_NO_PASS "\"";
  b->no_pass = !strcmp(text, CORDON_RACE_OUTCOME_NO_PASS);
  b->allow_no_pass = allow != NULL;
  if (b->no_pass && b->allow_no_pass)
    return "a race run with allow_no_pass always has a winner";
  return NULL;
}

/* Read and check the body. Returns 0 with b filled, 1 when the body is inconsistent (*why set,
 * static text), < 0 on an internal error. */
static int read_body(const char *text, struct body *b, const char **why,
                     struct cordon_error **err) {
  static const char *const members[] = {
      "base", "candidates", "command", "losers", "profile", "signer", "type", "winner",
      /* optional */
      "judge", "failed", "outcome", "allow_no_pass", "protected_paths", "manifest", "inputs"};
  memset(b, 0, sizeof(*b));
  struct cordon_error *perr = NULL;
  if (jcs_parse(text, strlen(text), CORDON_DOCUMENT_MAX, "receipt body", &b->root, &perr) < 0) {
    cordon_error_free(perr);
    *why = "the body is not JSON";
    return 1;
  }
  json_t *root = b->root;
  if (!has_exactly(root, members, ARRAY_SIZE(members), 7)) {
    *why = "the body must have exactly base, candidates, command, losers, profile, signer, type "
           "and winner (and judge when the race had one, failed when a candidate failed, "
           "outcome, allow_no_pass, protected_paths, manifest, inputs when set)";
    return 1;
  }
  if ((*why = read_outcome(root, b)) || (*why = race_inputs_check(root)))
    return 1;
  json_t *protected_paths = json_object_get(root, "protected_paths");
  if (protected_paths && (*why = race_protect_json_check(protected_paths)))
    return 1;
  if (protected_paths && race_protect_from_json(protected_paths, &b->protect, err) < 0)
    return -1;
  const char *type = json_string_value(json_object_get(root, "type"));
  if (!type || strcmp(type, CORDON_RECEIPT_TYPE)) {
    *why = "not a selection receipt (type is not " CORDON_RECEIPT_TYPE ")";
    return 1;
  }
  if (!(b->base = digest_of(json_object_get(root, "base")))) {
    *why = "the base is not a digest (64 lowercase hex digits)";
    return 1;
  }
  json_t *judge = json_object_get(root, "judge");
  if (!string_list(json_object_get(root, "command")) || (judge && !string_list(judge))) {
    *why = "command (and judge) must be non-empty lists of strings";
    return 1;
  }
  json_t *candidates = json_object_get(root, "candidates");
  b->n = json_array_size(candidates);
  /* Only a race without a pass may have no ranked candidate (every one failed to snapshot). */
  bool may_be_empty = b->no_pass && json_object_get(root, "failed");
  if (!json_is_array(candidates) || (b->n == 0 && !may_be_empty) || b->n > CORDON_RACE_MAX_K) {
    *why = "candidates must be a list of 1 to "
           "256"
           " candidates";
    return 1;
  }
  if (!(b->c = calloc(b->n ? b->n : 1, sizeof(*b->c))))
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "receipt");
  for (size_t i = 0; i < b->n; i++) {
    if ((*why = read_candidate(json_array_get(candidates, i), judge != NULL, &b->c[i])))
      return 1;
    /* Sorted by task id, strictly: the order the ranking used, and no duplicates. */
    if (i > 0 && strcmp(b->c[i - 1].task_id, b->c[i].task_id) >= 0) {
      *why = "the candidates are not in strictly increasing task_id order (or one repeats)";
      return 1;
    }
  }

  /* Candidates scored as failed: a non-empty list of {reason, task_id}, sorted strictly by
   * task_id, none of them a ranked candidate, all of them fewer than the race's maximum. */
  json_t *failed_list = json_object_get(root, "failed");
  if (failed_list) {
    static const char *const failed_members[] = {"reason", "task_id"};
    size_t n_failed = json_array_size(failed_list);
    if (!json_is_array(failed_list) || n_failed == 0 || b->n + n_failed > CORDON_RACE_MAX_K) {
      *why = "failed must be a non-empty list of the candidates scored as failed";
      return 1;
    }
    const char *previous = NULL;
    for (size_t i = 0; i < n_failed; i++) {
      json_t *x = json_array_get(failed_list, i);
      const char *task = json_string_value(json_object_get(x, "task_id"));
      if (!has_exactly(x, failed_members, 2, 0) ||
          !plain_string(json_object_get(x, "task_id"), CORDON_RACE_TASK_ID_MAX - 1) ||
          !plain_string(json_object_get(x, "reason"), CORDON_RACE_FAILURE_MAX)) {
        *why = "a failed candidate must be exactly {reason, task_id}, non-empty strings";
        return 1;
      }
      if (previous && strcmp(previous, task) >= 0) {
        *why = "the failed candidates are not in strictly increasing task_id order";
        return 1;
      }
      previous = task;
      for (size_t j = 0; j < b->n; j++)
        if (!strcmp(b->c[j].task_id, task)) {
          *why = "a candidate is both ranked and failed";
          return 1;
        }
    }
  }

  if ((*why = read_winner_and_losers(root, b)))
    return 1;

  /* The profile: one the ranker accepts, written exactly as the ranker writes it, weighing
   * only axes a race scores. */
  json_t *profile = json_object_get(root, "profile");
  _cleanup_free_ char *profile_text = NULL, *again = NULL;
  if (!json_is_object(profile) || jcs_dump(profile, &profile_text, NULL, &perr) < 0 ||
      cordon_rank_profile_parse(profile_text, strlen(profile_text), &b->profile, &perr) < 0 ||
      cordon_rank_profile_to_json(b->profile, &again, &perr) < 0 || strcmp(again, profile_text)) {
    cordon_error_free(perr);
    *why = "the ranking profile is not a valid profile in its canonical form";
    return 1;
  }
  for (size_t j = 0; j < b->profile->n_axes; j++) {
    const char *axis = b->profile->axes[j].name;
    if (strcmp(axis, CORDON_SCORE_CORRECTNESS) && strcmp(axis, CORDON_SCORE_COST) &&
        strcmp(axis, CORDON_SCORE_REVERSIBILITY)) {
      *why = "the ranking profile weighs an axis a race does not score";
      return 1;
    }
  }
  /* A profile that names the cost rule goes with changes measured by it, and only with them. */
  for (size_t i = 0; i < b->n; i++)
    if (b->c[i].outcome.change.content_measured != (b->profile->cost_rule != NULL)) {
      *why = "a candidate's change is not measured by the cost rule its profile names";
      return 1;
    }
  int failed = 0;
  *why = check_ranking(b, err, &failed);
  if (failed < 0)
    return -1;
  return *why ? 1 : 0;
}

/* ---- the store: re-hash manifests and blobs ------------------------------------------------ */

enum blob_state { BLOB_OK = 0, BLOB_ABSENT, BLOB_UNREADABLE, BLOB_CORRUPT };

struct blob_check {
  char digest[CORDON_DIGEST_HEX_SIZE];
  enum blob_state state;
  uint64_t bytes;
  char *message;
};

/* Open without following links or blocking, require a regular file, hash as a stream. */
static void check_blob(struct cordon_cas *cas, struct cas_hasher *h, unsigned char *buf,
                       struct blob_check *b) {
  unsigned char want[CAS_DIGEST_LEN], got[CAS_DIGEST_LEN];
  if (cas_unhex(b->digest, want) < 0) {
    b->state = BLOB_CORRUPT;
    b->message = strdup("not a digest");
    return;
  }
  struct cas_blob blob;
  struct cordon_error *e = NULL;
  if (cas_blob_open(cas, want, &blob, &e) < 0) {
    b->state = e && e->kind == CORDON_ERR_NOT_FOUND ? BLOB_ABSENT : BLOB_UNREADABLE;
    b->message = strdup(e && e->message ? e->message : "cannot open");
    cordon_error_free(e);
    return;
  }
  if (cas_hasher_init(h) < 0) {
    cas_blob_close(&blob);
    b->state = BLOB_UNREADABLE;
    b->message = strdup("out of memory");
    return;
  }
  for (;;) {
    ssize_t n = cas_blob_read(&blob, buf, READ_BUFFER, b->bytes);
    if (n < 0) {
      char *m = NULL;
      b->state = BLOB_UNREADABLE;
      if (asprintf(&m, "blob %s: read: %s", b->digest, strerror(errno)) >= 0)
        b->message = m;
      cas_hasher_final(h, got);
      cas_blob_close(&blob);
      return;
    }
    if (n == 0)
      break;
    cas_hasher_update(h, buf, (size_t)n);
    b->bytes += (uint64_t)n;
  }
  cas_blob_close(&blob);
  cas_hasher_final(h, got);
  if (memcmp(want, got, CAS_DIGEST_LEN) != 0) {
    struct cordon_error *ie = NULL;
    cas_integrity_error(&ie, want, got);
    b->state = BLOB_CORRUPT;
    b->message = strdup(ie && ie->message ? ie->message : "corrupt");
    cordon_error_free(ie);
  }
}

struct pool {
  struct cordon_cas *cas;
  struct blob_check *blobs;
  size_t n;
  size_t next;
  pthread_mutex_t mu;
};

static void *pool_worker(void *arg) {
  struct pool *p = arg;
  struct cas_hasher h = {0};
  unsigned char *buf = malloc(READ_BUFFER);
  for (;;) {
    pthread_mutex_lock(&p->mu);
    size_t i = p->next++;
    pthread_mutex_unlock(&p->mu);
    if (i >= p->n)
      break;
    if (!buf) {
      p->blobs[i].state = BLOB_UNREADABLE;
      continue;
    }
    check_blob(p->cas, &h, buf, &p->blobs[i]);
  }
  cas_hasher_free(&h);
  free(buf);
  return NULL;
}

/* Check every blob, on every core (at most 8). */
static void check_blobs(struct cordon_cas *cas, struct blob_check *blobs, size_t n) {
  struct pool p = {.cas = cas, .blobs = blobs, .n = n};
  pthread_mutex_init(&p.mu, NULL);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  size_t threads = cores < 1 ? 1 : cores > 8 ? 8 : (size_t)cores;
  if (threads > n)
    threads = n ? n : 1;
  pthread_t t[8];
  size_t started = 0;
  for (size_t i = 1; i < threads; i++)
    if (pthread_create(&t[started], NULL, pool_worker, &p) == 0)
      started++;
  pool_worker(&p);
  for (size_t i = 0; i < started; i++)
    pthread_join(t[i], NULL);
  pthread_mutex_destroy(&p.mu);
}

static void report_blob(struct cordon_receipt_report *r, const struct blob_check *b,
                        const char *what) {
  static const enum cordon_verdict verdict[] = {CORDON_VERDICT_VERIFIED, CORDON_VERDICT_INCOMPLETE,
                                                CORDON_VERDICT_UNREADABLE, CORDON_VERDICT_FAILED};
  if (b->state == BLOB_OK)
    return;
  /* The store's messages name the blob already. */
  if (b->state == BLOB_ABSENT)
    report_verdict(r, verdict[b->state], b->digest, "%s %s is absent from the store", what,
                   b->digest);
  else
    report_verdict(r, verdict[b->state], b->digest, "%s: %s", what,
                   b->message ? b->message : "cannot be checked");
}

/* a: measured from the snapshots; b: as recorded (measured by the cost rule, or older). */
static bool change_equal(const struct cordon_race_change *a, const struct cordon_race_change *b) {
  if (b->content_measured &&
      (!a->content_measured || a->lines_changed != b->lines_changed ||
       a->bytes_changed != b->bytes_changed || a->meta_changed != b->meta_changed))
    return false;
  return a->base_entries == b->base_entries && a->added == b->added && a->removed == b->removed &&
         a->modified == b->modified && a->bytes_added == b->bytes_added &&
         a->bytes_removed == b->bytes_removed;
}

struct digest_list {
  char (*d)[CORDON_DIGEST_HEX_SIZE];
  size_t n, cap;
};

static int digest_push(struct digest_list *l, const char *digest) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 1024;
    void *grown = realloc(l->d, cap * sizeof(*l->d));
    if (!grown)
      return -1;
    l->d = grown;
    l->cap = cap;
  }
  memcpy(l->d[l->n++], digest, CORDON_DIGEST_HEX_SIZE);
  return 0;
}

static int compare_digests(const void *a, const void *b) {
  return memcmp(a, b, CORDON_DIGEST_HEX_SIZE);
}

/* Re-hash a snapshot's manifest and read its entries, collecting the file blobs it names.
 * Returns 1 when read, 0 when a problem was reported, < 0 on an internal error. */
static int load_snapshot(struct cordon_cas *cas, const char *id, const char *what,
                         struct cas_hasher *h, unsigned char *buf, struct digest_list *files,
                         struct cordon_snapshot_entry **entries, size_t *n,
                         struct cordon_receipt_report *r, struct cordon_error **err) {
  struct blob_check m = {0};
  snprintf(m.digest, sizeof(m.digest), "%s", id);
  check_blob(cas, h, buf, &m);
  r->snapshots_checked++;
  r->bytes_checked += m.bytes;
  report_blob(r, &m, what);
  free(m.message);
  if (m.state != BLOB_OK)
    return 0;
  struct cordon_error *e = NULL;
  if (cordon_snapshot_entries(cas, id, entries, n, &e) < 0) {
    report_verdict(
        r, e && e->kind == CORDON_ERR_NOT_FOUND ? CORDON_VERDICT_INCOMPLETE : CORDON_VERDICT_FAILED,
        id, "%s %s is not a readable snapshot manifest: %s", what, id,
        e && e->message ? e->message : "?");
    cordon_error_free(e);
    return 0;
  }
  for (size_t i = 0; i < *n; i++)
    if ((*entries)[i].kind == CORDON_SNAPSHOT_FILE &&
        digest_push(files, (*entries)[i].digest) < 0) {
      cordon_snapshot_entries_free(*entries, *n);
      *entries = NULL;
      *n = 0;
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "receipt");
    }
  return 1;
}

/* Every distinct snapshot the receipt names: its manifest re-hashed, its entries read and its
 * change against the base compared with what each candidate recorded; then every distinct file
 * blob of all of them re-hashed, once. */
static int check_store(struct cordon_cas *cas, struct body *b, struct cordon_receipt_report *r,
                       struct cordon_error **err) {
  _cleanup_free_ const char **ids = calloc(b->n ? b->n : 1, sizeof(*ids));
  _cleanup_free_ unsigned char *buf = malloc(READ_BUFFER);
  if (!ids || !buf)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "receipt");
  for (size_t i = 0; i < b->n; i++)
    ids[i] = b->c[i].snapshot;
  qsort(ids, b->n, sizeof(*ids), compare_strings);

  struct digest_list files = {0};
  struct cordon_snapshot_entry *base_entries = NULL;
  size_t n_base = 0;
  struct cas_hasher h = {0};
  int ret = -1;
  int base_ok =
      load_snapshot(cas, b->base, "base snapshot", &h, buf, &files, &base_entries, &n_base, r, err);
  if (base_ok < 0)
    goto out;
  for (size_t k = 0; k < b->n; k++) {
    const char *id = ids[k];
    if (k > 0 && !strcmp(ids[k - 1], id))
      continue;
    struct cordon_snapshot_entry *entries = NULL;
    size_t n = 0;
    bool is_base = !strcmp(id, b->base);
    if (is_base) {
      if (!base_ok)
        continue; /* reported once, as the base */
      entries = base_entries;
      n = n_base;
    } else {
      int loaded = load_snapshot(cas, id, "snapshot", &h, buf, &files, &entries, &n, r, err);
      if (loaded < 0)
        goto out;
      if (!loaded)
        continue;
    }
    int rc = 0;
    if (base_ok) {
      struct cordon_race_change change;
      rc = cordon_race_change_compute(base_entries, n_base, entries, n, &change, err);
      bool measured = false;
      for (size_t i = 0; i < b->n; i++)
        measured |= !strcmp(b->c[i].snapshot, id) && b->c[i].outcome.change.content_measured;
      /* The cost rule reads the changed files: one that cannot be read (absent, corrupt, not a
       * regular file) is reported by the blob checks below, every file blob of every snapshot
       * being checked there; the measured part of the change is then not compared. */
      struct cordon_error *measure_err = NULL;
      if (rc == 0 && measured &&
          cordon_race_change_measure(cas, base_entries, n_base, entries, n, &change, &measure_err) <
              0) {
        rc = cordon_race_change_compute(base_entries, n_base, entries, n, &change, err);
        measured = false;
      }
      cordon_error_free(measure_err);
      for (size_t i = 0; rc == 0 && i < b->n; i++)
        if (!strcmp(b->c[i].snapshot, id) &&
            (measured || !b->c[i].outcome.change.content_measured) &&
            !change_equal(&change, &b->c[i].outcome.change))
          report_verdict(r, CORDON_VERDICT_FAILED, id,
                         "%s: the recorded change does not match its snapshot %s against the "
                         "base",
                         b->c[i].task_id, id);
      const char *changed =
          race_protect_any(&b->protect)
              ? race_protect_first_change(&b->protect, base_entries, n_base, entries, n)
              : NULL;
      if (changed)
        report_verdict(r, CORDON_VERDICT_FAILED, id,
                       "snapshot %s changes the protected path %s: no ranked candidate may", id,
                       changed);
    }
    if (!is_base)
      cordon_snapshot_entries_free(entries, n);
    if (rc < 0)
      goto out;
  }

  if (files.n)
    qsort(files.d, files.n, sizeof(*files.d), compare_digests);
  size_t unique = 0;
  for (size_t i = 0; i < files.n; i++)
    if (unique == 0 || memcmp(files.d[unique - 1], files.d[i], CORDON_DIGEST_HEX_SIZE))
      memcpy(files.d[unique++], files.d[i], CORDON_DIGEST_HEX_SIZE);
  struct blob_check *blobs = calloc(unique ? unique : 1, sizeof(*blobs));
  if (!blobs) {
    cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "receipt");
    goto out;
  }
  for (size_t i = 0; i < unique; i++)
    memcpy(blobs[i].digest, files.d[i], CORDON_DIGEST_HEX_SIZE);
  check_blobs(cas, blobs, unique);
  for (size_t i = 0; i < unique; i++) {
    r->blobs_checked++;
    r->bytes_checked += blobs[i].bytes;
    report_blob(r, &blobs[i], "blob");
    free(blobs[i].message);
  }
  free(blobs);
  ret = 0;
out:
  cas_hasher_free(&h);
  free(files.d);
  cordon_snapshot_entries_free(base_entries, n_base);
  return ret;
}

/* ---- entry points -------------------------------------------------------------------------- */

int cordon_receipt_verify(struct cordon_cas *cas, const char *document, size_t length,
                          const char *expected_kid, struct cordon_receipt_report *r,
                          struct cordon_error **err) {
  memset(r, 0, sizeof(*r));
  r->verdict = CORDON_VERDICT_VERIFIED;
  if (cas) /* judge the packs on disk now */
    cas_packs_refresh(cas, NULL);
  struct cordon_document_check check;
  if (cordon_document_verify(document, length, expected_kid, &check, err) < 0)
    return -1;
  memcpy(r->kid, check.kid, sizeof(r->kid));
  if (check.verdict == CORDON_VERDICT_FAILED) {
    report_verdict(r, CORDON_VERDICT_FAILED, "receipt", "%s",
                   check.reason ? check.reason : "bad document");
    cordon_document_check_clear(&check);
    return 0;
  }
  struct body b;
  const char *why = NULL;
  int rb = read_body(check.body_json, &b, &why, err);
  enum cordon_verdict signature = check.verdict;
  cordon_document_check_clear(&check);
  if (rb < 0) {
    body_free(&b);
    cordon_receipt_report_clear(r);
    return -1;
  }
  if (rb > 0) {
    report_verdict(r, CORDON_VERDICT_FAILED, "receipt", "inconsistent receipt: %s", why);
    body_free(&b);
    return 0;
  }
  snprintf(r->base, sizeof(r->base), "%s", b.base);
  r->outcome = b.no_pass ? CORDON_RACE_OUTCOME_NO_PASS : CORDON_RACE_OUTCOME_WINNER;
  r->allow_no_pass = b.allow_no_pass;
  if (!b.no_pass) {
    snprintf(r->winner_snapshot, sizeof(r->winner_snapshot), "%s", b.c[b.winner].snapshot);
    r->winner_task = strdup(b.c[b.winner].task_id);
  }
  r->n_candidates = b.n;
  int ret = 0;
  if (!cas)
    report_verdict(r, CORDON_VERDICT_INCOMPLETE, "store", "no store to check the snapshots in");
  else if (check_store(cas, &b, r, err) < 0)
    ret = -1;
  body_free(&b);
  if (ret < 0) {
    cordon_receipt_report_clear(r);
    return -1;
  }
  /* Unanchored is not a problem of the receipt: it only caps the verdict, and explains it when
   * nothing worse was found. */
  if (signature == CORDON_VERDICT_UNANCHORED && r->verdict == CORDON_VERDICT_VERIFIED) {
    r->verdict = CORDON_VERDICT_UNANCHORED;
    free(r->reason);
    if (asprintf(&r->reason, "signed by %s, but no expected key id was given to anchor it",
                 r->kid) < 0)
      r->reason = NULL;
  }
  return 0;
}

int cordon_receipt_verify_file(struct cordon_cas *cas, const char *path, const char *expected_kid,
                               struct cordon_receipt_report *r, struct cordon_error **err) {
  memset(r, 0, sizeof(*r));
  r->verdict = CORDON_VERDICT_VERIFIED;
  /* Non-blocking, so a FIFO in the receipt's place cannot hang the check. */
  _cleanup_close_ int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    report_verdict(r, e == ENOENT ? CORDON_VERDICT_INCOMPLETE : CORDON_VERDICT_UNREADABLE,
                   "receipt", "receipt %s: %s", path, strerror(e));
    return 0;
  }
  struct stat st;
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
    report_verdict(r, CORDON_VERDICT_UNREADABLE, "receipt", "receipt %s is not a regular file",
                   path);
    return 0;
  }
  if ((uint64_t)st.st_size > CORDON_DOCUMENT_MAX) {
    report_verdict(r, CORDON_VERDICT_FAILED, "receipt",
                   "receipt %s is larger than a receipt can be (%u bytes)", path,
                   CORDON_DOCUMENT_MAX);
    return 0;
  }
  _cleanup_free_ unsigned char *data = NULL;
  size_t length = 0;
  struct cordon_error *read_err = NULL;
  if (fs_read_fd(fd, CORDON_DOCUMENT_MAX, &data, &length, &read_err) < 0) {
    report_verdict(r, CORDON_VERDICT_UNREADABLE, "receipt", "receipt %s: %s", path,
                   read_err && read_err->message ? read_err->message : "cannot be read");
    cordon_error_free(read_err);
    return 0;
  }
  return cordon_receipt_verify(cas, (const char *)data, length, expected_kid, r, err);
}
