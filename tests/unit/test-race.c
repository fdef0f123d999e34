/* Unit tests of fork-and-race and selection receipts (src/race/race.c, src/race/receipt.c):
 * the pure change and score functions; races on the worktree backend (byte-identical receipts,
 * a stable winner, every check made before anything runs, a candidate that cannot start);
 * verification (every flipped byte of a receipt, a re-signed but inconsistent body, a loser's
 * blob tampered, deleted, replaced by a FIFO or a symlink, the expected key id); and four
 * concurrent races extending one audit chain. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include <cordon/audit.h>
#include <cordon/keys.h>
#include <cordon/race.h>
#include <cordon/receipt.h>
#include <cordon/session.h>
#include <cordon/snapshot.h>

#include "backends/builtin.h"
#include "base/cleanup.h"
#include "base/fs.h"

/* Candidate i writes 1000 - 100 i bytes to out; candidate 1 fails; candidate 2 also deletes a
 * base file. Expected: candidate-3 (correct, cheapest of those that keep the base) wins. */
static const char *const COMMAND[] = {
    "sh", "-c",
    "i=$CORDON_CANDIDATE_INDEX; head -c $((1000 - i * 100)) /dev/zero > out; "
    "[ $i -eq 2 ] && rm a; [ $i -ne 1 ]",
    NULL};

struct fixture {
  char dir[64];
  char project[96], keys[96], tree[96];
  struct cordon_context *ctx;
  struct cordon_cas *cas;
  char base[CORDON_DIGEST_HEX_SIZE];
  char kid[CORDON_KEY_ID_LEN + 1];
};

static void must(int r, struct cordon_error *err, const char *what) {
  if (r < 0)
    fail_msg("%s: %s", what, err ? err->message : "failed");
}

static void write_file(const char *dir, const char *name, const char *text) {
  char path[256];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  struct cordon_error *err = NULL;
  must(fs_write_atomic(path, text, strlen(text), 0644, &err), err, path);
}

static int setup(void **state) {
  struct fixture *f = calloc(1, sizeof(*f));
  snprintf(f->dir, sizeof(f->dir), "/tmp/cordon-test-race.XXXXXX");
  if (!mkdtemp(f->dir))
    return -1;
  snprintf(f->project, sizeof(f->project), "%s/project", f->dir);
  snprintf(f->keys, sizeof(f->keys), "%s/keys", f->dir);
  snprintf(f->tree, sizeof(f->tree), "%s/tree", f->dir);
  if (mkdir(f->project, 0755) < 0 || mkdir(f->tree, 0755) < 0)
    return -1;
  write_file(f->tree, "a", "alpha\n");
  write_file(f->tree, "b", "bravo\n");
  struct cordon_error *err = NULL;
  struct cordon_signing_key *key = NULL;
  if (cordon_key_init(f->keys, NULL, &err) < 0 ||
      cordon_signing_key_load(f->keys, &key, &err) < 0 ||
      cordon_context_open(f->project, &f->ctx, &err) < 0 ||
      cordon_cas_open_project(f->ctx, &f->cas, &err) < 0 ||
      cordon_snapshot_take(f->cas, f->tree, NULL, f->base, NULL, &err) < 0) {
    fprintf(stderr, "setup: %s\n", err ? err->message : "?");
    return -1;
  }
  snprintf(f->kid, sizeof(f->kid), "%s", cordon_signing_key_id(key));
  cordon_signing_key_free(key);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  struct fixture *f = *state;
  cordon_cas_close(f->cas);
  cordon_context_free(f->ctx);
  fs_remove_tree(f->dir, NULL);
  free(f);
  return 0;
}

static struct cordon_race_options options(struct fixture *f, unsigned k, const char *out) {
  return (struct cordon_race_options){
      .base = f->base,
      .k = k,
      .backend = &cordon_backend_worktree,
      .argv = COMMAND,
      .out_path = out,
      .key_dir = f->keys,
      .actor = "test:race",
  };
}

static char *path_in(struct fixture *f, const char *name) {
  char *p = NULL;
  if (asprintf(&p, "%s/%s", f->dir, name) < 0)
    abort();
  return p;
}

static void race_ok(struct fixture *f, const struct cordon_race_options *o,
                    struct cordon_race_result *res) {
  struct cordon_error *err = NULL;
  must(cordon_race_run(f->ctx, o, res, &err), err, "race");
}

static size_t count_sessions(struct fixture *f) {
  char **ids = NULL;
  struct cordon_error *err = NULL;
  must(cordon_session_list(f->ctx, &ids, &err), err, "session list");
  size_t n = 0;
  while (ids[n])
    n++;
  cordon_strv_free(ids);
  return n;
}

static uint64_t audit_entries(struct fixture *f, enum cordon_audit_problem *problem) {
  struct cordon_audit_log *log = NULL;
  struct cordon_audit_options ao = {.key_dir = f->keys};
  struct cordon_error *err = NULL;
  struct cordon_audit_report report = {0};
  must(cordon_audit_open_project(f->ctx, &ao, &log, &err), err, "audit open");
  must(cordon_audit_verify(log, &report, &err), err, "audit verify");
  uint64_t n = report.entries;
  *problem = report.problem;
  cordon_audit_report_clear(&report);
  cordon_audit_close(log);
  return n;
}

static enum cordon_verdict verify(struct fixture *f, const char *doc, size_t len, const char *kid) {
  struct cordon_receipt_report r;
  struct cordon_error *err = NULL;
  must(cordon_receipt_verify(f->cas, doc, len, kid, &r, &err), err, "receipt verify");
  enum cordon_verdict v = r.verdict;
  cordon_receipt_report_clear(&r);
  return v;
}

/* ---- pure parts ---------------------------------------------------------------------------- */

static struct cordon_snapshot_entry entry(const char *path, char kind, unsigned mode, uint64_t size,
                                          const char *digest_char, const char *target) {
  struct cordon_snapshot_entry e = {.path = (char *)path,
                                    .path_length = strlen(path),
                                    .kind = (enum cordon_snapshot_kind)kind,
                                    .mode = mode,
                                    .size = size,
                                    .target = (char *)target};
  if (digest_char)
    for (int i = 0; i < 64; i++)
      e.digest[i] = *digest_char;
  return e;
}

/* Passing: the command exited 0 in time and, when judged, the judge too. */
static void test_outcome_passed(void **state) {
  (void)state;
  struct cordon_race_outcome o = {0};
  assert_true(cordon_race_outcome_passed(&o));
  o.exit_code = 3;
  assert_false(cordon_race_outcome_passed(&o));
  o = (struct cordon_race_outcome){.timed_out = true};
  assert_false(cordon_race_outcome_passed(&o));
  o = (struct cordon_race_outcome){.judged = true};
  assert_true(cordon_race_outcome_passed(&o));
  o.judge_exit_code = 1;
  assert_false(cordon_race_outcome_passed(&o));
  o = (struct cordon_race_outcome){.judged = true, .judge_timed_out = true};
  assert_false(cordon_race_outcome_passed(&o));
  /* A judge's result recorded without judged set does not count. */
  o = (struct cordon_race_outcome){.judge_exit_code = 1};
  assert_true(cordon_race_outcome_passed(&o));
}

static void test_change_and_scores(void **state) {
  (void)state;
  /* Base: root, a (10 bytes), b (20 bytes), l -> a. Terminal: a unchanged, b rewritten with 5
   * bytes, l removed, c added (7 bytes), root unchanged; given in a different order. */
  struct cordon_snapshot_entry base[] = {
      entry("", 'd', 0755, 0, NULL, NULL), entry("a", 'f', 0644, 10, "1", NULL),
      entry("b", 'f', 0644, 20, "2", NULL), entry("l", 'l', 0777, 1, NULL, "a")};
  struct cordon_snapshot_entry term[] = {
      entry("c", 'f', 0644, 7, "4", NULL), entry("b", 'f', 0644, 5, "3", NULL),
      entry("a", 'f', 0644, 10, "1", NULL), entry("", 'd', 0755, 0, NULL, NULL)};
  struct cordon_race_outcome o = {0};
  struct cordon_error *err = NULL;
  must(cordon_race_change_compute(base, 4, term, 4, &o.change, &err), err, "change");
  assert_int_equal(o.change.base_entries, 4);
  assert_int_equal(o.change.added, 1);
  assert_int_equal(o.change.removed, 1);
  assert_int_equal(o.change.modified, 1);
  assert_int_equal(o.change.bytes_added, 7 + 5);
  assert_int_equal(o.change.bytes_removed, 20 + 1);
  cordon_race_score(&o);
  assert_true(o.correctness == 1.0);
  assert_true(o.cost == 3 + 12 + 21);
  assert_true(o.reversibility == 0.5); /* b modified, l removed: 2 of 4 touched */

  /* A mode change alone is a change; identical trees are none. */
  struct cordon_snapshot_entry chmodded[] = {
      entry("", 'd', 0755, 0, NULL, NULL), entry("a", 'f', 0600, 10, "1", NULL),
      entry("b", 'f', 0644, 20, "2", NULL), entry("l", 'l', 0777, 1, NULL, "a")};
  must(cordon_race_change_compute(base, 4, chmodded, 4, &o.change, &err), err, "change");
  assert_int_equal(o.change.modified, 1);
  must(cordon_race_change_compute(base, 4, base, 4, &o.change, &err), err, "change");
  assert_int_equal(o.change.added + o.change.removed + o.change.modified, 0);
  cordon_race_score(&o);
  assert_true(o.cost == 0 && o.reversibility == 1.0);

  /* Correctness: exit code, timeout, judge. */
  struct cordon_race_outcome x = {.exit_code = 3};
  cordon_race_score(&x);
  assert_true(x.correctness == 0);
  x = (struct cordon_race_outcome){.exit_code = 0, .timed_out = true};
  cordon_race_score(&x);
  assert_true(x.correctness == 0);
  x = (struct cordon_race_outcome){.exit_code = 0, .judged = true, .judge_exit_code = 1};
  cordon_race_score(&x);
  assert_true(x.correctness == 0.5);
  x = (struct cordon_race_outcome){.exit_code = 2, .judged = true, .judge_exit_code = 0};
  cordon_race_score(&x);
  assert_true(x.correctness == 0.5);
  x = (struct cordon_race_outcome){.judged = true};
  cordon_race_score(&x);
  assert_true(x.correctness == 1);
  /* Everything removed: reversibility 0. */
  x = (struct cordon_race_outcome){.change = {.base_entries = 3, .removed = 2, .modified = 1}};
  cordon_race_score(&x);
  assert_true(x.reversibility == 0);
}

/* ---- races --------------------------------------------------------------------------------- */

static void test_same_race_same_bytes(void **state) {
  struct fixture *f = *state;
  _cleanup_free_ char *out1 = path_in(f, "r1.json"), *out2 = path_in(f, "r2.json");
  struct cordon_race_options o = options(f, 4, out1);
  struct cordon_race_result a = {0}, b = {0};
  race_ok(f, &o, &a);
  o.out_path = out2;
  o.jobs = 1; /* another schedule: the bytes must not care */
  race_ok(f, &o, &b);
  assert_int_equal(a.receipt_length, b.receipt_length);
  assert_memory_equal(a.receipt, b.receipt, a.receipt_length);
  assert_string_equal(a.receipt_sha256, b.receipt_sha256);
  /* The file is the receipt, byte for byte. */
  unsigned char *file = NULL;
  size_t len = 0;
  struct cordon_error *err = NULL;
  must(fs_read_file(out1, CORDON_DOCUMENT_MAX, &file, &len, &err), err, "read receipt");
  assert_int_equal(len, a.receipt_length);
  assert_memory_equal(file, a.receipt, len);
  free(file);
  /* Candidate 3 wins: correct, smallest change, nothing of the base touched. */
  assert_string_equal(a.candidates[a.winner].task_id, "candidate-3");
  assert_true(a.candidates[1].outcome.correctness == 0);
  assert_true(a.candidates[2].outcome.reversibility < 1);
  /* No clock, host or session id in the body. */
  char host[256] = "";
  gethostname(host, sizeof(host));
  assert_null(strstr(a.receipt, "\"time\":"));
  assert_null(strstr(a.receipt, "\"timestamp\":"));
  /* As a JSON string: a short host name can occur by chance inside a digest or a key. */
  char quoted_host[260];
  snprintf(quoted_host, sizeof(quoted_host), "\"%s\"", host);
  assert_true(!*host || !strstr(a.receipt, quoted_host));
  assert_null(strstr(a.receipt, f->dir));
  /* Sessions are gone; their snapshots stay. */
  assert_int_equal(count_sessions(f), 0);
  for (size_t i = 0; i < a.n_candidates; i++)
    assert_int_equal(cordon_cas_has(f->cas, a.candidates[i].snapshot, NULL), 1);
  assert_int_equal(verify(f, a.receipt, a.receipt_length, f->kid), CORDON_VERDICT_VERIFIED);
  assert_int_equal(verify(f, a.receipt, a.receipt_length, NULL), CORDON_VERDICT_UNANCHORED);
  enum cordon_audit_problem problem;
  assert_int_equal(audit_entries(f, &problem), 2);
  assert_int_equal(problem, CORDON_AUDIT_OK);
  cordon_race_result_clear(&a);
  cordon_race_result_clear(&b);
}

static void test_three_races_one_winner(void **state) {
  struct fixture *f = *state;
  _cleanup_free_ char *out = path_in(f, "r.json");
  char first[CORDON_RACE_TASK_ID_MAX] = "";
  for (int run = 0; run < 3; run++) {
    struct cordon_race_options o = options(f, 4, out);
    o.jobs = (unsigned)(run % 2 + 1);
    struct cordon_race_result res = {0};
    race_ok(f, &o, &res);
    const char *winner = res.candidates[res.winner].task_id;
    if (run == 0)
      snprintf(first, sizeof(first), "%s", winner);
    assert_string_equal(winner, first);
    cordon_race_result_clear(&res);
  }
}

static void test_judge_and_profile(void **state) {
  struct fixture *f = *state;
  _cleanup_free_ char *out = path_in(f, "r.json");
  /* The judge passes only where out is empty (candidate 10's 0 bytes: none here), so it
   * fails everywhere: correctness is the command's half. A profile on cost alone then picks
   * the smallest change. */
  static const char *const judge[] = {"sh", "-c", "test ! -s out", NULL};
  static const struct cordon_rank_axis axes[] = {{"cost", 1, CORDON_AXIS_COST}};
  static const struct cordon_rank_profile cost_only = {"cheap", axes, 1};
  struct cordon_race_options o = options(f, 4, out);
  o.judge_argv = judge;
  o.profile = &cost_only;
  o.allow_no_pass = true; /* no candidate passes the judge: rank them all anyway */
  struct cordon_race_result res = {0};
  race_ok(f, &o, &res);
  assert_false(res.no_pass);
  assert_non_null(strstr(res.receipt, "\"allow_no_pass\":true"));
  assert_non_null(strstr(res.receipt, "\"outcome\":\"winner\""));
  for (size_t i = 0; i < res.n_candidates; i++) {
    assert_true(res.candidates[i].outcome.judged);
    assert_int_equal(res.candidates[i].outcome.judge_exit_code, 1);
  }
  assert_true(res.candidates[0].outcome.correctness == 0.5);
  assert_true(res.candidates[1].outcome.correctness == 0);
  assert_string_equal(res.candidates[res.winner].task_id, "candidate-3");
  assert_non_null(strstr(res.receipt, "\"judge\":[\"sh\",\"-c\",\"test ! -s out\"]"));
  assert_non_null(strstr(res.receipt, "\"name\":\"cheap\""));
  assert_int_equal(verify(f, res.receipt, res.receipt_length, f->kid), CORDON_VERDICT_VERIFIED);
  cordon_race_result_clear(&res);
}

/* Nothing may have run: no session, no audit entry, no receipt. */
static void assert_nothing_ran(struct fixture *f, const char *out) {
  assert_int_equal(count_sessions(f), 0);
  enum cordon_audit_problem problem;
  assert_int_equal(audit_entries(f, &problem), 0);
  struct stat st;
  assert_true(out == NULL || stat(out, &st) < 0 || S_ISDIR(st.st_mode));
}

static void expect_refused(struct fixture *f, const struct cordon_race_options *o,
                           enum cordon_error_kind kind, const char *needle) {
  struct cordon_race_result res = {0};
  struct cordon_error *err = NULL;
  assert_true(cordon_race_run(f->ctx, o, &res, &err) < 0);
  assert_non_null(err);
  if (err->kind != kind || !strstr(err->message, needle))
    fail_msg("want kind %d and \"%s\", got kind %d: %s", kind, needle, err->kind, err->message);
  cordon_error_free(err);
  assert_nothing_ran(f, o->out_path);
}

static void test_refused_before_anything_runs(void **state) {
  struct fixture *f = *state;
  _cleanup_free_ char *out = path_in(f, "r.json"), *no_dir = path_in(f, "missing/r.json");
  struct cordon_race_options o = options(f, 0, out);
  expect_refused(f, &o, CORDON_ERR_USAGE, "K must be");
  o = options(f, CORDON_RACE_MAX_K + 1, out);
  expect_refused(f, &o, CORDON_ERR_USAGE, "K must be");
  o = options(f, 2, out);
  o.base = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
  expect_refused(f, &o, CORDON_ERR_NOT_FOUND, "is not a snapshot in the store");
  o.base = "not-a-digest";
  expect_refused(f, &o, CORDON_ERR_USAGE, "not a snapshot id");
  /* A blob that is not a manifest is not a snapshot either. */
  char blob[CORDON_DIGEST_HEX_SIZE];
  struct cordon_error *err = NULL;
  must(cordon_cas_put(f->cas, "plain", 5, NULL, NULL, blob, &err), err, "put");
  o.base = blob;
  expect_refused(f, &o, CORDON_ERR_INVALID, "is not a snapshot in the store");
  o = options(f, 2, no_dir);
  expect_refused(f, &o, CORDON_ERR_USAGE, "missing");
  o = options(f, 2, f->dir); /* a directory */
  expect_refused(f, &o, CORDON_ERR_USAGE, "Is a directory");
  o = options(f, 2, out);
  o.argv = (const char *const[]){NULL};
  expect_refused(f, &o, CORDON_ERR_USAGE, "no command");
  static const struct cordon_rank_axis speed[] = {{"speed", 1, CORDON_AXIS_BENEFIT}};
  static const struct cordon_rank_profile bad_profile = {"fast", speed, 1};
  o = options(f, 2, out);
  o.profile = &bad_profile;
  expect_refused(f, &o, CORDON_ERR_INVALID, "not \"speed\"");
  static const struct cordon_rank_axis zero[] = {{"cost", 0, CORDON_AXIS_COST}};
  static const struct cordon_rank_profile zero_profile = {"zero", zero, 1};
  o.profile = &zero_profile;
  expect_refused(f, &o, CORDON_ERR_INVALID, "positive");
  struct cordon_backend no_snapshot = cordon_backend_worktree;
  no_snapshot.capabilities &= ~(uint32_t)CORDON_CAP_SNAPSHOT;
  o = options(f, 2, out);
  o.backend = &no_snapshot;
  expect_refused(f, &o, CORDON_ERR_UNSUPPORTED, "does not declare SNAPSHOT");
  o = options(f, 2, out);
  o.key_dir = out; /* no key there */
  expect_refused(f, &o, CORDON_ERR_NOT_FOUND, "signing key");
}

/* A backend whose third resume fails: the race must stop, destroy the sessions that started,
 * run nothing and report that failure. */
static int resumes;
static pthread_mutex_t resumes_mu = PTHREAD_MUTEX_INITIALIZER;

static int failing_resume(struct cordon_session *s, const struct cordon_manifest *m,
                          const char *snapshot_id, struct cordon_error **err) {
  pthread_mutex_lock(&resumes_mu);
  int n = ++resumes;
  pthread_mutex_unlock(&resumes_mu);
  if (n == 3)
    return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0, "injected start failure");
  return cordon_backend_worktree.resume(s, m, snapshot_id, err);
}

static void test_candidate_fails_to_start(void **state) {
  struct fixture *f = *state;
  _cleanup_free_ char *out = path_in(f, "r.json"), *marker = path_in(f, "ran");
  struct cordon_backend flaky = cordon_backend_worktree;
  flaky.resume = failing_resume;
  resumes = 0;
  char script[256];
  snprintf(script, sizeof(script), "touch %s", marker);
  const char *const touch[] = {"sh", "-c", script, NULL};
  struct cordon_race_options o = options(f, 4, out);
  o.backend = &flaky;
  o.argv = touch;
  struct cordon_race_result res = {0};
  struct cordon_error *err = NULL;
  assert_true(cordon_race_run(f->ctx, &o, &res, &err) < 0);
  assert_non_null(err);
  assert_int_equal(err->kind, CORDON_ERR_UNAVAILABLE);
  assert_non_null(strstr(err->message, "injected start failure"));
  assert_non_null(strstr(err->message, "cannot start"));
  cordon_error_free(err);
  struct stat st;
  assert_true(stat(marker, &st) < 0); /* the command never ran */
  assert_nothing_ran(f, out);
}

/* A backend whose second terminal snapshot fails (as a candidate's forged overlay metacopy
 * did): that candidate is scored as failed, alone, and named in the receipt; the others are
 * ranked, one of them wins, the receipt verifies and no session is left. */
static int snapshots;

static int failing_snapshot(struct cordon_session *s, char **snapshot_id,
                            struct cordon_error **err) {
  pthread_mutex_lock(&resumes_mu);
  int n = ++snapshots;
  pthread_mutex_unlock(&resumes_mu);
  if (n == 2)
    return cordon_error_set(err, CORDON_ERR_INTEGRITY, 0, "injected snapshot failure");
  return cordon_backend_worktree.snapshot(s, snapshot_id, err);
}

static int failing_every_snapshot(struct cordon_session *s, char **snapshot_id,
                                  struct cordon_error **err) {
  (void)s, (void)snapshot_id;
  return cordon_error_set(err, CORDON_ERR_UNSUPPORTED, 0, "injected: a metacopy");
}

static void test_candidate_fails_alone(void **state) {
  struct fixture *f = *state;
  _cleanup_free_ char *out = path_in(f, "r.json");
  struct cordon_backend flaky = cordon_backend_worktree;
  flaky.snapshot = failing_snapshot;
  snapshots = 0;
  struct cordon_race_options o = options(f, 4, out);
  o.backend = &flaky;
  o.jobs = 1; /* the second snapshot is candidate-1's */
  struct cordon_race_result res = {0};
  race_ok(f, &o, &res);
  assert_int_equal(res.n_candidates, 4);
  size_t failed = 0;
  for (size_t i = 0; i < res.n_candidates; i++) {
    const struct cordon_race_candidate *c = &res.candidates[i];
    if (!c->failure)
      continue;
    failed++;
    assert_string_equal(c->task_id, "candidate-1");
    assert_string_equal(c->failure, CORDON_RACE_FAILURE_SNAPSHOT);
    assert_non_null(strstr(c->failure_detail, "injected snapshot failure"));
    assert_true(res.winner != i);
  }
  assert_int_equal(failed, 1);
  assert_non_null(strstr(res.receipt, "\"failed\":[{\"reason\":\"" CORDON_RACE_FAILURE_SNAPSHOT
                                      "\",\"task_id\":\"candidate-1\"}]"));
  assert_int_equal(verify(f, res.receipt, res.receipt_length, f->kid), CORDON_VERDICT_VERIFIED);
  assert_int_equal(count_sessions(f), 0);
  cordon_race_result_clear(&res);
  /* Every snapshot failing: no candidate passes; the receipt records it with no candidate
   * ranked, "winner": null, every one under "failed", and verifies. */
  snapshots = -100;
  flaky.snapshot = failing_every_snapshot;
  _cleanup_free_ char *out_none = path_in(f, "r-none.json");
  o.out_path = out_none;
  race_ok(f, &o, &res);
  assert_true(res.no_pass);
  assert_int_equal(res.winner, res.n_candidates);
  assert_non_null(strstr(res.receipt, "\"candidates\":[]"));
  assert_non_null(strstr(res.receipt, "\"winner\":null"));
  assert_int_equal(verify(f, res.receipt, res.receipt_length, f->kid), CORDON_VERDICT_VERIFIED);
  cordon_race_result_clear(&res);
  assert_int_equal(count_sessions(f), 0);
  /* With allow_no_pass there is no scored candidate to name: the race fails, nothing sealed. */
  snapshots = -100;
  o.allow_no_pass = true;
  struct cordon_error *err = NULL;
  _cleanup_free_ char *out2 = path_in(f, "r2.json");
  o.out_path = out2;
  assert_true(cordon_race_run(f->ctx, &o, &res, &err) < 0);
  assert_non_null(strstr(err->message, "no candidate could be scored"));
  cordon_error_free(err);
  struct stat st;
  assert_true(stat(out2, &st) < 0);
  assert_int_equal(count_sessions(f), 0);
}

/* The judge runs on the candidate's snapshot in a fresh session, never in the candidate's own:
 * a file the candidate leaves outside its tree (here: beside the worktree session, in the
 * session's state) or a process it leaves running cannot reach it. On worktree the candidate's
 * "outside" is its session directory; the judge checks that the marker the candidate wrote
 * there is gone and that the workspace is the snapshot. */
static void test_judge_in_fresh_session(void **state) {
  struct fixture *f = *state;
  _cleanup_free_ char *out = path_in(f, "r.json");
  /* Each candidate writes "mine" in its tree and "../outside" beside it; the judge passes only
   * when it sees "mine" (the snapshot) and not "../outside" (the candidate's session). */
  static const char *const cmd[] = {
      "sh", "-c",
      "echo $CORDON_CANDIDATE_INDEX > mine; echo left > ../outside.$$; "
      "echo $$ > pid",
      NULL};
  static const char *const judge[] = {"sh", "-c",
                                      "test -s mine && ! ls ../outside.* >/dev/null 2>&1", NULL};
  struct cordon_race_options o = options(f, 2, out);
  o.argv = cmd;
  o.judge_argv = judge;
  struct cordon_race_result res = {0};
  race_ok(f, &o, &res);
  for (size_t i = 0; i < res.n_candidates; i++) {
    assert_true(res.candidates[i].outcome.judged);
    assert_int_equal(res.candidates[i].outcome.judge_exit_code, 0);
  }
  assert_int_equal(verify(f, res.receipt, res.receipt_length, f->kid), CORDON_VERDICT_VERIFIED);
  assert_int_equal(count_sessions(f), 0);
  cordon_race_result_clear(&res);
}

/* A command past its timeout: killed, reported, scored as incorrect; the others unaffected. */
static void test_timeout(void **state) {
  struct fixture *f = *state;
  _cleanup_free_ char *out = path_in(f, "r.json");
  static const char *const slow_first[] = {"sh", "-c",
                                           "[ $CORDON_CANDIDATE_INDEX -ne 0 ] || sleep 30", NULL};
  struct cordon_race_options o = options(f, 2, out);
  o.argv = slow_first;
  o.timeout = 0.3;
  struct cordon_race_result res = {0};
  double t0 = fs_now();
  race_ok(f, &o, &res);
  assert_true(fs_now() - t0 < 20);
  assert_true(res.candidates[0].outcome.timed_out);
  assert_true(res.candidates[0].outcome.correctness == 0);
  assert_false(res.candidates[1].outcome.timed_out);
  assert_string_equal(res.candidates[res.winner].task_id, "candidate-1");
  assert_non_null(strstr(res.receipt, "\"timed_out\":true"));
  assert_int_equal(verify(f, res.receipt, res.receipt_length, f->kid), CORDON_VERDICT_VERIFIED);
  cordon_race_result_clear(&res);
}

/* ---- verification ------------------------------------------------------------------------- */

static void test_every_flipped_byte_fails(void **state) {
  struct fixture *f = *state;
  _cleanup_free_ char *out = path_in(f, "r.json");
  struct cordon_race_options o = options(f, 2, out);
  struct cordon_race_result res = {0};
  race_ok(f, &o, &res);
  char *copy = malloc(res.receipt_length);
  memcpy(copy, res.receipt, res.receipt_length);
  for (size_t i = 0; i < res.receipt_length; i++) {
    static const unsigned char flips[] = {0x01, 0x20, 0x80};
    for (size_t k = 0; k < sizeof(flips); k++) {
      copy[i] = (char)(res.receipt[i] ^ flips[k]);
      enum cordon_verdict v = verify(f, copy, res.receipt_length, f->kid);
      if (v != CORDON_VERDICT_FAILED)
        fail_msg("byte %zu ^ 0x%02x: verdict %s", i, flips[k], cordon_verdict_name(v));
    }
    copy[i] = res.receipt[i];
  }
  /* Truncated anywhere, or with a byte added: failed too. */
  for (size_t n = 0; n < res.receipt_length; n += 7)
    assert_int_equal(verify(f, copy, n, f->kid), CORDON_VERDICT_FAILED);
  free(copy);
  assert_int_equal(verify(f, res.receipt, res.receipt_length, f->kid), CORDON_VERDICT_VERIFIED);
  cordon_race_result_clear(&res);
}

/* Re-sign an altered body with the right key: only the consistency checks can catch it. */
static enum cordon_verdict resign_and_verify(struct fixture *f, const char *receipt,
                                             void (*alter)(json_t *body)) {
  json_t *doc = json_loads(receipt, 0, NULL);
  json_t *body = json_deep_copy(json_object_get(doc, "body"));
  json_decref(doc);
  json_object_del(body, "signer");
  alter(body);
  char *text = json_dumps(body, JSON_COMPACT);
  json_decref(body);
  struct cordon_signing_key *key = NULL;
  struct cordon_error *err = NULL;
  char *signed_doc = NULL;
  size_t len = 0;
  must(cordon_signing_key_load(f->keys, &key, &err), err, "key");
  must(cordon_document_sign(key, text, strlen(text), &signed_doc, &len, &err), err, "sign");
  cordon_signing_key_free(key);
  free(text);
  enum cordon_verdict v = verify(f, signed_doc, len, f->kid);
  free(signed_doc);
  return v;
}

static json_t *candidate(json_t *body, size_t i) {
  return json_array_get(json_object_get(body, "candidates"), i);
}

static void alter_nothing(json_t *body) {
  (void)body;
}
static void alter_winner_to_loser(json_t *body) {
  json_t *w = json_object_get(body, "winner"), *c0 = candidate(body, 0);
  json_object_set(w, "task_id", json_object_get(c0, "task_id"));
  json_object_set(w, "snapshot", json_object_get(c0, "snapshot"));
}
static void alter_drop_loser(json_t *body) {
  json_array_remove(json_object_get(body, "losers"), 0);
}
static void alter_score(json_t *body) {
  json_object_set_new(json_object_get(candidate(body, 1), "scores"), "correctness",
                      json_real(1)); /* candidate-1 failed: 0 */
}
static void alter_closeness(json_t *body) {
  json_object_set_new(candidate(body, 0), "closeness", json_real(0.999));
}
static void alter_digest(json_t *body) {
  json_object_set_new(body, "base", json_string("ABCDEF"));
}
static void alter_unknown_member(json_t *body) {
  json_object_set_new(body, "comment", json_string("hello"));
}
static void alter_order(json_t *body) {
  json_t *c = json_object_get(body, "candidates");
  json_t *first = json_incref(json_array_get(c, 0));
  json_array_remove(c, 0);
  json_array_append_new(c, first);
}
/* A ranked candidate also listed as failed; a failed entry with a member too many. */
static void alter_failed_and_ranked(json_t *body) {
  json_object_set_new(
      body, "failed",
      json_pack("[{s:s, s:s}]", "reason", CORDON_RACE_FAILURE_SNAPSHOT, "task_id", "candidate-1"));
}
static void alter_failed_malformed(json_t *body) {
  json_object_set_new(body, "failed",
                      json_pack("[{s:s, s:s, s:s}]", "reason", "x", "task_id", "candidate-9",
                                "detail", "/host/path"));
}
static void alter_failed_empty(json_t *body) {
  json_object_set_new(body, "failed", json_array());
}
/* The outcome and the winner disagree, or say what no race writes. */
static void alter_winner_null(json_t *body) {
  json_object_set_new(body, "winner", json_null());
}
static void alter_outcome_no_pass(json_t *body) {
  json_object_set_new(body, "outcome", json_string("no_pass"));
}
static void alter_outcome_unknown(json_t *body) {
  json_object_set_new(body, "outcome", json_string("draw"));
}
static void alter_allow_false(json_t *body) {
  json_object_set_new(body, "allow_no_pass", json_false());
}
/* Without an outcome (an older receipt) every candidate is ranked: the closeness recorded for
 * the passing ones alone no longer follows. */
static void alter_drop_outcome(json_t *body) {
  json_object_del(body, "outcome");
}
/* candidate-1 (its command exited 1) named the winner, the losers made to match. */
static void alter_failing_winner(json_t *body) {
  json_t *c1 = candidate(body, 1), *losers = json_array();
  json_object_set_new(body, "winner",
                      json_pack("{s:O, s:O}", "snapshot", json_object_get(c1, "snapshot"),
                                "task_id", json_object_get(c1, "task_id")));
  for (size_t i = 0; i < 4; i++)
    if (i != 1)
      json_array_append_new(losers,
                            json_pack("{s:O, s:O}", "snapshot",
                                      json_object_get(candidate(body, i), "snapshot"), "task_id",
                                      json_object_get(candidate(body, i), "task_id")));
  json_object_set_new(body, "losers", losers);
}
/* Scores consistent with a change that is not what the snapshots show. */
static void alter_change(json_t *body) {
  json_t *c = candidate(body, 3);
  json_t *change = json_object_get(c, "change"), *scores = json_object_get(c, "scores");
  json_object_set_new(change, "bytes_added", json_integer(1));
  /* The cost rule's measure, one line more, the cost with it: consistent, and not true. */
  json_t *lines = json_object_get(change, "lines_changed");
  json_object_set_new(change, "lines_changed", json_integer(json_integer_value(lines) + 1));
  json_object_set_new(scores, "cost",
                      json_real(json_number_value(json_object_get(scores, "cost")) + 1));
}
/* The change downgraded to the byte rule of older receipts, its cost with it, the profile
 * still naming the cost rule. */
static void alter_unmeasured(json_t *body) {
  json_t *c = candidate(body, 3);
  json_t *change = json_object_get(c, "change"), *scores = json_object_get(c, "scores");
  json_object_del(change, "bytes_changed");
  json_object_del(change, "lines_changed");
  json_object_del(change, "meta_changed");
  json_int_t cost = json_integer_value(json_object_get(change, "added")) +
                    json_integer_value(json_object_get(change, "removed")) +
                    json_integer_value(json_object_get(change, "modified")) +
                    json_integer_value(json_object_get(change, "bytes_added")) +
                    json_integer_value(json_object_get(change, "bytes_removed"));
  json_object_set_new(scores, "cost", json_real((double)cost));
}

static void test_consistency_checks(void **state) {
  struct fixture *f = *state;
  _cleanup_free_ char *out = path_in(f, "r.json");
  struct cordon_race_options o = options(f, 4, out);
  struct cordon_race_result res = {0};
  race_ok(f, &o, &res);
  /* candidate-1's command failed: listed, not ranked, not the winner. */
  assert_false(res.no_pass);
  assert_true(res.candidates[1].closeness == 0);
  assert_true(res.winner != 1);
  assert_int_equal(resign_and_verify(f, res.receipt, alter_nothing), CORDON_VERDICT_VERIFIED);
  void (*alterations[])(json_t *) = {alter_winner_to_loser,
                                     alter_drop_loser,
                                     alter_score,
                                     alter_closeness,
                                     alter_digest,
                                     alter_unknown_member,
                                     alter_order,
                                     alter_change,
                                     alter_unmeasured,
                                     alter_failed_and_ranked,
                                     alter_failed_malformed,
                                     alter_failed_empty,
                                     alter_winner_null,
                                     alter_outcome_no_pass,
                                     alter_outcome_unknown,
                                     alter_allow_false,
                                     alter_drop_outcome,
                                     alter_failing_winner};
  for (size_t i = 0; i < sizeof(alterations) / sizeof(alterations[0]); i++) {
    enum cordon_verdict v = resign_and_verify(f, res.receipt, alterations[i]);
    if (v != CORDON_VERDICT_FAILED)
      fail_msg("alteration %zu: verdict %s", i, cordon_verdict_name(v));
  }
  cordon_race_result_clear(&res);
}

/* No candidate passes (the judge fails every one): no winner, closeness 0 everywhere, every
 * candidate a loser, the receipt signed, kept, audited and verified; the same race twice
 * gives the same bytes; the body's consistency is still checked. */
static void no_pass_null_winner(json_t *body) {
  (void)body;
}
static void no_pass_with_winner(json_t *body) {
  json_t *c0 = candidate(body, 0);
  json_object_set_new(body, "winner",
                      json_pack("{s:O, s:O}", "snapshot", json_object_get(c0, "snapshot"),
                                "task_id", json_object_get(c0, "task_id")));
}
static void no_pass_closeness(json_t *body) {
  json_object_set_new(candidate(body, 2), "closeness", json_real(0.5));
}
static void no_pass_allowed(json_t *body) {
  json_object_set_new(body, "allow_no_pass", json_true());
}
static void no_pass_passing_candidate(json_t *body) {
  json_t *c = candidate(body, 0);
  json_object_set_new(json_object_get(c, "outcome"), "judge_exit_code", json_integer(0));
  json_object_set_new(json_object_get(c, "scores"), "correctness", json_real(1));
}
static void no_pass_outcome_winner(json_t *body) {
  json_object_set_new(body, "outcome", json_string("winner"));
}

static void test_no_pass(void **state) {
  struct fixture *f = *state;
  static const char *const judge[] = {"false", NULL};
  _cleanup_free_ char *out = path_in(f, "r.json"), *again = path_in(f, "r-again.json");
  struct cordon_race_options o = options(f, 4, out);
  o.judge_argv = judge;
  struct cordon_race_result res = {0}, twice = {0};
  race_ok(f, &o, &res);
  assert_true(res.no_pass);
  assert_int_equal(res.winner, res.n_candidates);
  for (size_t i = 0; i < res.n_candidates; i++) {
    assert_false(cordon_race_outcome_passed(&res.candidates[i].outcome));
    assert_true(res.candidates[i].closeness == 0);
  }
  assert_non_null(strstr(res.receipt, "\"winner\":null"));
  assert_non_null(strstr(res.receipt, "\"outcome\":\"no_pass\""));
  assert_null(strstr(res.receipt, "allow_no_pass"));
  enum cordon_audit_problem problem;
  assert_int_equal(audit_entries(f, &problem), 1);
  struct cordon_receipt_report r;
  struct cordon_error *err = NULL;
  must(cordon_receipt_verify(f->cas, res.receipt, res.receipt_length, f->kid, &r, &err), err,
       "verify");
  assert_int_equal(r.verdict, CORDON_VERDICT_VERIFIED);
  assert_string_equal(r.outcome, CORDON_RACE_OUTCOME_NO_PASS);
  assert_null(r.winner_task);
  assert_int_equal(r.n_candidates, 4);
  cordon_receipt_report_clear(&r);
  o.out_path = again;
  race_ok(f, &o, &twice);
  assert_int_equal(twice.receipt_length, res.receipt_length);
  assert_memory_equal(twice.receipt, res.receipt, res.receipt_length);
  cordon_race_result_clear(&twice);
  assert_int_equal(resign_and_verify(f, res.receipt, no_pass_null_winner), CORDON_VERDICT_VERIFIED);
  void (*alterations[])(json_t *) = {no_pass_with_winner,    no_pass_closeness,
                                     no_pass_allowed,        no_pass_passing_candidate,
                                     no_pass_outcome_winner, alter_drop_loser};
  for (size_t i = 0; i < sizeof(alterations) / sizeof(alterations[0]); i++) {
    enum cordon_verdict v = resign_and_verify(f, res.receipt, alterations[i]);
    if (v != CORDON_VERDICT_FAILED)
      fail_msg("no-pass alteration %zu: verdict %s", i, cordon_verdict_name(v));
  }
  cordon_race_result_clear(&res);
}

/* The store path of a file blob that only a loser has (its "out" of its own size). */
/* Where the loser's "out" blob is stored: the file holding it (its own, or a pack) and where
 * its bytes start there. */
static char *loser_blob(struct fixture *f, const struct cordon_race_result *res, uint64_t *offset,
                        uint64_t *size) {
  size_t loser = res->winner == 0 ? 1 : 0;
  struct cordon_snapshot_entry *e = NULL;
  size_t n = 0;
  struct cordon_error *err = NULL;
  must(cordon_snapshot_entries(f->cas, res->candidates[loser].snapshot, &e, &n, &err), err,
       "entries");
  char *path = NULL;
  for (size_t i = 0; i < n; i++) {
    if (strcmp(e[i].path, "out") != 0)
      continue;
    struct cordon_blob_info info;
    must(cordon_cas_info(f->cas, e[i].digest, &info, &err), err, "info");
    if (asprintf(&path, "%s/%s", cordon_cas_dir(f->cas), info.location) < 0)
      abort();
    *offset = info.offset;
    *size = info.size;
    cordon_blob_info_clear(&info);
  }
  cordon_snapshot_entries_free(e, n);
  assert_non_null(path);
  return path;
}

static void flip_at(const char *path, uint64_t at) {
  int fd = open(path, O_RDWR);
  assert_true(fd >= 0);
  unsigned char c;
  assert_int_equal(pread(fd, &c, 1, (off_t)at), 1);
  c ^= 1;
  assert_int_equal(pwrite(fd, &c, 1, (off_t)at), 1);
  close(fd);
}

static void test_tampered_store(void **state) {
  struct fixture *f = *state;
  _cleanup_free_ char *out = path_in(f, "r.json");
  struct cordon_race_options o = options(f, 4, out);
  struct cordon_race_result res = {0};
  race_ok(f, &o, &res);
  uint64_t offset = 0, size = 0;
  _cleanup_free_ char *blob = loser_blob(f, &res, &offset, &size);
  assert_true(size > 0);
  assert_int_equal(verify(f, res.receipt, res.receipt_length, f->kid), CORDON_VERDICT_VERIFIED);

  /* One byte flipped: failed. */
  chmod(blob, 0644);
  flip_at(blob, offset + size / 2);
  assert_int_equal(verify(f, res.receipt, res.receipt_length, f->kid), CORDON_VERDICT_FAILED);
  flip_at(blob, offset + size / 2);
  chmod(blob, 0444);
  assert_int_equal(verify(f, res.receipt, res.receipt_length, f->kid), CORDON_VERDICT_VERIFIED);

  /* Deleted (the file that holds it): incomplete. */
  _cleanup_free_ char *saved = path_in(f, "saved");
  assert_int_equal(rename(blob, saved), 0);
  assert_int_equal(verify(f, res.receipt, res.receipt_length, f->kid), CORDON_VERDICT_INCOMPLETE);
  /* Without an expected key the precedence still puts incomplete first. */
  assert_int_equal(verify(f, res.receipt, res.receipt_length, NULL), CORDON_VERDICT_INCOMPLETE);

  /* A FIFO in its place: unreadable, without hanging (the alarm fails the test otherwise). */
  assert_int_equal(mkfifo(blob, 0644), 0);
  alarm(20);
  double t0 = fs_now();
  assert_int_equal(verify(f, res.receipt, res.receipt_length, f->kid), CORDON_VERDICT_UNREADABLE);
  assert_true(fs_now() - t0 < 5);
  alarm(0);
  unlink(blob);

  /* A symlink to the right bytes: still unreadable (links are never followed). */
  assert_int_equal(symlink(saved, blob), 0);
  assert_int_equal(verify(f, res.receipt, res.receipt_length, f->kid), CORDON_VERDICT_UNREADABLE);
  unlink(blob);

  /* Restored: verified again. */
  assert_int_equal(rename(saved, blob), 0);
  assert_int_equal(verify(f, res.receipt, res.receipt_length, f->kid), CORDON_VERDICT_VERIFIED);
  cordon_race_result_clear(&res);
}

static void test_expected_key_and_file(void **state) {
  struct fixture *f = *state;
  _cleanup_free_ char *out = path_in(f, "r.json"), *missing = path_in(f, "nope.json");
  struct cordon_race_options o = options(f, 2, out);
  struct cordon_race_result res = {0};
  race_ok(f, &o, &res);
  char other[CORDON_KEY_ID_LEN + 1];
  memset(other, 'A', CORDON_KEY_ID_LEN);
  other[CORDON_KEY_ID_LEN] = 0;
  assert_int_equal(verify(f, res.receipt, res.receipt_length, other), CORDON_VERDICT_FAILED);
  struct cordon_receipt_report r;
  struct cordon_error *err = NULL;
  must(cordon_receipt_verify_file(f->cas, out, f->kid, &r, &err), err, "verify file");
  assert_int_equal(r.verdict, CORDON_VERDICT_VERIFIED);
  assert_string_equal(r.winner_task, res.candidates[res.winner].task_id);
  assert_string_equal(r.base, f->base);
  assert_int_equal(r.n_candidates, 2);
  assert_true(r.blobs_checked >= 3);
  cordon_receipt_report_clear(&r);
  must(cordon_receipt_verify_file(f->cas, missing, f->kid, &r, &err), err, "verify missing");
  assert_int_equal(r.verdict, CORDON_VERDICT_INCOMPLETE);
  cordon_receipt_report_clear(&r);
  must(cordon_receipt_verify_file(f->cas, f->dir, f->kid, &r, &err), err, "verify dir");
  assert_int_equal(r.verdict, CORDON_VERDICT_UNREADABLE);
  cordon_receipt_report_clear(&r);
  /* Without a store the snapshots cannot be checked. */
  assert_int_equal(verify(f, res.receipt, res.receipt_length, NULL), CORDON_VERDICT_UNANCHORED);
  must(cordon_receipt_verify(NULL, res.receipt, res.receipt_length, f->kid, &r, &err), err,
       "verify without store");
  assert_int_equal(r.verdict, CORDON_VERDICT_INCOMPLETE);
  cordon_receipt_report_clear(&r);
  cordon_race_result_clear(&res);
}

/* ---- concurrency --------------------------------------------------------------------------- */

struct concurrent {
  struct fixture *f;
  int n;
  int rc;
  char winner[CORDON_RACE_TASK_ID_MAX];
};

static void *concurrent_race(void *arg) {
  struct concurrent *c = arg;
  char out[160];
  snprintf(out, sizeof(out), "%s/r%d.json", c->f->dir, c->n);
  struct cordon_context *ctx = NULL;
  struct cordon_error *err = NULL;
  struct cordon_race_options o = options(c->f, 3, out);
  struct cordon_race_result res = {0};
  c->rc = cordon_context_open(c->f->project, &ctx, &err) < 0 ? -1
                                                             : cordon_race_run(ctx, &o, &res, &err);
  if (c->rc == 0)
    snprintf(c->winner, sizeof(c->winner), "%s", res.candidates[res.winner].task_id);
  else
    fprintf(stderr, "race %d: %s\n", c->n, err ? err->message : "?");
  cordon_error_free(err);
  cordon_race_result_clear(&res);
  cordon_context_free(ctx);
  return NULL;
}

static void test_concurrent_races_one_chain(void **state) {
  struct fixture *f = *state;
  struct concurrent c[4];
  pthread_t t[4];
  for (int i = 0; i < 4; i++) {
    c[i] = (struct concurrent){.f = f, .n = i};
    assert_int_equal(pthread_create(&t[i], NULL, concurrent_race, &c[i]), 0);
  }
  for (int i = 0; i < 4; i++)
    pthread_join(t[i], NULL);
  for (int i = 0; i < 4; i++) {
    assert_int_equal(c[i].rc, 0);
    assert_string_equal(c[i].winner, c[0].winner);
  }
  enum cordon_audit_problem problem;
  assert_int_equal(audit_entries(f, &problem), 4);
  assert_int_equal(problem, CORDON_AUDIT_OK);
  assert_int_equal(count_sessions(f), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_change_and_scores),
      cmocka_unit_test(test_outcome_passed),
      cmocka_unit_test_setup_teardown(test_same_race_same_bytes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_three_races_one_winner, setup, teardown),
      cmocka_unit_test_setup_teardown(test_judge_and_profile, setup, teardown),
      cmocka_unit_test_setup_teardown(test_refused_before_anything_runs, setup, teardown),
      cmocka_unit_test_setup_teardown(test_candidate_fails_to_start, setup, teardown),
      cmocka_unit_test_setup_teardown(test_candidate_fails_alone, setup, teardown),
      cmocka_unit_test_setup_teardown(test_judge_in_fresh_session, setup, teardown),
      cmocka_unit_test_setup_teardown(test_timeout, setup, teardown),
      cmocka_unit_test_setup_teardown(test_every_flipped_byte_fails, setup, teardown),
      cmocka_unit_test_setup_teardown(test_consistency_checks, setup, teardown),
      cmocka_unit_test_setup_teardown(test_no_pass, setup, teardown),
      cmocka_unit_test_setup_teardown(test_tampered_store, setup, teardown),
      cmocka_unit_test_setup_teardown(test_expected_key_and_file, setup, teardown),
      cmocka_unit_test_setup_teardown(test_concurrent_races_one_chain, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
