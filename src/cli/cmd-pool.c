/* `cordon pool`: named sandbox pools (src/pool/, docs/pools.md). register, list, show, retire
 * and verify read or extend the registry, which is a projection of the audit chain; place
 * decides and seals a placement (or a refusal) without creating anything. pool_cli_place is
 * the placement `run --pool` and `session create --pool` make before they create. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include <cordon/audit.h>
#include <cordon/session.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "cli/cli.h"
#include "cli/cmd-pool-dispatch.h"
#include "cli/cmd-pool.h"
#include "crypto/jcs.h"
#include "pool/pool.h"
#include "pool/queue.h"

extern char **environ;

static const char pool_usage[] =
    "usage: cordon pool register SPEC.json [--json]\n"
    "       cordon pool list [--json]\n"
    "       cordon pool show NAME [--json]\n"
    "       cordon pool retire NAME\n"
    "       cordon pool verify [--json]\n"
    "       cordon pool place NAME [--recipe RECIPE.json] [--out RECEIPT.json]\n"
    "                         [--attestation FILE [--expected-keyid KID]] [--json]\n"
    "       cordon pool submit NAME [--recipe RECIPE.json] [--json] -- ARGV...\n"
    "       cordon pool warm NAME --slots N [--recipe RECIPE.json] [--json]\n"
    "\n"
    "Named sandbox pools: placement contracts an operator registers once. A recipe may set\n"
    "only the fields its pool exposes, within the pool's capability, egress and credential\n"
    "ceilings; anything wider is refused with a signed receipt chained in the audit log. The\n"
    "registry is replayed from the audit chain; bodies and receipts live in the CAS.\n"
    "\n"
    "  register SPEC.json  validate a pool manifest (unknown fields, wrong types and a\n"
    "                      template above its ceilings are refused, naming the field) and\n"
    "                      record it: pool.registered, or pool.updated for a known name\n"
    "  list                every pool: name, state, version, pool_hash\n"
    "  show NAME           a pool's manifest and state, and its live state: slots in use of\n"
    "                      max_concurrency, dispatches pending in its queue, warm sessions\n"
    "                      ready by effective manifest hash (drifted ones: from another\n"
    "                      body of the pool, to be quarantined by the next dispatch)\n"
    "  retire NAME         record pool.retired: later placements into it are refused\n"
    "  verify              walk the chain (each entry's HMAC and place in it first), re-hash\n"
    "                      every stored body, re-check every placement, refusal, enrolment,\n"
    "                      claim and quarantine receipt; exit 1 naming the first break\n"
    "  place NAME          decide and seal a placement without creating anything\n"
    "    --recipe FILE     {\"pool\": NAME, \"overrides\": {...}} (default: no overrides)\n"
    "    --out FILE        write the signed receipt to FILE (atomically)\n"
    "    --attestation FILE  a verified isolation attestation (`cordon attest`): a backend\n"
    "                      whose needed capability it refuted is passed over; without one,\n"
    "                      every declared capability is unverifiable and accepted (the\n"
    "                      allowlist is the trust), and the receipt records that\n"
    "    --expected-keyid KID  the attestation's signer (default: this install's key)\n"
    "  submit NAME -- ARGV queue ARGV for the pool's workers (`cordon worker run`)\n"
    "  warm NAME --slots N provision N sessions ahead, keyed by effective manifest hash\n"
    "  --json              machine-readable output\n"
    "\n"
    "`cordon run --pool NAME [--recipe FILE] -- ARGV` and `cordon session create --pool NAME\n"
    "[--recipe FILE]` place first, then create (both take --attestation and --expected-keyid).\n"
    "The backend is the selector's (`cordon select`): the first of the allowlist, in its order,\n"
    "that fits the effective manifest. Formats: docs/formats.md; guide: docs/pools.md.\n"
    "\n"
    "Exit codes: 0 ok, 1 failed (an invalid manifest, a break found by verify), 2 usage,\n"
    "3 no such pool or file, 4 refused (the receipt is chained; nothing was created).\n";

enum { OPT_P_JSON = 256, OPT_P_RECIPE, OPT_P_OUT, OPT_P_HELP, OPT_P_ATTESTATION, OPT_P_KID };

struct pool_flags {
  bool json;
  const char *recipe;
  const char *out;
  const char *attestation;
  const char *expected_kid;
};

/* Flags for a subverb; allowed is a mask of which: 1 json, 2 recipe, 4 out, 8 attestation and
 * expected-keyid. Returns -1 after
 * help, > 0 an exit code, 0 to go on. */
static int parse_flags(const char *verb, int argc, char **argv, unsigned allowed,
                       struct pool_flags *f) {
  static const struct option opts[] = {{"json", no_argument, NULL, OPT_P_JSON},
                                       {"recipe", required_argument, NULL, OPT_P_RECIPE},
                                       {"out", required_argument, NULL, OPT_P_OUT},
                                       {"attestation", required_argument, NULL, OPT_P_ATTESTATION},
                                       {"expected-keyid", required_argument, NULL, OPT_P_KID},
                                       {"help", no_argument, NULL, 'h'},
                                       {0}};
  optind = 0;
  int c;
  while ((c = cli_getopt(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case OPT_P_JSON:
      if (!(allowed & 1))
        return cli_usage_error(verb, "--json is not an option here");
      f->json = true;
      break;
    case OPT_P_RECIPE:
      if (!(allowed & 2))
        return cli_usage_error(verb, "--recipe is not an option here");
      f->recipe = optarg;
      break;
    case OPT_P_OUT:
      if (!(allowed & 4))
        return cli_usage_error(verb, "--out is not an option here");
      f->out = optarg;
      break;
    case OPT_P_ATTESTATION:
    case OPT_P_KID:
      if (!(allowed & 8))
        return cli_usage_error(verb, "--%s is not an option here",
                               c == OPT_P_KID ? "expected-keyid" : "attestation");
      if (c == OPT_P_KID && strlen(optarg) != CORDON_KEY_ID_LEN)
        return cli_usage_error(verb, "--expected-keyid needs a key id (%d base64url characters)",
                               CORDON_KEY_ID_LEN);
      *(c == OPT_P_KID ? &f->expected_kid : &f->attestation) = optarg;
      break;
    case 'h': fputs(pool_usage, stdout); return -1;
    default: return cli_option_error(verb);
    }
  }
  if (f->expected_kid && !f->attestation)
    return cli_usage_error(verb, "--expected-keyid needs --attestation FILE");
  return 0;
}

/* Exactly one positional argument. */
static int one_argument(const char *verb, int argc, char **argv, const char *what,
                        const char **out) {
  if (optind >= argc)
    return cli_usage_error(verb, "name %s", what);
  if (optind + 1 < argc)
    return cli_usage_error(verb, "unexpected argument '%s'", argv[optind + 1]);
  *out = argv[optind];
  return 0;
}

static int read_input(const char *path, const char *what, unsigned char **data, size_t *n,
                      struct cordon_error **err) {
  int r = strcmp(path, "-") == 0 ? fs_read_fd(STDIN_FILENO, POOL_MANIFEST_MAX, data, n, err)
                                 : fs_read_file(path, POOL_MANIFEST_MAX, data, n, err);
  if (r < 0)
    return cordon_error_prefix(err, "%s %s", what, path);
  return 0;
}

static int pool_register_cmd(int argc, char **argv) {
  struct pool_flags f = {0};
  const char *path = NULL;
  int r = parse_flags("pool register", argc, argv, 1, &f);
  if (r)
    return r < 0 ? EXIT_OK : r;
  if ((r = one_argument("pool register", argc, argv, "a manifest file (SPEC.json)", &path)))
    return r;
  struct cordon_error *err = NULL;
  _cleanup_free_ unsigned char *data = NULL;
  size_t n = 0;
  struct pool_manifest m = {0};
  struct cordon_context *ctx = NULL;
  enum pool_register_outcome outcome = POOL_REGISTERED;
  if (read_input(path, "pool manifest", &data, &n, &err) < 0 ||
      pool_manifest_parse((const char *)data, n, &m, &err) < 0 ||
      cordon_context_open(NULL, &ctx, &err) < 0 ||
      pool_register(ctx, &m, NULL, &outcome, &err) < 0) {
    pool_manifest_clear(&m);
    cordon_context_free(ctx);
    return cli_fail(err);
  }
  static const char *const words[] = {"registered", "updated", "unchanged"};
  if (f.json)
    cli_print_json(json_pack("{s:s,s:s,s:s}", "name", m.name, "pool_hash", m.pool_hash, "outcome",
                             words[outcome]));
  else
    printf("%s %s %s\n", words[outcome], m.name, m.pool_hash);
  pool_manifest_clear(&m);
  cordon_context_free(ctx);
  return EXIT_OK;
}

static int pool_list_cmd(int argc, char **argv) {
  struct pool_flags f = {0};
  int r = parse_flags("pool list", argc, argv, 1, &f);
  if (r)
    return r < 0 ? EXIT_OK : r;
  if (optind < argc)
    return cli_usage_error("pool list", "unexpected argument '%s'", argv[optind]);
  struct cordon_error *err = NULL;
  struct cordon_context *ctx = NULL;
  struct cordon_audit_log *log = NULL;
  struct pool_registry reg = {0};
  if (cordon_context_open(NULL, &ctx, &err) < 0 ||
      cordon_audit_open_project(ctx, NULL, &log, &err) < 0 ||
      pool_registry_load(log, &reg, &err) < 0) {
    if (log)
      cordon_audit_close(log);
    cordon_context_free(ctx);
    return cli_fail(err);
  }
  json_t *list = f.json ? json_array() : NULL;
  for (size_t i = 0; i < reg.n_entries; i++) {
    const struct pool_entry *e = &reg.entries[i];
    const char *state = e->state == POOL_ACTIVE ? "active" : "retired";
    if (list)
      json_array_append_new(list, json_pack("{s:s,s:s,s:I,s:s}", "name", e->name, "state", state,
                                            "version", (json_int_t)e->version, "pool_hash",
                                            e->pool_hash));
    else
      printf("%s\t%s\t%llu\t%s\n", e->name, state, (unsigned long long)e->version, e->pool_hash);
  }
  if (list)
    cli_print_json(list);
  pool_registry_clear(&reg);
  cordon_audit_close(log);
  cordon_context_free(ctx);
  return EXIT_OK;
}

static void print_strings(const char *label, char *const *list) {
  printf("%-26s", label);
  if (!list || !list[0])
    printf(" -");
  for (size_t i = 0; list && list[i]; i++)
    printf("%s%s", i ? ", " : " ", list[i]);
  printf("\n");
}

/* What a pool is doing right now: slots held of its ceiling, dispatches pending, warm sessions
 * ready, grouped by the effective manifest (and backend) they serve. Read only: looking at a
 * pool creates nothing. */
static json_t *pool_live(struct cordon_context *ctx, const struct pool_manifest *m,
                         struct cordon_error **err) {
  const char *state_dir = cordon_context_state_dir(ctx);
  struct pool_slot_usage usage = {0};
  size_t pending = 0, n = 0;
  struct pool_warm_record *ready = NULL;
  if (pool_slot_usage(state_dir, m->name, &usage, err) < 0 ||
      pool_queue_pending(state_dir, m->name, &pending, err) < 0 ||
      pool_warm_list(state_dir, m->name, &ready, &n, err) < 0)
    return NULL;
  json_t *groups = json_array();
  size_t current = 0;
  for (size_t i = 0; i < n && groups; i++) {
    bool drifted = strcmp(ready[i].pool_hash, m->pool_hash) != 0;
    current += !drifted;
    size_t j;
    json_t *g, *same = NULL;
    json_array_foreach(groups, j, g) {
      if (!strcmp(json_string_value(json_object_get(g, "effective_manifest_hash")),
                  ready[i].effective_manifest_hash) &&
          !strcmp(json_string_value(json_object_get(g, "backend")), ready[i].backend) &&
          json_is_true(json_object_get(g, "drifted")) == drifted) {
        same = g;
        break;
      }
    }
    if (same) {
      json_object_set_new(same, "sessions",
                          json_integer(json_integer_value(json_object_get(same, "sessions")) + 1));
      continue;
    }
    json_array_append_new(groups,
                          json_pack("{s:s,s:s,s:I,s:b}", "effective_manifest_hash",
                                    ready[i].effective_manifest_hash, "backend", ready[i].backend,
                                    "sessions", (json_int_t)1, "drifted", drifted));
  }
  free(ready);
  json_t *live = json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:o}", "slots_in_use", (json_int_t)usage.held,
                           "slots_held_by_sessions", (json_int_t)usage.sessions, "max_concurrency",
                           (json_int_t)m->max_concurrency, "pending_dispatches",
                           (json_int_t)pending, "warm_ready", (json_int_t)current, "warm_drifted",
                           (json_int_t)(n - current), "warm", groups ? groups : json_array());
  if (!live)
    cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "pool show");
  return live;
}

static void print_live(const json_t *live) {
  printf("%-26s %lld/%lld (%lld held by sessions)\n", "slots_in_use",
         (long long)json_integer_value(json_object_get(live, "slots_in_use")),
         (long long)json_integer_value(json_object_get(live, "max_concurrency")),
         (long long)json_integer_value(json_object_get(live, "slots_held_by_sessions")));
  printf("%-26s %lld\n", "pending_dispatches",
         (long long)json_integer_value(json_object_get(live, "pending_dispatches")));
  printf("%-26s %lld", "warm_ready",
         (long long)json_integer_value(json_object_get(live, "warm_ready")));
  long long drifted = json_integer_value(json_object_get(live, "warm_drifted"));
  if (drifted)
    printf(" (and %lld drifted)", drifted);
  printf("\n");
  size_t i;
  json_t *g;
  json_array_foreach(json_object_get(live, "warm"), i, g) {
    printf("  %s %s %lld%s\n", json_string_value(json_object_get(g, "effective_manifest_hash")),
           json_string_value(json_object_get(g, "backend")),
           (long long)json_integer_value(json_object_get(g, "sessions")),
           json_is_true(json_object_get(g, "drifted")) ? " drifted" : "");
  }
}

static int pool_show_cmd(int argc, char **argv) {
  struct pool_flags f = {0};
  const char *name = NULL;
  int r = parse_flags("pool show", argc, argv, 1, &f);
  if (r)
    return r < 0 ? EXIT_OK : r;
  if ((r = one_argument("pool show", argc, argv, "a pool", &name)))
    return r;
  struct cordon_error *err = NULL;
  struct cordon_context *ctx = NULL;
  struct pool_manifest m = {0};
  enum pool_state state = POOL_ACTIVE;
  if (cordon_context_open(NULL, &ctx, &err) < 0 ||
      pool_lookup_any(ctx, name, &m, &state, &err) < 0) {
    cordon_context_free(ctx);
    return cli_fail(err);
  }
  const char *state_name = state == POOL_ACTIVE ? "active" : "retired";
  json_t *live = pool_live(ctx, &m, &err);
  if (!live) {
    pool_manifest_clear(&m);
    cordon_context_free(ctx);
    return cli_fail(err);
  }
  if (f.json) {
    json_t *doc = pool_manifest_json(&m);
    if (doc) {
      json_object_set_new(doc, "state", json_string(state_name));
      json_object_set(doc, "live", live);
    }
    cli_print_json(doc);
  } else {
    printf("%-26s %s\n", "name", m.name);
    printf("%-26s %s\n", "state", state_name);
    printf("%-26s %s\n", "pool_hash", m.pool_hash);
    print_strings("backend_allowlist", m.backend_allowlist);
    print_strings("exposed_fields", m.exposed_fields);
    printf("%-26s %llu\n", "max_concurrency", (unsigned long long)m.max_concurrency);
    json_t *caps = pool_manifest_json(&m);
    const json_t *ceiling = json_object_get(caps, "capability_ceiling");
    printf("%-26s", "capability_ceiling");
    size_t i;
    json_t *c;
    if (!json_array_size(ceiling))
      printf(" -");
    json_array_foreach(ceiling, i, c) printf("%s%s", i ? ", " : " ", json_string_value(c));
    printf("\n%-26s %s\n", "network_egress_class", cordon_egress_name(m.network_egress_class));
    print_strings("credential_env_allowlist", m.credential_env_allowlist);
    char *t = NULL;
    size_t tn = 0;
    struct cordon_error *jerr = NULL;
    if (jcs_dump(json_object_get(caps, "template"), &t, &tn, &jerr) < 0)
      cordon_error_free(jerr);
    printf("%-26s %s\n", "template", t ? t : "{}");
    free(t);
    json_decref(caps);
    print_live(live);
  }
  json_decref(live);
  pool_manifest_clear(&m);
  cordon_context_free(ctx);
  return EXIT_OK;
}

static int pool_retire_cmd(int argc, char **argv) {
  struct pool_flags f = {0};
  const char *name = NULL;
  int r = parse_flags("pool retire", argc, argv, 0, &f);
  if (r)
    return r < 0 ? EXIT_OK : r;
  if ((r = one_argument("pool retire", argc, argv, "a pool", &name)))
    return r;
  struct cordon_error *err = NULL;
  struct cordon_context *ctx = NULL;
  if (cordon_context_open(NULL, &ctx, &err) < 0 || pool_retire(ctx, name, NULL, &err) < 0) {
    cordon_context_free(ctx);
    return cli_fail(err);
  }
  printf("retired %s\n", name);
  cordon_context_free(ctx);
  return EXIT_OK;
}

static int pool_verify_cmd(int argc, char **argv) {
  struct pool_flags f = {0};
  int r = parse_flags("pool verify", argc, argv, 1, &f);
  if (r)
    return r < 0 ? EXIT_OK : r;
  if (optind < argc)
    return cli_usage_error("pool verify", "unexpected argument '%s'", argv[optind]);
  struct cordon_error *err = NULL;
  struct cordon_context *ctx = NULL;
  struct pool_verify_report report = {0};
  if (cordon_context_open(NULL, &ctx, &err) < 0 || cli_ensure_install_key(&err) < 0 ||
      pool_verify(ctx, NULL, &report, &err) < 0) {
    cordon_context_free(ctx);
    return cli_fail(err);
  }
  if (f.json) {
    /* The dialect of every verify verb: ok, verdict, exit_code, problems. */
    json_t *problems = json_array();
    if (problems && !report.ok)
      json_array_append_new(
          problems, json_pack("{s:s,s:s,s:s}", "object", report.object ? report.object : "pool",
                              "verdict", "failed", "message", report.reason ? report.reason : ""));
    json_t *doc = json_pack("{s:b,s:s,s:i,s:o,s:I,s:I,s:I}", "ok", report.ok, "verdict",
                            report.ok ? "verified" : "failed", "exit_code",
                            report.ok ? EXIT_OK : EXIT_FAILURE_, "problems", problems, "entries",
                            (json_int_t)report.entries, "bodies", (json_int_t)report.bodies,
                            "receipts", (json_int_t)report.receipts);
    cli_print_json(doc);
  } else if (report.ok) {
    printf("pool verify: ok (%llu audit entries, %llu pool bodies, %llu receipts)\n",
           (unsigned long long)report.entries, (unsigned long long)report.bodies,
           (unsigned long long)report.receipts);
  } else {
    fprintf(stderr, "cordon: pool verify: %s\n", report.reason ? report.reason : "broken");
  }
  int code = report.ok ? EXIT_OK : EXIT_FAILURE_;
  pool_verify_report_clear(&report);
  cordon_context_free(ctx);
  return code;
}

/* Load the recipe (or an empty one for pool) and check it names pool. */
static int load_recipe(const char *verb, const char *pool, const char *file,
                       struct pool_recipe *recipe, struct cordon_error **err) {
  if (!file)
    return pool_recipe_empty(pool, recipe, err);
  _cleanup_free_ unsigned char *data = NULL;
  size_t n = 0;
  if (read_input(file, "recipe", &data, &n, err) < 0 ||
      pool_recipe_parse((const char *)data, n, recipe, err) < 0)
    return -1;
  if (strcmp(recipe->pool, pool) != 0) {
    cordon_error_set(err, CORDON_ERR_USAGE, 0, "%s: the recipe %s names pool %s, not %s", verb,
                     file, recipe->pool, pool);
    pool_recipe_clear(recipe);
    return -1;
  }
  return 0;
}

static json_t *placement_json(const struct pool_placement *p, const char *pool) {
  json_t *doc;
  if (p->refused)
    doc = json_pack("{s:b,s:s,s:s,s:s,s:s,s:s,s:s}", "placed", false, "pool", pool, "pool_hash",
                    p->pool_hash, "rule", pool_rule_name(p->refusal.rule), "field",
                    p->refusal.field, "message", p->refusal.message, "receipt", p->receipt_digest);
  else
    doc = json_pack("{s:b,s:s,s:s,s:s,s:s,s:s,s:O}", "placed", true, "pool", pool, "pool_hash",
                    p->pool_hash, "chosen_backend", p->chosen_backend, "effective_manifest_hash",
                    p->effective.hash, "receipt", p->receipt_digest, "effective_manifest",
                    p->effective.manifest);
  return doc;
}

static void report_refusal(const struct pool_placement *p, const char *pool, bool json) {
  if (json) {
    char *message = NULL;
    if (asprintf(&message, "pool %s refused the recipe: %s (%s): %s", pool,
                 pool_rule_name(p->refusal.rule), p->refusal.field, p->refusal.message) < 0)
      message = NULL;
    cli_json_error(message ? message : "refused", "denied", EXIT_UNAVAILABLE);
    free(message);
    return;
  }
  cli_error("pool %s refused the recipe: %s (%s): %s; receipt %s", pool,
            pool_rule_name(p->refusal.rule), p->refusal.field, p->refusal.message,
            p->receipt_digest);
}

static int pool_place_cmd(int argc, char **argv) {
  struct pool_flags f = {0};
  const char *name = NULL;
  int r = parse_flags("pool place", argc, argv, 1 | 2 | 4 | 8, &f);
  if (r)
    return r < 0 ? EXIT_OK : r;
  if ((r = one_argument("pool place", argc, argv, "a pool", &name)))
    return r;
  struct cordon_error *err = NULL;
  struct cordon_context *ctx = NULL;
  struct pool_recipe recipe = {0};
  struct pool_placement p = {0};
  struct cli_attestation att = {0};
  struct pool_attestation attestation = {0};
  if (cordon_context_open(NULL, &ctx, &err) < 0 ||
      load_recipe("pool place", name, f.recipe, &recipe, &err) < 0 ||
      cli_ensure_install_key(&err) < 0 ||
      (f.attestation && cli_attestation_load(f.attestation, f.expected_kid, &att, &err) < 0) ||
      pool_place(ctx, &recipe, NULL, 0, pool_attestation_of(&att, &attestation), NULL, &p, &err) <
          0 ||
      (f.out && fs_write_atomic(f.out, p.receipt, p.receipt_length, 0644, &err) < 0)) {
    cli_attestation_clear(&att);
    pool_placement_clear(&p);
    pool_recipe_clear(&recipe);
    cordon_context_free(ctx);
    return cli_fail(err);
  }
  int code = EXIT_OK;
  if (f.json)
    cli_print_json(placement_json(&p, name));
  else if (!p.refused)
    printf("placed %s on %s: effective manifest %s, receipt %s\n", name, p.chosen_backend,
           p.effective.hash, p.receipt_digest);
  if (p.refused) {
    if (!f.json)
      report_refusal(&p, name, false);
    code = EXIT_UNAVAILABLE;
  }
  pool_placement_clear(&p);
  pool_recipe_clear(&recipe);
  cli_attestation_clear(&att);
  cordon_context_free(ctx);
  return code;
}

int pool_cli_place(const char *verb, struct cordon_context *ctx, const struct cordon_registry *reg,
                   const char *pool, const char *recipe_file, bool json,
                   struct pool_session_inputs *in, const struct cordon_backend **backend) {
  struct cordon_error *err = NULL;
  struct pool_recipe recipe = {0};
  struct pool_placement p = {0};
  int code = EXIT_OK;
  if (load_recipe(verb, pool, recipe_file, &recipe, &err) < 0 || cli_ensure_install_key(&err) < 0 ||
      pool_place(ctx, &recipe, NULL, 0, NULL, NULL, &p, &err) < 0) {
    code = cli_fail(err);
    goto out;
  }
  if (p.refused) {
    report_refusal(&p, pool, json);
    code = EXIT_UNAVAILABLE;
    goto out;
  }
  if (pool_session_inputs_build(p.effective.manifest, p.chosen_backend, environ, in, &err) < 0 ||
      cordon_registry_find(reg, p.chosen_backend, backend, &err) < 0) {
    code = cli_fail(err);
    goto out;
  }
out:
  pool_placement_clear(&p);
  pool_recipe_clear(&recipe);
  return code;
}

int cmd_pool(int argc, char **argv) {
  static const struct cli_subverb subs[] = {
      {"register", pool_register_cmd}, {"list", pool_list_cmd},     {"show", pool_show_cmd},
      {"retire", pool_retire_cmd},     {"verify", pool_verify_cmd}, {"place", pool_place_cmd},
      {"submit", cmd_pool_submit},     {"warm", cmd_pool_warm},
  };
  return CLI_DISPATCH("pool", pool_usage, subs, argc, argv);
}
