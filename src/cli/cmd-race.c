/* `cordon race`: fork K candidates from a snapshot, run one command in each, rank their
 * results and write a signed selection receipt (the work is cordon_race_run's; this file
 * parses flags, draws the live view of the candidates on a terminal and prints the outcome). */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <pthread.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cordon/race.h>
#include <cordon/receipt.h>
#include <cordon/session.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/strv.h"
#include "cli/cli.h"
#include "cli/race-logs.h"
#include "cli/race-inputs.h"
#include "race/forms.h"

#define PROFILE_FILE_MAX (64u * 1024u)
/* Above this many candidates the live view is one summary line instead of one per candidate. */
#define VIEW_MAX_ROWS 16

static const char race_usage[] =
    "usage: cordon race --base ID --k K --out RECEIPT [options] -- ARGV...\n"
    "\n"
    "Fork K candidate sessions from the snapshot ID, run ARGV (never a shell) in each with\n"
    "CORDON_CANDIDATE_INDEX=0..K-1 set, take each terminal snapshot, score and rank the\n"
    "candidates (TOPSIS) and write a signed selection receipt naming the winner. The receipt\n"
    "holds no time, host or run id: the same race gives the same bytes. It is also appended\n"
    "to the audit chain; check it later with 'cordon receipt verify'.\n"
    "\n"
    "  --base ID          the snapshot every candidate starts from\n"
    "  --k K              the number of candidates, 1..256\n"
    "  --out RECEIPT      where to write the receipt (atomically)\n"
    "  --backend B        a backend that declares SNAPSHOT (default: $CORDON_BACKEND, else\n"
    "                     the default backend)\n"
    "  --profile FILE     ranking profile, JSON: {\"axes\":[{\"name\",\"direction\",\"weight\"}],\n"
    "                     \"name\"}; axes among correctness, cost, reversibility (default:\n"
    "                     correctness 3 benefit, cost 1 cost, reversibility 1 benefit)\n"
    "  --judge WORD       one word of a judge command run on each candidate's terminal\n"
    "                     snapshot, in a fresh sandbox resumed from it (nothing else of the\n"
    "                     candidate's) (repeat for every word: --judge test --judge -f\n"
    "                     --judge out); it sees CORDON_CANDIDATE_INDEX and\n"
    "                     CORDON_CANDIDATE_EXIT_CODE, its exit code counts for correctness\n"
    "  --timeout SECONDS  limit for the command and for the judge (default: none)\n"
    "  --jobs N           candidates run at once (default: the number of cores)\n"
    "  --fsize SIZE       the largest file a candidate may write (default 4G; 0 or\n"
    "                     unlimited: none)\n"
    // clang-format off
    RACE_INPUT_HELP
    // clang-format on
    "  --monitor NAME     with --backend microvm: the VM monitor (qemu, firecracker, libkrun,\n"
    "                     fake), as for 'cordon run'\n"
    "  --max-snapshot-bytes SIZE\n"
    "                     the most a candidate's terminal tree may hold in files (default\n"
    "                     8G; 0 or unlimited: none); a candidate over it has no snapshot\n"
    "  --allow-no-pass    let a candidate that did not pass win (today's ranking of every\n"
    "                     scored candidate, exit 0); recorded in the receipt\n"
    "  --judge-cmd JSON   the judge's whole argv as a JSON array of strings,\n"
    "                     '[\"sh\", \"-c\", \"make test\"]'; or put it after the command:\n"
    "                     -- CMD ARGS... --judge -- JUDGE ARGS... (one form per race)\n"
    "  --ro PATH          a workspace path the candidates cannot write (as run --ro)\n"
    "  --hide PATH        a workspace path the candidates cannot see (as run --hide); the\n"
    "                     judge sees it\n"
    "  --protect PATH     a workspace path the candidates may touch but not change\n"
    "                     (repeat each; a candidate whose terminal snapshot differs from the\n"
    "                     base under a --ro, --hide or --protect path fails: \"a protected\n"
    "                     path was changed\"; its judge runs on its tree with those paths\n"
    "                     as the base has them; the receipt lists them)\n"
    "  --json             print the outcome as JSON\n"
    "  --logs DIR         write each candidate's and judge's stdout and stderr into DIR\n"
    "                     (made 0700 if missing): candidate-N.stdout, .stderr,\n"
    "                     .judge.stdout, .judge.stderr, and logs.json (sizes, digests, flags)\n"
    "  --log-limit SIZE   bytes kept of each stream (default 1M, at most 1G): the first SIZE\n"
    "                     bytes; the rest is counted, not kept, and the log marked truncated\n"
    "  --stream           print the output live, each line prefixed 'candidate-N| ' (judge:\n"
    "                     'candidate-N judge| '), stdout to stdout and stderr to stderr (all\n"
    "                     to stderr with --json); turns the live view off"
    "\n"
    "Scores: correctness 1 when the command exits 0 (with a judge: the mean of the command's\n"
    "and the judge's pass); cost = what changed between the base and the terminal snapshot\n"
    "(rule changed-lines.v1): lines removed + added by a line diff of each text file, bytes\n"
    "that differ of each binary file, one per entry added or removed or whose mode changed;\n"
    "reversibility = the share of the base's entries left untouched.\n"
    "Everything is checked before anything runs; if a candidate cannot start, none\n"
    "runs. A candidate whose terminal snapshot cannot be taken (or judged) is scored as failed\n"
    "and named in the receipt. Sessions are destroyed at the end; their snapshots stay in the\n"
    "store.\n"
    "\n"
    "Only a candidate that passes (its command exits 0 in time and, with a judge, the judge\n"
    "too) can win: the passing ones are ranked, the others are listed with closeness 0. When\n"
    "none passes, race prints why for each candidate, still writes, signs and audits the\n"
    "receipt, with \"winner\": null and \"outcome\": \"no_pass\", and exits 1.\n"
    "\n"
    "Logs: every candidate's and judge's stdout and stderr are kept (up to --log-limit each);\n"
    "the receipt binds the sha256 of the kept bytes and whether each was truncated, --json\n"
    "carries the last 4K of each, and a candidate that did not pass is reported with the last\n"
    "line of its stderr (its judge's when the command passed).\n"
    "\n"
    "Exit codes: 0 a winner was chosen and the receipt written, 1 failed (or no candidate\n"
    "passed), 2 usage, 3 not found (base snapshot, backend, signing key), 4 unavailable or\n"
    "refused.\n"
    "\n"
    "Example: three patched candidates judged by a protected test suite (docs/race.md):\n"
    "  base=$(cordon snapshot take project)\n"
    "  cordon race --base \"$base\" --k 3 --out receipt.json --logs logs --protect tests \\\n"
    "    --patch 0:attempts/0.diff --patch 1:attempts/1.diff --patch 2:attempts/2.diff \\\n"
    "    --judge-cmd '[\"sh\", \"tests/judge.sh\"]' -- sh build.sh\n"
    "  cordon receipt verify receipt.json --expected-keyid \"$(cordon key show --kid)\"\n"
    "  cordon snapshot restore \"$(jq -r .body.winner.snapshot receipt.json)\" winner\n";

enum {
  OPT_BASE = 256,
  OPT_K,
  OPT_OUT,
  OPT_BACKEND,
  OPT_PROFILE,
  OPT_JUDGE,
  OPT_TIMEOUT,
  OPT_JOBS,
  OPT_JSON,
  OPT_FSIZE,
  OPT_MAX_SNAPSHOT_BYTES,
  OPT_ALLOW_NO_PASS,
  OPT_JUDGE_CMD,
  OPT_RO,
  OPT_HIDE,
  OPT_PROTECT,
  OPT_LOGS,
  OPT_LOG_LIMIT,
  OPT_STREAM,
  OPT_INPUT, /* RACE_INPUT_OPTIONS: told apart by name */
};

struct race_args {
  const char *base, *out, *backend, *profile;
  char **judge;
  unsigned long long k, jobs;
  bool has_k;
  double timeout;
  bool json;
  uint64_t fsize, max_snapshot_bytes;
  char **argv;
  bool allow_no_pass;
  char **judge_cmd;                      /* --judge-cmd or `--judge --`: the judge's whole argv */
  char **read_only, **hidden, **protect; /* --ro, --hide, --protect */
  const char *logs;
  unsigned long long log_limit;
  bool stream;
  struct cli_race_inputs *inputs;
};

/* --judge-cmd '["prog", "arg", ...]' (race/forms.c). Returns 0 or an exit code. */
static int parse_judge_cmd(const char *text, char ***out) {
  struct cordon_error *err = NULL;
  if (race_judge_cmd_parse(text, out, &err) == 0)
    return 0;
  int r = err && err->kind == CORDON_ERR_USAGE
              ? cli_usage_error("race", "%s", err->message ? err->message : text)
              : EXIT_FAILURE_;
  cordon_error_free(err);
  return r;
}

/* The protected judge's options: --judge-cmd, --ro, --hide, --protect. 0 or an exit code. */
static int parse_protect_option(int c, const char *arg, struct race_args *a) {
  switch (c) {
  case OPT_JUDGE_CMD:
    if (a->judge_cmd)
      return cli_usage_error("race", "--judge-cmd given twice");
    return parse_judge_cmd(arg, &a->judge_cmd);
  case OPT_RO: return strv_push(&a->read_only, arg) < 0 ? EXIT_FAILURE_ : 0;
  case OPT_HIDE: return strv_push(&a->hidden, arg) < 0 ? EXIT_FAILURE_ : 0;
  case OPT_PROTECT: return strv_push(&a->protect, arg) < 0 ? EXIT_FAILURE_ : 0;
  }
  return cli_option_error("race");
}

/* `-- CMD ARGS... --judge -- JUDGE ARGS...`: the two adjacent words end the command and start
 * the judge's argv. Only one way of naming the judge per race. 0 or an exit code. */
static int split_judge(struct race_args *a) {
  char **judge = NULL;
  for (size_t i = 0; a->argv[i] && a->argv[i + 1]; i++)
    if (!strcmp(a->argv[i], "--judge") && !strcmp(a->argv[i + 1], "--")) {
      judge = a->argv + i + 2;
      a->argv[i] = NULL;
      break;
    }
  if (!a->argv[0])
    return cli_usage_error("race", "no command before '--judge --'");
  if (judge && !judge[0])
    return cli_usage_error("race", "no judge command after '--judge --'");
  if (judge && (a->judge_cmd || a->judge))
    return cli_usage_error("race", "the judge is given twice: use one of --judge-cmd, "
                                   "'--judge --' after the command, or --judge WORD");
  if (a->judge_cmd && a->judge)
    return cli_usage_error("race", "the judge is given twice: use one of --judge-cmd, "
                                   "'--judge --' after the command, or --judge WORD");
  if (judge) {
    for (size_t i = 0; judge[i]; i++)
      if (strv_push(&a->judge_cmd, judge[i]) < 0)
        return EXIT_FAILURE_;
  }
  return 0;
}

/* Returns -1 after printing help, > 0 an exit code, 0 to go on. */
static int parse_args(int argc, char **argv, struct race_args *a) {
  static const struct option opts[] = {
      {"base", required_argument, NULL, OPT_BASE},
      {"k", required_argument, NULL, OPT_K},
      {"out", required_argument, NULL, OPT_OUT},
      {"backend", required_argument, NULL, OPT_BACKEND},
      {"profile", required_argument, NULL, OPT_PROFILE},
      {"judge", required_argument, NULL, OPT_JUDGE},
      {"timeout", required_argument, NULL, OPT_TIMEOUT},
      {"jobs", required_argument, NULL, OPT_JOBS},
      {"json", no_argument, NULL, OPT_JSON},
      {"fsize", required_argument, NULL, OPT_FSIZE},
      {"max-snapshot-bytes", required_argument, NULL, OPT_MAX_SNAPSHOT_BYTES},
      {"allow-no-pass", no_argument, NULL, OPT_ALLOW_NO_PASS},
      {"judge-cmd", required_argument, NULL, OPT_JUDGE_CMD},
      {"ro", required_argument, NULL, OPT_RO},
      {"hide", required_argument, NULL, OPT_HIDE},
      {"protect", required_argument, NULL, OPT_PROTECT},
      {"logs", required_argument, NULL, OPT_LOGS},
      {"log-limit", required_argument, NULL, OPT_LOG_LIMIT},
      {"stream", no_argument, NULL, OPT_STREAM},
      {"help", no_argument, NULL, 'h'},
      RACE_INPUT_OPTIONS(OPT_INPUT),
      {"monitor", required_argument, NULL, OPT_INPUT},
      {0}};
  optind = 0;
  int c, r, longindex = 0;
  /* Only the words before `--` are the race's: the command after it is the candidates'. */
  int end = cli_args_end(argc, argv);
  while ((c = cli_getopt(end, argv, "h", opts, &longindex)) != -1) {
    switch (c) {
    case 'h': fputs(race_usage, stdout); return -1;
    case OPT_BASE: a->base = optarg; break;
    case OPT_OUT: a->out = optarg; break;
    case OPT_BACKEND: a->backend = optarg; break;
    case OPT_PROFILE: a->profile = optarg; break;
    case OPT_JSON: a->json = true; break;
    case OPT_ALLOW_NO_PASS: a->allow_no_pass = true; break;
    case OPT_LOGS: a->logs = optarg; break;
    case OPT_STREAM: a->stream = true; break;
    case OPT_LOG_LIMIT:
      if (cli_parse_size(optarg, &a->log_limit) < 0 || a->log_limit < 1 ||
          a->log_limit > CORDON_RACE_LOG_MAX_LIMIT)
        return cli_usage_error("race", "--log-limit needs a size from 1 to 1G, not '%s'", optarg);
      break;
    case OPT_JUDGE:
      if (strv_push(&a->judge, optarg) < 0)
        return EXIT_FAILURE_;
      break;
    case OPT_K:
      if (cli_parse_u64(optarg, &a->k) < 0 || a->k < 1 || a->k > CORDON_RACE_MAX_K)
        return cli_usage_error("race", "--k needs a number from 1 to %u, not '%s'",
                               CORDON_RACE_MAX_K, optarg);
      a->has_k = true;
      break;
    case OPT_JOBS:
      if (cli_parse_u64(optarg, &a->jobs) < 0 || a->jobs < 1 || a->jobs > CORDON_RACE_MAX_K)
        return cli_usage_error("race", "--jobs needs a number from 1 to %u, not '%s'",
                               CORDON_RACE_MAX_K, optarg);
      break;
    case OPT_TIMEOUT:
      if (cli_parse_double(optarg, 0, &a->timeout) < 0)
        return cli_usage_error("race", "--timeout needs a number of seconds, not '%s'", optarg);
      break;
    case OPT_FSIZE:
      if (cli_parse_size_limit(optarg, &a->fsize) < 0)
        return cli_usage_error("race", "--fsize needs a size such as 1G, not '%s'", optarg);
      break;
    case OPT_MAX_SNAPSHOT_BYTES:
      if (cli_parse_size_limit(optarg, &a->max_snapshot_bytes) < 0)
        return cli_usage_error("race", "--max-snapshot-bytes needs a size such as 8G, not '%s'",
                               optarg);
      break;
    case OPT_JUDGE_CMD:
    case OPT_RO:
    case OPT_HIDE:
    case OPT_PROTECT:
      if ((r = parse_protect_option(c, optarg, a)))
        return r;
      break;
    case OPT_INPUT:
      if ((r = cli_race_inputs_option(opts[longindex].name, optarg, &a->inputs)))
        return r;
      break;
    default: return cli_option_error("race");
    }
  }
  if (!a->base)
    return cli_usage_error("race", "--base ID is required");
  if (!a->has_k)
    return cli_usage_error("race", "--k K is required");
  if (!a->out)
    return cli_usage_error("race", "--out RECEIPT is required");
  if (optind < end)
    return cli_usage_error("race", "put the command after -- (found '%s')", argv[optind]);
  if (end + 1 >= argc)
    return cli_usage_error("race", "no command: give it after --");
  a->argv = argv + end + 1;
  if ((r = split_judge(a)))
    return r;
  return cli_race_inputs_prepare(a->inputs, (unsigned)a->k);
}

/* ---- the live view ------------------------------------------------------------------------- */

struct view {
  FILE *out;
  bool active;
  pthread_mutex_t mu; /* the race's threads and the ticker both draw */
  pthread_t ticker;
  bool ticking, stop;
  size_t k;
  enum cordon_race_phase *phase;
  int *exit_code;
  double *since;
  size_t lines; /* lines on screen */
  double start, last_draw;
};

static void view_draw(struct view *v) {
  if (v->lines)
    fprintf(v->out, "\033[%zuA", v->lines);
  double now = fs_now();
  v->lines = 0;
  if (v->k > VIEW_MAX_ROWS) {
    size_t count[CORDON_RACE_CANCELLED + 1] = {0};
    for (size_t i = 0; i < v->k; i++)
      count[v->phase[i]]++;
    fprintf(v->out, "\r\033[Krace: %zu candidates, %.1fs:", v->k, now - v->start);
    for (int p = 0; p <= CORDON_RACE_CANCELLED; p++)
      if (count[p])
        fprintf(v->out, " %zu %s", count[p], cordon_race_phase_name((enum cordon_race_phase)p));
    fputc('\n', v->out);
    v->lines = 1;
  } else {
    for (size_t i = 0; i < v->k; i++) {
      fprintf(v->out, "\r\033[K  candidate-%-4zu %-10s", i, cordon_race_phase_name(v->phase[i]));
      if (v->phase[i] == CORDON_RACE_DONE)
        fprintf(v->out, " exit %d", v->exit_code[i]);
      else if (v->phase[i] != CORDON_RACE_WAITING && v->phase[i] != CORDON_RACE_FAILED &&
               v->phase[i] != CORDON_RACE_CANCELLED)
        fprintf(v->out, " %.1fs", now - v->since[i]);
      fputc('\n', v->out);
      v->lines++;
    }
  }
  fflush(v->out);
  v->last_draw = now;
}

/* Called by the race, one call at a time, from its threads. */
static void view_update(void *data, const struct cordon_race_event *ev) {
  struct view *v = data;
  if (!v->active || ev->index >= v->k)
    return;
  pthread_mutex_lock(&v->mu);
  if (v->phase[ev->index] != ev->phase)
    v->since[ev->index] = fs_now();
  v->phase[ev->index] = ev->phase;
  if (ev->outcome)
    v->exit_code[ev->index] = ev->outcome->exit_code;
  /* Redraw at most ten times a second, but always for an ending. */
  bool ending = ev->phase >= CORDON_RACE_DONE;
  if (!v->stop && (ending || fs_now() - v->last_draw >= 0.1))
    view_draw(v);
  pthread_mutex_unlock(&v->mu);
}

/* Keeps the elapsed times moving while commands run and nothing else happens. */
static void *view_tick(void *data) {
  struct view *v = data;
  for (;;) {
    usleep(250 * 1000);
    pthread_mutex_lock(&v->mu);
    bool stop = v->stop;
    if (!stop && fs_now() - v->last_draw >= 0.25)
      view_draw(v);
    pthread_mutex_unlock(&v->mu);
    if (stop)
      return NULL;
  }
}

static int view_init(struct view *v, size_t k) {
  memset(v, 0, sizeof(*v));
  v->out = stderr;
  v->active = isatty(fileno(stderr)) == 1;
  v->k = k;
  v->start = fs_now();
  if (!v->active)
    return 0;
  v->phase = calloc(k, sizeof(*v->phase));
  v->exit_code = calloc(k, sizeof(*v->exit_code));
  v->since = calloc(k, sizeof(*v->since));
  pthread_mutex_init(&v->mu, NULL);
  if (!v->phase || !v->exit_code || !v->since)
    v->active = false;
  else
    v->ticking = pthread_create(&v->ticker, NULL, view_tick, v) == 0;
  return 0;
}

/* Erase the view: the outcome is printed on stdout afterwards. Safe to call twice. */
static void view_done(struct view *v) {
  if (v->ticking) {
    pthread_mutex_lock(&v->mu);
    v->stop = true;
    pthread_mutex_unlock(&v->mu);
    pthread_join(v->ticker, NULL);
    v->ticking = false;
  }
  if (v->active) {
    if (v->lines)
      fprintf(v->out, "\033[%zuA\033[J", v->lines);
    fflush(v->out);
    pthread_mutex_destroy(&v->mu);
    v->active = false;
  }
  free(v->phase);
  free(v->exit_code);
  free(v->since);
  v->phase = NULL;
  v->exit_code = NULL;
  v->since = NULL;
}

/* ---- output -------------------------------------------------------------------------------- */

static void print_json(const struct race_args *a, const struct cordon_race_result *res) {
  json_t *cands = json_array();
  for (size_t i = 0; i < res->n_candidates; i++) {
    const struct cordon_race_candidate *c = &res->candidates[i];
    const struct cordon_race_outcome *o = &c->outcome;
    json_t *j = json_pack("{s:s, s:s, s:i, s:b, s:f, s:f, s:f, s:f, s:b, s:b}", "task_id",
                          c->task_id, "snapshot", c->snapshot, "exit_code", o->exit_code,
                          "timed_out", o->timed_out, "correctness", o->correctness, "cost", o->cost,
                          "reversibility", o->reversibility, "closeness", c->closeness, "winner",
                          i == res->winner, "passed", !c->failure && cordon_race_outcome_passed(o));
    if (o->judged)
      json_object_set_new(j, "judge_exit_code", json_integer(o->judge_exit_code));
    json_object_set_new(j, "logs", cli_race_logs_tails_json(c));
    if (c->failure) {
      json_object_set_new(j, "failure", json_string(c->failure));
      json_object_set_new(j, "failure_detail", json_string(c->failure_detail));
    }
    json_array_append_new(cands, j);
  }
  const struct cordon_race_candidate *w = res->no_pass ? NULL : &res->candidates[res->winner];
  json_t *out = json_pack(
      "{s:s, s:s, s:s, s:s, s:o, s:s, s:b, s:o}", "receipt", a->out, "receipt_sha256",
      res->receipt_sha256, "audit_hmac", res->audit_hmac, "base", a->base, "winner",
      w ? json_pack("{s:s, s:s}", "task_id", w->task_id, "snapshot", w->snapshot) : json_null(),
      "outcome", res->no_pass ? CORDON_RACE_OUTCOME_NO_PASS : CORDON_RACE_OUTCOME_WINNER,
      "allow_no_pass", a->allow_no_pass, "candidates", cands);
  json_dumpf(out, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
  putchar('\n');
  json_decref(out);
}

static void print_text(const struct race_args *a, const struct cordon_race_result *res) {
  printf("%-14s %5s %5s %11s %14s %13s %9s  %s\n", "TASK", "EXIT", "JUDGE", "CORRECTNESS", "COST",
         "REVERSIBILITY", "CLOSENESS", "SNAPSHOT");
  for (size_t i = 0; i < res->n_candidates; i++) {
    const struct cordon_race_candidate *c = &res->candidates[i];
    const struct cordon_race_outcome *o = &c->outcome;
    if (c->failure) {
      printf("%-14s %5d %5s failed: %s\n", c->task_id, o->exit_code, "-", c->failure);
      fprintf(stderr, "cordon race: %s\n", c->failure_detail);
      continue;
    }
    char judge[16];
    if (o->judged)
      snprintf(judge, sizeof(judge), "%d", o->judge_exit_code);
    else
      snprintf(judge, sizeof(judge), "-");
    printf("%-14s %5d %5s %11.3g %14.0f %13.4f %9.4f  %.12s%s\n", c->task_id, o->exit_code, judge,
           o->correctness, o->cost, o->reversibility, c->closeness, c->snapshot,
           i == res->winner                 ? "  winner"
           : !cordon_race_outcome_passed(o) ? "  did not pass"
                                            : "");
  }
  if (res->no_pass) {
    printf("winner: none (no candidate passed)\n");
  } else {
    const struct cordon_race_candidate *w = &res->candidates[res->winner];
    printf("winner: %s, snapshot %s\n", w->task_id, w->snapshot);
  }
  printf("receipt: %s (sha256 %s)\n", a->out, res->receipt_sha256);
}

/* Why a candidate did not pass, in a few words: "command exited 3", "timed out", "judge
 * exited 1", or its failure (no snapshot, no judge's sandbox). */
static void not_passed_reason(const struct cordon_race_candidate *c, char *buf, size_t size) {
  const struct cordon_race_outcome *o = &c->outcome;
  char command[48] = "", after[CORDON_RACE_FAILURE_MAX + 1] = "";
  if (o->timed_out)
    snprintf(command, sizeof(command), "timed out");
  else if (o->exit_code != 0)
    snprintf(command, sizeof(command), "command exited %d", o->exit_code);
  if (c->failure)
    snprintf(after, sizeof(after), "%s", c->failure);
  else if (o->judged && o->judge_timed_out)
    snprintf(after, sizeof(after), "judge timed out");
  else if (o->judged && o->judge_exit_code != 0)
    snprintf(after, sizeof(after), "judge exited %d", o->judge_exit_code);
  snprintf(buf, size, "%s%s%s", command, command[0] && after[0] ? ", " : "", after);
}

/* No candidate passed: one line per candidate saying why, then one summary line (stderr). */
static void print_no_pass(const struct race_args *a, const struct cordon_race_result *res) {
  for (size_t i = 0; i < res->n_candidates; i++) {
    char why[256], last[121];
    not_passed_reason(&res->candidates[i], why, sizeof(why));
    cli_race_logs_last_line(&res->candidates[i], last, sizeof(last));
    cli_error("%s: %s%s%s%s", res->candidates[i].task_id, why[0] ? why : "did not pass",
              last[0] ? ": \"" : "", last, last[0] ? "\"" : "");
  }
  cli_error("race: no candidate passed, no winner; the receipt %s records \"winner\": null "
            "(--allow-no-pass ranks them anyway)",
            a->out);
}

static char *default_actor(void) {
  struct passwd *pw = getpwuid(geteuid());
  char *actor = NULL;
  if (pw && pw->pw_name && *pw->pw_name ? asprintf(&actor, "user:%s", pw->pw_name) < 0
                                        : asprintf(&actor, "uid:%u", (unsigned)geteuid()) < 0)
    actor = NULL;
  return actor;
}

static int load_profile(const char *path, struct cordon_rank_profile **out,
                        struct cordon_error **err) {
  _cleanup_free_ unsigned char *text = NULL;
  size_t length = 0;
  if (fs_read_file(path, PROFILE_FILE_MAX, &text, &length, err) < 0)
    return cordon_error_prefix(err, "--profile %s", path);
  if (cordon_rank_profile_parse((const char *)text, length, out, err) < 0)
    return cordon_error_prefix(err, "--profile %s", path);
  return 0;
}

static void race_args_free(struct race_args *a) {
  strv_free(a->judge);
  strv_free(a->judge_cmd);
  strv_free(a->read_only);
  strv_free(a->hidden);
  strv_free(a->protect);
  cli_race_inputs_free(a->inputs);
}

int cmd_race(int argc, char **argv) {
  struct race_args a = {0};
  int r = parse_args(argc, argv, &a);
  if (r) {
    race_args_free(&a);
    return r < 0 ? EXIT_OK : r;
  }
  struct cordon_error *err = NULL;
  struct cordon_context *ctx = NULL;
  struct cordon_registry *reg = NULL;
  struct cordon_rank_profile *profile = NULL;
  const struct cordon_backend *backend = NULL;
  struct cordon_race_result res = {0};
  struct view view;
  struct cli_race_streamer streamer = {0};
  _cleanup_free_ char *actor = default_actor(), *base = NULL;
  /* --stream: the live lines are the view; the redrawn one would garble them. */
  if (a.stream)
    memset(&view, 0, sizeof(view));
  else
    view_init(&view, a.k);
  int code = EXIT_OK;
  if ((a.profile && load_profile(a.profile, &profile, &err) < 0) ||
      cli_ensure_install_key(&err) < 0 || cordon_context_open(NULL, &ctx, &err) < 0 ||
      cli_resolve_snapshot(ctx, a.base, &base, &err) < 0 || cordon_registry_load(&reg, &err) < 0 ||
      cordon_registry_find(reg, a.backend ? a.backend : cordon_registry_default_name(), &backend,
                           &err) < 0 ||
      (a.logs && cli_race_logs_prepare(a.logs, &err) < 0)) {
    code = cli_fail(err);
    goto out;
  }
  if (a.stream && cli_race_streamer_init(&streamer, a.k, a.json) < 0) {
    cordon_error_set(&err, CORDON_ERR_SYSTEM, ENOMEM, "--stream");
    code = cli_fail(err);
    goto out;
  }
  a.base = base; /* the whole id, in the receipt and the output */
  const struct cordon_manifest *manifest = NULL;
  const struct cordon_race_inputs *inputs = NULL;
  if ((code = cli_race_inputs_resolve(a.inputs, backend, &manifest, &inputs)))
    goto out;
  struct cordon_race_observer observer = {view_update, &view};
  struct cordon_race_options o = {
      .base = a.base,
      .k = (unsigned)a.k,
      .backend = backend,
      .argv = (const char *const *)a.argv,
      .judge_argv = (const char *const *)a.judge,
      .profile = profile,
      .out_path = a.out,
      .timeout = a.timeout,
      .jobs = (unsigned)a.jobs,
      .actor = actor,
      .observer = &observer,
      .fsize_bytes = a.fsize,
      .max_snapshot_bytes = a.max_snapshot_bytes,
      .allow_no_pass = a.allow_no_pass,
      .read_only = (const char *const *)a.read_only,
      .hidden = (const char *const *)a.hidden,
      .protect = (const char *const *)a.protect,
      .log_limit = a.log_limit,
      .output = a.stream ? &streamer.output : NULL,
      .manifest = manifest,
      .inputs = inputs,
  };
  if (a.judge_cmd)
    o.judge_argv = (const char *const *)a.judge_cmd;
  r = cordon_race_run(ctx, &o, &res, &err);
  view_done(&view);
  cli_race_streamer_finish(&streamer);
  if (r < 0 || (a.logs && cli_race_logs_write(a.logs, &res, &err) < 0)) {
    code = cli_fail(err);
    goto out;
  }
  if (a.json)
    print_json(&a, &res);
  else
    print_text(&a, &res);
  if (res.no_pass) {
    print_no_pass(&a, &res);
    code = EXIT_FAILURE_;
  }
out:
  view_done(&view);
  cli_race_streamer_finish(&streamer);
  cordon_race_result_clear(&res);
  cordon_rank_profile_free(profile);
  cordon_registry_free(reg);
  cordon_context_free(ctx);
  race_args_free(&a);
  return code;
}
