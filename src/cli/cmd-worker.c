/* `cordon worker`: enrol this install's key as a worker of a pool, and run the pool's queued
 * dispatches: claim one (by rename), place its recipe, sign a claim receipt (worker kid,
 * dispatch id, effective manifest hash) chained in the audit log, run it (on a warm session when
 * one fits, within the pool's concurrency ceiling), and record the result. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "base/cleanup.h"
#include "cli/cli.h"
#include "cli/cmd-manifest.h"
#include "cli/cmd-pool-dispatch.h"
#include "crypto/digest.h"
#include "pool/queue.h"
#include "pool/worker.h"

static const char worker_usage[] =
    "usage: cordon worker enrol --pool NAME [--json]\n"
    "       cordon worker run --pool NAME [--once] [--wait SECONDS] [--no-warm]\n"
    "                         [--attestation FILE [--expected-keyid KID]] [--json]\n"
    "\n"
    "Workers of a pool take the dispatches `cordon pool submit` queues.\n"
    "\n"
    "  enrol   sign an enrolment receipt binding this install's Ed25519 key (`cordon key show`)\n"
    "          to the pool's current body (pool_hash), store it, chain worker.enrolled. A\n"
    "          worker must enrol again after the pool is updated.\n"
    "  run     claim the oldest pending dispatch (atomically: one worker gets it), place its\n"
    "          recipe (a refusal is recorded as the dispatch's result), sign a claim receipt\n"
    "          (worker kid, dispatch id, effective manifest hash, placement and enrolment\n"
    "          receipts) chained as worker.claimed, run the command within the pool's\n"
    "          concurrency ceiling (on a warm session when one fits), chain worker.result and\n"
    "          write .cordon/pools/queue/NAME/done/ID.json. `cordon pool verify` re-checks every\n"
    "          claim offline and attributes it to its enrolled key.\n"
    "\n"
    "options:\n"
    "  --pool NAME       the pool\n"
    "  --once            run at most one dispatch, then exit (none pending: exit 0)\n"
    "  --wait SECONDS    wait up to SECONDS for a concurrency slot (default: wait as long as\n"
    "                    it takes); past it the dispatch is recorded as not run (exit code 4)\n"
    "  --no-warm         never attach a warm session\n"
    "  --poll SECONDS    without --once: how often an empty queue is looked at (default 0.2)\n"
    "  --attestation FILE  place every dispatch through the selector with this verified\n"
    "                    isolation attestation (`cordon pool place --attestation`)\n"
    "  --expected-keyid KID  the attestation's signer (default: this install's key)\n"
    "  --json            one JSON object per line and dispatch\n"
    "\n"
    "exit codes: 0 ok, 1 failed, 2 usage, 3 no such pool, 4 not enrolled in the pool's current\n"
    "body, pool retired, or its concurrency ceiling held past --wait\n";

enum {
  OPT_W_POOL = 400,
  OPT_W_ONCE,
  OPT_W_WAIT,
  OPT_W_NO_WARM,
  OPT_W_POLL,
  OPT_W_JSON,
  OPT_W_HELP,
  OPT_W_ATTESTATION,
  OPT_W_KID
};

struct worker_opts {
  const char *pool;
  bool once, no_warm, json;
  double wait, poll;
  const char *attestation, *expected_kid;
};

/* Returns 0, -1 after --help, or an exit code. */
static int worker_parse(const char *verb, int argc, char **argv, bool run, struct worker_opts *o) {
  static const struct option opts[] = {{"pool", required_argument, NULL, OPT_W_POOL},
                                       {"once", no_argument, NULL, OPT_W_ONCE},
                                       {"wait", required_argument, NULL, OPT_W_WAIT},
                                       {"no-warm", no_argument, NULL, OPT_W_NO_WARM},
                                       {"poll", required_argument, NULL, OPT_W_POLL},
                                       {"json", no_argument, NULL, OPT_W_JSON},
                                       {"help", no_argument, NULL, OPT_W_HELP},
                                       {"attestation", required_argument, NULL, OPT_W_ATTESTATION},
                                       {"expected-keyid", required_argument, NULL, OPT_W_KID},
                                       {0}};
  int c;
  o->wait = 1e9;
  o->poll = 0.2;
  optind = 0;
  while ((c = cli_getopt(argc, argv, "h", opts, NULL)) != -1) {
    if (c == 'h' || c == OPT_W_HELP) {
      fputs(worker_usage, stdout);
      return -1;
    }
    if (c == OPT_W_POOL)
      o->pool = optarg;
    else if (c == OPT_W_JSON)
      o->json = true;
    else if (!run || c == '?')
      return c == '?' ? cli_option_error(verb)
                      : cli_usage_error(verb, "%s is an option of worker run", argv[optind - 1]);
    else if (c == OPT_W_ONCE)
      o->once = true;
    else if (c == OPT_W_NO_WARM)
      o->no_warm = true;
    else if (c == OPT_W_WAIT && cli_parse_double(optarg, 0, &o->wait) < 0)
      return cli_usage_error(verb, "--wait wants seconds, not '%s'", optarg);
    else if (c == OPT_W_POLL && (cli_parse_double(optarg, 0.001, &o->poll) < 0 || o->poll > 60))
      return cli_usage_error(verb, "--poll wants 0.001 to 60 seconds, not '%s'", optarg);
    else if (c == OPT_W_ATTESTATION)
      o->attestation = optarg;
    else if (c == OPT_W_KID && strlen(optarg) != CORDON_KEY_ID_LEN)
      return cli_usage_error(verb, "--expected-keyid needs a key id (%d base64url characters)",
                             CORDON_KEY_ID_LEN);
    else if (c == OPT_W_KID)
      o->expected_kid = optarg;
  }
  if (o->expected_kid && !o->attestation)
    return cli_usage_error(verb, "--expected-keyid needs --attestation FILE");
  if (optind < argc)
    return cli_usage_error(verb, "unexpected argument '%s'", argv[optind]);
  if (!o->pool)
    return cli_usage_error(verb, "--pool NAME is required");
  return 0;
}

static int worker_enrol(int argc, char **argv) {
  struct worker_opts o = {0};
  int code = worker_parse("worker enrol", argc, argv, false, &o);
  if (code)
    return code < 0 ? EXIT_OK : code;
  struct cordon_error *err = NULL;
  struct cordon_context *ctx = NULL;
  struct pool_manifest m = {0};
  _cleanup_(cordon_signing_key_freep) struct cordon_signing_key *key = NULL;
  _cleanup_free_ char *actor = pool_dispatch_actor();
  char digest[65];
  if (cordon_context_open(NULL, &ctx, &err) < 0 || cli_ensure_install_key(&err) < 0 ||
      cordon_signing_key_load(NULL, &key, &err) < 0 || pool_lookup(ctx, o.pool, &m, &err) < 0 ||
      pool_worker_enrol(ctx, o.pool, m.pool_hash, actor, digest, &err) < 0) {
    code = cli_fail(err);
  } else if (o.json) {
    cli_print_json(json_pack("{s:s,s:s,s:s,s:s}", "pool", o.pool, "pool_hash", m.pool_hash, "kid",
                             cordon_signing_key_id(key), "receipt", digest));
  } else {
    printf("enrolled %s in pool %s (pool_hash %s): receipt %s\n", cordon_signing_key_id(key),
           o.pool, m.pool_hash, digest);
  }
  pool_manifest_clear(&m);
  cordon_context_free(ctx);
  return code;
}

/* ---- worker run ---- */

struct worker {
  struct worker_opts o;
  struct cordon_context *ctx;
  struct cordon_registry *reg;
  struct cordon_signing_key *key;
  char *actor;
  struct cli_attestation att; /* --attestation, loaded once */
  pid_t *destroyers;          /* detached destroyers of used warm sessions, reaped as they end */
  size_t n_destroyers;
};

static void sha256_of(const unsigned char *data, size_t n, char out[65]) {
  if (crypto_sha256_hex(data ? (const void *)data : "", data ? n : 0, out, NULL) < 0)
    out[0] = 0;
}

/* Chain the result and write done/ID.json. */
static int record_result(struct worker *w, const struct pool_dispatch *dispatch, int exit_code,
                         const struct cordon_exec_result *res, bool warm, const char *claim,
                         const char *refusal, struct cordon_error **err) {
  char out_hash[65], err_hash[65];
  sha256_of(res ? res->stdout_data : NULL, res ? res->stdout_length : 0, out_hash);
  sha256_of(res ? res->stderr_data : NULL, res ? res->stderr_length : 0, err_hash);
  json_auto_t *done =
      json_pack("{s:s,s:i,s:s,s:s,s:b,s:o,s:o,s:o,s:o}", "dispatch_id", dispatch->id, "exit_code",
                exit_code, "kid", cordon_signing_key_id(w->key), "pool", dispatch->pool, "warm",
                warm, "claim", claim ? json_string(claim) : json_null(), "refusal",
                refusal ? json_string(refusal) : json_null(), "stdout",
                res ? bytes_json(res->stdout_data, res->stdout_length) : json_string(""), "stderr",
                res ? bytes_json(res->stderr_data, res->stderr_length) : json_string(""));
  if (!done)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "result");
  if (pool_worker_record_result(w->ctx, cordon_signing_key_id(w->key), dispatch->pool, dispatch->id,
                                exit_code, out_hash, err_hash, warm, w->actor, err) < 0 ||
      pool_queue_finish(cordon_context_state_dir(w->ctx), dispatch, done, err) < 0)
    return -1;
  if (w->o.json) {
    json_object_del(done, "stdout");
    json_object_del(done, "stderr");
    char *line = json_dumps(done, JSON_COMPACT | JSON_SORT_KEYS);
    if (line)
      printf("%s\n", line);
    free(line);
  } else {
    printf("dispatch %s: %s%s, exit %d\n", dispatch->id, refusal ? "refused" : "ran ",
           refusal ? "" : (warm ? "warm" : "cold"), exit_code);
  }
  fflush(stdout);
  return 0;
}

/* Run the dispatch's command on the lease's warm session or a new one; destroys it. */
static int run_command(struct worker *w, struct pool_dispatch_placed *d, struct pool_lease *lease,
                       const struct pool_dispatch *dispatch, struct cordon_exec_result *res,
                       struct cordon_error **err) {
  struct cordon_session *s = lease->warm;
  bool warm = s != NULL;
  lease->warm = NULL;
  if (!s) {
    d->inputs.manifest.ephemeral = true;
    d->inputs.manifest.one_shot = true;
    if (cordon_session_create(w->ctx, d->backend, &d->inputs.manifest, &s, err) < 0)
      return -1;
  }
  struct cordon_exec_request req = {.argv = (const char *const *)dispatch->argv};
  int r = cordon_session_exec(s, &req, res, err);
  struct cordon_error *derr = NULL;
  pid_t destroyer = -1;
  if ((warm ? pool_lease_destroy_detached(lease, s, false, &destroyer, &derr)
            : cordon_session_destroy(s, &derr)) < 0) {
    cli_error("dispatch %s: %s", dispatch->id, derr->message);
    cordon_error_free(derr);
  }
  if (destroyer > 0) {
    pid_t *grown = realloc(w->destroyers, (w->n_destroyers + 1) * sizeof(*grown));
    if (grown) {
      w->destroyers = grown;
      w->destroyers[w->n_destroyers++] = destroyer;
    } /* else it stays a zombie until we exit */
  }
  return r;
}

/* Reap the destroyers that have ended (no zombies pile up in a long-running worker). */
static void reap_destroyers(struct worker *w) {
  size_t kept = 0;
  for (size_t i = 0; i < w->n_destroyers; i++)
    if (waitpid(w->destroyers[i], NULL, WNOHANG) == 0)
      w->destroyers[kept++] = w->destroyers[i];
  w->n_destroyers = kept;
}

/* One claimed dispatch, start to end. Returns an exit code for --once. */
static int serve_dispatch(struct worker *w, struct pool_dispatch *dispatch, const char *enrolment) {
  struct cordon_error *err = NULL;
  struct pool_dispatch_placed d = {0};
  struct pool_lease lease = {0};
  struct cordon_exec_result res = {0};
  bool have_res = false;
  int code =
      pool_dispatch_place("worker run", w->ctx, w->reg, dispatch->pool, NULL, dispatch->recipe,
                          w->o.attestation ? &w->att : NULL, w->o.json, &d);
  if (code == EXIT_UNAVAILABLE && d.placement.refused) {
    code = record_result(w, dispatch, EXIT_UNAVAILABLE, NULL, false, NULL,
                         d.placement.receipt_digest, &err) < 0
               ? cli_fail(err)
               : EXIT_OK;
    goto out;
  }
  if (code != EXIT_OK)
    goto out;
  struct pool_claim_fields f = {.pool = dispatch->pool,
                                .pool_hash = d.placement.pool_hash,
                                .dispatch_id = dispatch->id,
                                .effective_manifest_hash = d.placement.effective.hash,
                                .placement = d.placement.receipt_digest,
                                .enrolment = enrolment};
  char claim[65];
  if (pool_worker_record_claim(w->ctx, w->key, &f, w->actor, claim, &err) < 0) {
    code = cli_fail(err);
    goto out;
  }
  if ((code = pool_lease_begin("worker run", w->ctx, w->reg, &d, w->o.wait, !w->o.no_warm,
                               w->o.json, &lease)) != EXIT_OK) {
    /* Claimed but not run (the ceiling held past --wait): recorded, so it is not lost. */
    if (record_result(w, dispatch, code, NULL, false, claim, NULL, &err) < 0)
      cli_fail(err);
    goto out;
  }
  bool warm = lease.warm != NULL;
  int exit_code = EXIT_CORDON;
  if (run_command(w, &d, &lease, dispatch, &res, &err) < 0) {
    cli_error("dispatch %s: %s", dispatch->id, err ? err->message : "failed");
    cordon_error_free(err);
    err = NULL;
  } else {
    have_res = true;
    exit_code = res.timed_out ? EXIT_TIMED_OUT : res.exit_code;
  }
  pool_lease_end(&lease);
  code = record_result(w, dispatch, exit_code, have_res ? &res : NULL, warm, claim, NULL, &err) < 0
             ? cli_fail(err)
             : EXIT_OK;
out:
  if (have_res)
    cordon_exec_result_clear(&res);
  pool_lease_end(&lease);
  pool_dispatch_placed_clear(&d);
  return code;
}

static int worker_loop(struct worker *w) {
  struct cordon_error *err = NULL;
  struct pool_manifest m = {0};
  char enrolment[65];
  int found;
  /* Enrolled in the pool's current body, before anything is claimed. */
  if (pool_lookup(w->ctx, w->o.pool, &m, &err) < 0 ||
      (found = pool_worker_find_enrolment(w->ctx, cordon_signing_key_id(w->key), w->o.pool,
                                          m.pool_hash, enrolment, &err)) < 0) {
    pool_manifest_clear(&m);
    return cli_fail(err);
  }
  pool_manifest_clear(&m);
  if (!found) {
    cordon_error_set(&err, CORDON_ERR_DENIED, 0,
                     "this install (%s) is not enrolled in pool %s at its current body: "
                     "`cordon worker enrol --pool %s` first",
                     cordon_signing_key_id(w->key), w->o.pool, w->o.pool);
    return cli_fail(err);
  }
  for (;;) {
    reap_destroyers(w);
    struct pool_dispatch dispatch = {0};
    int r = pool_queue_claim(cordon_context_state_dir(w->ctx), w->o.pool, &dispatch, &err);
    if (r < 0)
      return cli_fail(err);
    if (r == 1) {
      int code = serve_dispatch(w, &dispatch, enrolment);
      pool_dispatch_clear(&dispatch);
      if (w->o.once || cordon_interrupted())
        return code;
      continue;
    }
    if (w->o.once) {
      if (!w->o.json)
        fprintf(stderr, "cordon: no dispatch pending for pool %s\n", w->o.pool);
      return EXIT_OK;
    }
    if (cordon_interrupted())
      return EXIT_OK;
    struct timespec ts = {.tv_sec = (time_t)w->o.poll,
                          .tv_nsec = (long)((w->o.poll - (time_t)w->o.poll) * 1e9)};
    nanosleep(&ts, NULL);
  }
}

static int worker_run(int argc, char **argv) {
  struct worker w = {0};
  int code = worker_parse("worker run", argc, argv, true, &w.o);
  if (code)
    return code < 0 ? EXIT_OK : code;
  struct cordon_error *err = NULL;
  if (!(w.actor = pool_dispatch_actor()) || cordon_context_open(NULL, &w.ctx, &err) < 0 ||
      cordon_registry_load(&w.reg, &err) < 0 || cli_ensure_install_key(&err) < 0 ||
      cordon_signing_key_load(NULL, &w.key, &err) < 0 ||
      (w.o.attestation &&
       cli_attestation_load(w.o.attestation, w.o.expected_kid, &w.att, &err) < 0))
    code = cli_fail(err);
  else
    code = worker_loop(&w);
  cli_attestation_clear(&w.att);
  cordon_signing_key_freep(&w.key);
  free(w.destroyers); /* the ones still running are re-parented when we exit */
  cordon_registry_free(w.reg);
  cordon_context_free(w.ctx);
  free(w.actor);
  return code;
}

int cmd_worker(int argc, char **argv) {
  static const struct cli_subverb subs[] = {{"enrol", worker_enrol}, {"run", worker_run}};
  return CLI_DISPATCH("worker", worker_usage, subs, argc, argv);
}
