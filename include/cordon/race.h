/* cordon — ranking race candidates (TOPSIS) and fork-and-race (below).
 *
 * A profile names the axes a candidate is scored on, each with a weight and a direction
 * (benefit: more is better; cost: less is better). cordon_rank_topsis() is a pure function:
 * candidates are first sorted by key (the task id), so the result never depends on the order
 * in which they finished; each column is divided by its L2 norm (a column of zeros stays 0);
 * weights are divided by their sum; the ideal and anti-ideal take the best and worst weighted
 * value of each axis; a candidate's closeness is d- / (d+ + d-), its distances to them (0 when
 * both are 0, as for a single candidate); the result is ordered by closeness, highest first,
 * ties by key. Duplicate keys, missing or unknown scores and non-finite values are errors.
 *
 * The default profile has no wall-clock axis: correctness (benefit, weight 3), cost (cost, 1),
 * reversibility (benefit, 1). */
#ifndef CORDON_RACE_H
#define CORDON_RACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cordon/cas.h>
#include <cordon/error.h>

#ifdef __cplusplus
extern "C" {
#endif

enum cordon_axis_direction {
  CORDON_AXIS_BENEFIT = 0,
  CORDON_AXIS_COST,
};

struct cordon_rank_axis {
  const char *name;
  double weight; /* finite, >= 0; the profile's weights must have a positive sum */
  enum cordon_axis_direction direction;
};

struct cordon_rank_profile {
  const char *name;
  const struct cordon_rank_axis *axes;
  size_t n_axes;
  /* NULL, or the cost rule the scores were measured by (CORDON_COST_RULE, below): a race names
   * it in its receipt's profile, so a receipt says how its costs were counted. */
  const char *cost_rule;
};

struct cordon_rank_score {
  const char *axis;
  double value; /* finite */
};

struct cordon_rank_candidate {
  const char *key;                        /* the task id; unique, non-empty */
  const struct cordon_rank_score *scores; /* exactly one per profile axis, any order */
  size_t n_scores;
};

struct cordon_rank_result {
  char *key;
  size_t input_index; /* the candidate's position in the caller's array */
  double closeness;   /* in [0, 1] */
  double distance_ideal;
  double distance_anti;
};

CORDON_API const struct cordon_rank_profile *cordon_rank_default_profile(void);
CORDON_API const char *cordon_axis_direction_name(enum cordon_axis_direction direction);

/* Check a profile: at least one axis, unique non-empty names, valid directions, finite
 * non-negative weights with a positive finite sum. */
CORDON_API int cordon_rank_profile_check(const struct cordon_rank_profile *profile,
                                         struct cordon_error **err);

/* Rank count (>= 1) candidates; *results (count entries, best first) is freed with
 * cordon_rank_results_free. */
CORDON_API int cordon_rank_topsis(const struct cordon_rank_profile *profile,
                                  const struct cordon_rank_candidate *candidates, size_t count,
                                  struct cordon_rank_result **results, struct cordon_error **err);
CORDON_API void cordon_rank_results_free(struct cordon_rank_result *results, size_t count);

/* A profile as JSON: {"axes":[{"direction":"benefit","name":...,"weight":...},...],
 * "cost_rule":... (optional), "method":"topsis","name":...}. Parsing is strict (unknown members
 * refused) and bounded; the result is checked and freed with cordon_rank_profile_free. to_json
 * gives canonical JSON (RFC 8785), the form bound into selection receipts. */
CORDON_API int cordon_rank_profile_parse(const char *text, size_t length,
                                         struct cordon_rank_profile **out,
                                         struct cordon_error **err);
CORDON_API void cordon_rank_profile_free(struct cordon_rank_profile *profile);
CORDON_API int cordon_rank_profile_to_json(const struct cordon_rank_profile *profile, char **out,
                                           struct cordon_error **err);

/* ---- fork-and-race ------------------------------------------------------------------------
 * cordon_race_run() resumes K candidate sessions from one base snapshot on a backend that
 * declares SNAPSHOT, runs the same argv in each (CORDON_CANDIDATE_INDEX=0..K-1 in its
 * environment), takes each terminal snapshot, optionally runs a judge on each (in a fresh
 * session of the same backend resumed from that snapshot: nothing of the candidate's session,
 * its processes, /tmp or root file system, reaches the judge), scores and ranks the
 * candidates, and writes a signed selection receipt (docs/formats.md): canonical JSON
 * that holds no clock, run id or host value, so the same race gives the same bytes. Everything
 * is checked before the first session starts; the candidates run concurrently, at most one per
 * core; if any fails to start, none runs and every started one is destroyed. A candidate whose
 * terminal snapshot cannot be taken (or judged) is scored as failed, alone. Only candidates that
 * pass (cordon_race_outcome_passed) can win; when none does, the receipt is sealed all the same
 * with no winner (result->no_pass), unless allow_no_pass ranks every scored candidate. */

struct cordon_context;
struct cordon_backend;
struct cordon_snapshot_entry;

#define CORDON_RACE_MAX_K 256u
#define CORDON_RACE_TASK_ID_MAX 32 /* "candidate-N" and its NUL */
#define CORDON_RECEIPT_TYPE "cordon.selection-receipt.v1"

/* The score axes a race produces; a profile may weigh any subset of them. */
#define CORDON_SCORE_CORRECTNESS "correctness"
#define CORDON_SCORE_COST "cost"
#define CORDON_SCORE_REVERSIBILITY "reversibility"

/* How a terminal snapshot differs from the base, from the two manifests alone (pure). An
 * entry is changed when its kind, mode, size, content digest, link target or device numbers
 * differ; its "content" is a file's bytes or a symlink's target. */
struct cordon_race_change {
  uint64_t base_entries; /* entries of the base, the root included (>= 1) */
  uint64_t added, removed, modified;
  uint64_t bytes_added;   /* content of added entries and the new content of modified ones */
  uint64_t bytes_removed; /* content of removed entries and the old content of modified ones */
  /* What the cost rule (CORDON_COST_RULE, docs/formats.md) measures, read from the blobs by
   * cordon_race_change_measure; all 0 and content_measured false from the manifests alone
   * (cordon_race_change_compute) and in receipts written before the rule. */
  uint64_t lines_changed; /* text: lines removed + added by a minimal line diff against the base */
  uint64_t bytes_changed; /* binary (a NUL in the first 8 KiB): bytes that differ */
  uint64_t meta_changed;  /* entries kept whose kind, mode, link target or device changed */
  bool content_measured;
};

/* The name of the cost rule; a profile written into a receipt names it (cost_rule). */
#define CORDON_COST_RULE "changed-lines.v1"
/* A file larger than this (either side) is not read: it costs its old and new size in bytes. */
#define CORDON_RACE_DIFF_MAX_BYTES (32u << 20)

/* Both arrays in any order; paths are compared as bytes. */
CORDON_API int cordon_race_change_compute(const struct cordon_snapshot_entry *base, size_t n_base,
                                          const struct cordon_snapshot_entry *terminal,
                                          size_t n_terminal, struct cordon_race_change *out,
                                          struct cordon_error **err);
/* The same, and what the cost rule measures: each file added, removed or modified is read from
 * cas by its digest (verified, as every read of the store) and compared with its base. */
CORDON_API int cordon_race_change_measure(struct cordon_cas *cas,
                                          const struct cordon_snapshot_entry *base, size_t n_base,
                                          const struct cordon_snapshot_entry *terminal,
                                          size_t n_terminal, struct cordon_race_change *out,
                                          struct cordon_error **err);

/* One candidate's outcome and its score vector (pure, see cordon_race_score):
 *   correctness   (benefit) without a judge: 1 when the command exited 0 (not timed out), else
 *                 0; with a judge: the mean of the command's and the judge's pass (0, 0.5, 1);
 *   cost          (cost) measured (CORDON_COST_RULE): entries added + removed + meta_changed +
 *                 lines_changed + bytes_changed, so a one-line fix in a large file costs 2;
 *                 not measured (older receipts): changed entries + bytes_added + bytes_removed;
 *   reversibility (benefit) the share of the base's entries the candidate left untouched,
 *                 (base_entries - removed - modified) / base_entries, in [0, 1]: a candidate
 *                 that only adds is fully reversible by deleting what it added. */
struct cordon_race_outcome {
  int exit_code;
  bool timed_out;
  bool judged;
  int judge_exit_code;
  bool judge_timed_out;
  struct cordon_race_change change;
  double correctness, cost, reversibility;
};

CORDON_API void cordon_race_score(struct cordon_race_outcome *outcome);

/* A candidate passes when its command exited 0 without timing out and, when it was judged, the
 * judge did too (pure). Only a passing candidate can win a race (unless allow_no_pass). */
CORDON_API bool cordon_race_outcome_passed(const struct cordon_race_outcome *outcome);

/* A receipt's "outcome": a winner was chosen, or no candidate passed ("winner": null). */
#define CORDON_RACE_OUTCOME_WINNER "winner"
#define CORDON_RACE_OUTCOME_NO_PASS "no_pass"

enum cordon_race_phase {
  CORDON_RACE_WAITING = 0,
  CORDON_RACE_STARTING, /* resuming from the base */
  CORDON_RACE_READY,    /* started; waiting for every candidate to start */
  CORDON_RACE_RUNNING,  /* the command */
  CORDON_RACE_SNAPSHOT, /* the terminal snapshot */
  CORDON_RACE_JUDGING,  /* the judge */
  CORDON_RACE_DONE,
  CORDON_RACE_FAILED,    /* an error (not a non-zero exit: that is DONE) */
  CORDON_RACE_CANCELLED, /* stopped because another candidate failed */
};

CORDON_API const char *cordon_race_phase_name(enum cordon_race_phase phase);

struct cordon_race_event {
  size_t index;
  const char *task_id;
  enum cordon_race_phase phase;
  const struct cordon_race_outcome *outcome; /* with DONE */
};

/* Progress: update is called from the race's threads, one call at a time. */
struct cordon_race_observer {
  void (*update)(void *data, const struct cordon_race_event *event);
  void *data;
};

/* ---- logs (docs/formats.md, "logs") ------------------------------------------------------
 * Each candidate's stdout and stderr, and its judge's, are kept up to a bound per stream (the
 * first log_limit bytes; past it the stream is read to its end and counted, not kept, and the
 * log is marked truncated). Their digests go into the receipt; the bytes stay with the result. */
enum cordon_race_log_stream {
  CORDON_RACE_LOG_STDOUT = 0,
  CORDON_RACE_LOG_STDERR,
  CORDON_RACE_LOG_JUDGE_STDOUT,
  CORDON_RACE_LOG_JUDGE_STDERR,
  CORDON_RACE_LOG_STREAMS,
};

#define CORDON_RACE_LOG_DEFAULT_LIMIT (1u << 20) /* bytes kept per stream unless log_limit */
#define CORDON_RACE_LOG_MAX_LIMIT (1u << 30)

/* "stdout", "stderr", "judge_stdout", "judge_stderr": the names in receipts and --json. */
CORDON_API const char *cordon_race_log_name(enum cordon_race_log_stream stream);

struct cordon_race_log {
  bool present;        /* the stream ran (a judge's only when the judge ran) */
  unsigned char *data; /* the kept bytes (malloc'd, NUL-terminated; length excludes it) */
  size_t length;
  uint64_t total;                      /* bytes written, including those past the bound */
  bool truncated;                      /* total > length */
  char sha256[CORDON_DIGEST_HEX_SIZE]; /* of the kept bytes */
};

/* Live output (--stream): called from the race's threads as a candidate's (or its judge's)
 * bytes arrive, in chunks that may end mid-line; one thread per candidate at a time, so the
 * calls for one candidate never overlap, but those of different candidates may. A call with
 * length 0 (bytes NULL) says the stream has ended. */
struct cordon_race_output {
  void (*write)(void *data, size_t index, enum cordon_race_log_stream stream, const void *bytes,
                size_t length);
  void *data;
};

/* What one candidate alone receives (`cordon race --candidate/--candidate-env/--patch`): files
 * written into its workspace, then the patch applied (strictly: exact context, no fuzz), before
 * its command; env is added to its command's environment only (not the judge's). A patch that
 * does not apply fails that candidate (CORDON_RACE_FAILURE_PATCH), not the race. */
struct cordon_race_inputs {
  const struct cordon_file_spec *files;
  size_t n_files;
  const char *const *env; /* "KEY=VALUE"; NULL: none */
  const void *patch;      /* a unified diff; NULL: none */
  size_t patch_length;
};

struct cordon_race_options {
  const char *base;                            /* the base snapshot id (64 hex digits) */
  unsigned k;                                  /* 1..CORDON_RACE_MAX_K candidates */
  const struct cordon_backend *backend;        /* must declare SNAPSHOT */
  const char *const *argv;                     /* the command; never a shell */
  const char *const *judge_argv;               /* NULL or empty: no judge */
  const struct cordon_rank_profile *profile;   /* NULL: the default profile */
  const char *out_path;                        /* where the receipt is written (atomically) */
  double timeout;                              /* per command and judge, seconds; 0: none */
  unsigned jobs;                               /* candidates at a time; 0: online cores */
  const char *key_dir;                         /* NULL: cordon_key_dir() */
  const char *actor;                           /* audit actor; NULL: "uid:N" */
  const struct cordon_race_observer *observer; /* may be NULL */
  /* Limits on what a candidate can write (0: the defaults, CORDON_DEFAULT_FSIZE_BYTES and
   * CORDON_SNAPSHOT_DEFAULT_MAX_BYTES; CORDON_LIMIT_UNLIMITED / CORDON_SNAPSHOT_UNLIMITED:
   * none). A candidate whose tree is over the snapshot limit has no terminal snapshot. */
  uint64_t fsize_bytes;
  uint64_t max_snapshot_bytes;
  /* false: only passing candidates (cordon_race_outcome_passed) are ranked and can win; when
   * none passes the receipt says "winner": null, "outcome": "no_pass" and result->no_pass is
   * set. true: every scored candidate is ranked and the best wins, pass or not (recorded in
   * the receipt as "allow_no_pass": true). */
  bool allow_no_pass;
  /* Workspace-relative paths (NULL or NULL-terminated; normalised and checked as `run` does):
   * read_only and hidden are enforced in every candidate's sandbox (policy.read_only and
   * policy.hidden, so the backend must enforce them); a candidate whose terminal snapshot
   * differs from the base at or under a path of any of the three lists fails
   * (CORDON_RACE_FAILURE_PROTECTED). The judge runs on the candidate's tree with every path of
   * the three lists as the base has it (a hidden file included), and the receipt records the
   * lists ("protected_paths"). */
  const char *const *read_only;
  const char *const *hidden;
  const char *const *protect;
  /* Logs: bytes kept per stream (0: CORDON_RACE_LOG_DEFAULT_LIMIT, at most
   * CORDON_RACE_LOG_MAX_LIMIT); output: NULL, or where every byte goes as it arrives. */
  uint64_t log_limit;
  const struct cordon_race_output *output;
  /* The manifest every session of the race starts from (run's options: env, files, allow_ro,
   * net, limits, image); NULL: the defaults. The race sets ephemeral and one_shot itself, and
   * fsize_bytes above, when not 0, wins over its policy's. Sealed in the receipt by digest. */
  const struct cordon_manifest *manifest;
  /* NULL, or k entries: candidate i's own inputs. Sealed in the receipt by digest. */
  const struct cordon_race_inputs *inputs;
};

/* Why a candidate was scored as failed rather than ranked: its terminal snapshot could not be
 * taken (e.g. an upper layer the walker refuses), or the judge's sandbox could not be created
 * from it. Fixed text: the receipt records it, and receipts hold nothing of the host. */
#define CORDON_RACE_FAILURE_SNAPSHOT "the terminal snapshot cannot be taken"
#define CORDON_RACE_FAILURE_JUDGE_SANDBOX "the judge's sandbox cannot be created from the snapshot"
/* The candidate added, removed or changed something under a protected path (failure_detail
 * names the first such path). */
#define CORDON_RACE_FAILURE_PROTECTED "a protected path was changed"
#define CORDON_RACE_FAILURE_PATCH "the candidate's patch does not apply"
#define CORDON_RACE_FAILURE_MAX 128 /* a reason's bytes in a receipt, its NUL excluded */

struct cordon_race_candidate {
  char task_id[CORDON_RACE_TASK_ID_MAX];
  size_t index;                          /* CORDON_CANDIDATE_INDEX */
  char snapshot[CORDON_DIGEST_HEX_SIZE]; /* "" when failed before its snapshot */
  struct cordon_race_outcome outcome;
  double closeness;
  /* NULL: ranked. Else one of CORDON_RACE_FAILURE_*: not ranked, never the winner, listed
   * under "failed" in the receipt; failure_detail holds the error (not in the receipt). */
  const char *failure;
  char failure_detail[256];
  /* The command's and the judge's output, kept (CORDON_RACE_LOG_*); freed with the result. */
  struct cordon_race_log logs[CORDON_RACE_LOG_STREAMS];
};

struct cordon_race_result {
  struct cordon_race_candidate *candidates; /* k, sorted by task id */
  size_t n_candidates;
  size_t winner; /* index into candidates; n_candidates when no_pass */
  char *receipt; /* the signed document, newline-terminated */
  size_t receipt_length;
  char receipt_sha256[CORDON_DIGEST_HEX_SIZE];
  char audit_hmac[CORDON_DIGEST_HEX_SIZE]; /* of the race.select entry */
  /* No candidate passed: there is no winner (winner == n_candidates), the receipt is written,
   * signed and audited all the same, with "winner": null. */
  bool no_pass;
};

CORDON_API int cordon_race_run(struct cordon_context *ctx,
                               const struct cordon_race_options *options,
                               struct cordon_race_result *result, struct cordon_error **err);
CORDON_API void cordon_race_result_clear(struct cordon_race_result *result);

#ifdef __cplusplus
}
#endif
#endif
