/* The dispatch side of pools on the command line: placing a dispatch and holding its pool (a
 * concurrency slot; a warm session when one fits, drifted ones quarantined), `cordon pool
 * submit` (queue a dispatch for workers) and `cordon pool warm` (provision sessions ahead).
 * `cordon worker` is in cmd-worker.c. */
#include "cli/cmd-pool-dispatch.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/spawn-detached.h"
#include "cli/cli.h"
#include "crypto/jcs.h"
#include "pool/queue.h"
#include "pool/worker.h"

extern char **environ;

char *pool_dispatch_actor(void) {
  struct passwd *pw = getpwuid(geteuid());
  char *actor = NULL;
  if (pw && pw->pw_name && *pw->pw_name ? asprintf(&actor, "user:%s", pw->pw_name) < 0
                                        : asprintf(&actor, "uid:%u", (unsigned)geteuid()) < 0)
    actor = NULL;
  return actor;
}

void pool_dispatch_placed_clear(struct pool_dispatch_placed *d) {
  pool_recipe_clear(&d->recipe);
  pool_placement_clear(&d->placement);
  pool_session_inputs_clear(&d->inputs);
  memset(d, 0, sizeof(*d));
}

static int load_recipe(const char *pool, const char *file, const json_t *given,
                       struct pool_recipe *recipe, struct cordon_error **err) {
  _cleanup_free_ unsigned char *data = NULL;
  _cleanup_free_ char *text = NULL;
  size_t n = 0;
  if (file) {
    if (fs_read_file(file, POOL_MANIFEST_MAX, &data, &n, err) < 0 ||
        pool_recipe_parse((const char *)data, n, recipe, err) < 0)
      return cordon_error_prefix(err, "recipe %s", file);
  } else if (given) {
    if (jcs_dump(given, &text, &n, err) < 0 || pool_recipe_parse(text, n, recipe, err) < 0)
      return cordon_error_prefix(err, "recipe");
  } else if (pool_recipe_empty(pool, recipe, err) < 0) {
    return -1;
  }
  if (strcmp(recipe->pool, pool)) {
    cordon_error_set(err, CORDON_ERR_USAGE, 0, "the recipe names pool %s, not %s", recipe->pool,
                     pool);
    pool_recipe_clear(recipe);
    return -1;
  }
  return 0;
}

static void report_refusal(const struct pool_placement *p, const char *pool, bool json) {
  _cleanup_free_ char *message = NULL;
  if (asprintf(&message, "pool %s refused the recipe: %s (%s): %s; receipt %s", pool,
               pool_rule_name(p->refusal.rule), p->refusal.field, p->refusal.message,
               p->receipt_digest) < 0)
    message = NULL;
  if (json)
    cli_json_error(message ? message : "refused", "denied", EXIT_UNAVAILABLE);
  else
    cli_error("%s", message ? message : "refused");
}

int pool_dispatch_place(const char *verb, struct cordon_context *ctx,
                        const struct cordon_registry *reg, const char *pool,
                        const char *recipe_file, const json_t *recipe_json,
                        const struct cli_attestation *att, bool json,
                        struct pool_dispatch_placed *out) {
  memset(out, 0, sizeof(*out));
  struct cordon_error *err = NULL;
  _cleanup_free_ char *actor = pool_dispatch_actor();
  struct pool_attestation attestation = {0};
  if (load_recipe(pool, recipe_file, recipe_json, &out->recipe, &err) < 0 ||
      cli_ensure_install_key(&err) < 0 ||
      pool_place(ctx, &out->recipe, NULL, 0, pool_attestation_of(att, &attestation), actor,
                 &out->placement, &err) < 0) {
    cordon_error_prefix(&err, "%s", verb);
    return cli_fail(err);
  }
  if (out->placement.refused) {
    report_refusal(&out->placement, pool, json);
    return EXIT_UNAVAILABLE;
  }
  /* The ceiling of the body that placed it (no second replay of the chain). */
  if (pool_session_inputs_build(out->placement.effective.manifest, out->placement.chosen_backend,
                                environ, &out->inputs, &err) < 0 ||
      cordon_registry_find(reg, out->placement.chosen_backend, &out->backend, &err) < 0)
    return cli_fail(err);
  out->max_concurrency = out->placement.max_concurrency;
  return EXIT_OK;
}

void pool_dispatch_workspace_hint(const struct pool_dispatch_placed *d, struct cordon_error *err) {
  const struct cordon_manifest *m = &d->inputs.manifest;
  if (!err || !err->message || m->workspace || (!m->policy.read_only && !m->policy.hidden))
    return;
  if (!strstr(err->message, "read-only path") && !strstr(err->message, "hidden path"))
    return;
  /* Without --workspace a pool's session starts in a fresh, empty directory: its read_only and
   * hidden paths cannot be there. */
  char *message = NULL;
  if (asprintf(&message,
               "%s: pool %s's read_only and hidden paths name paths in the workspace, an empty "
               "directory unless --workspace DIR (the current directory: --workspace .)",
               err->message, d->recipe.pool) < 0)
    return;
  free(err->message);
  err->message = message;
}

/* The placement as a warm slot would be recorded. */
static void current_record(const struct pool_dispatch_placed *d, struct pool_warm_record *cur) {
  memset(cur, 0, sizeof(*cur));
  snprintf(cur->pool, sizeof(cur->pool), "%s", d->recipe.pool);
  snprintf(cur->backend, sizeof(cur->backend), "%s", d->placement.chosen_backend);
  snprintf(cur->pool_hash, sizeof(cur->pool_hash), "%s", d->placement.pool_hash);
  snprintf(cur->overrides_hash, sizeof(cur->overrides_hash), "%s", d->recipe.overrides_hash);
  snprintf(cur->effective_manifest_hash, sizeof(cur->effective_manifest_hash), "%s",
           d->placement.effective.hash);
}

/* Set drifted warm slots aside: a receipt each, and their sessions destroyed. */
static void quarantine(struct cordon_context *ctx, const struct cordon_registry *reg,
                       const struct pool_warm_record *cur, const struct pool_warm_take *t) {
  _cleanup_free_ char *actor = pool_dispatch_actor();
  for (size_t i = 0; i < t->n_drifted; i++) {
    const struct pool_warm_record *slot = &t->drifted[i];
    struct pool_quarantine_fields f = {
        .pool = cur->pool,
        .session = slot->session,
        .pool_hash = cur->pool_hash,
        .effective_manifest_hash = cur->effective_manifest_hash,
        .overrides_hash = cur->overrides_hash,
        .slot_pool_hash = slot->pool_hash,
        .slot_effective_manifest_hash = slot->effective_manifest_hash,
    };
    struct cordon_error *err = NULL;
    if (pool_worker_record_quarantine(ctx, &f, actor, &err) < 0 ||
        cordon_session_destroy_id(ctx, reg, slot->session, &err) < 0) {
      cli_error("warm slot %s of pool %s: %s", slot->session, cur->pool, err ? err->message : "?");
      cordon_error_free(err);
      continue;
    }
    cli_error("warm slot %s of pool %s drifted (made from %.12s, the dispatch is %.12s): "
              "quarantined, not used",
              slot->session, cur->pool, slot->effective_manifest_hash,
              cur->effective_manifest_hash);
  }
}

int pool_lease_begin(const char *verb, struct cordon_context *ctx,
                     const struct cordon_registry *reg, const struct pool_dispatch_placed *d,
                     double wait_seconds, bool use_warm, bool json, struct pool_lease *lease) {
  memset(lease, 0, sizeof(*lease));
  struct cordon_error *err = NULL;
  const char *state_dir = cordon_context_state_dir(ctx);
  struct pool_slot_options opts = {.wait_seconds = wait_seconds};
  unsigned max =
      d->max_concurrency > POOL_SLOTS_MAX ? POOL_SLOTS_MAX : (unsigned)d->max_concurrency;
  if (pool_slot_acquire(state_dir, d->recipe.pool, max, &opts, &lease->slot, &err) < 0) {
    if (json) {
      int code = cli_exit_code_for(err);
      cli_json_error(err->message, cli_error_kind_name(err), code);
      cordon_error_free(err);
      return code;
    }
    return cli_fail(err);
  }
  if (!use_warm)
    return EXIT_OK;
  struct pool_warm_record cur;
  struct pool_warm_take t = {0};
  current_record(d, &cur);
  if (pool_warm_take(state_dir, &cur, &t, &err) < 0) {
    cli_error("%s: warm slots of pool %s not read (%s): starting cold", verb, cur.pool,
              err->message);
    cordon_error_free(err);
    return EXIT_OK;
  }
  quarantine(ctx, reg, &cur, &t);
  if (t.found) {
    if (cordon_session_open(ctx, reg, t.taken.session, &lease->warm, &err) < 0) {
      cli_error("%s: warm slot %s cannot be attached (%s): starting cold", verb, t.taken.session,
                err->message);
      cordon_error_free(err);
      err = NULL;
      cordon_session_destroy_id(ctx, reg, t.taken.session, &err);
      cordon_error_free(err);
      lease->warm = NULL;
    } else {
      snprintf(lease->warm_session, sizeof(lease->warm_session), "%s", t.taken.session);
    }
  }
  pool_warm_take_clear(&t);
  return EXIT_OK;
}

int pool_lease_bind(struct pool_lease *lease, const char *session_id, struct cordon_error **err) {
  return lease->slot ? pool_slot_bind_session(lease->slot, session_id, err) : 0;
}

int pool_lease_destroy_detached(struct pool_lease *lease, struct cordon_session *s, bool exiting,
                                pid_t *destroyer, struct cordon_error **err) {
  *destroyer = -1;
  char id[65];
  snprintf(id, sizeof(id), "%s", s->id);
  int lockfd = lease->slot ? pool_slot_lock_fd(lease->slot) : -1;
  fflush(NULL);
  char *argv[] = {"cordon", "session", "destroy", id, NULL};
  /* A caller about to exit does not even wait for the exec (the destroyer starts beside our
   * exit, sharing our memory until then); one that lives on, a worker, spawns. */
  if (exiting && (*destroyer = proc_spawn_detached("/proc/self/exe", argv, environ, lockfd)) > 0) {
    cordon_session_close(s);
    return 0;
  }
  /* posix_spawn (a vfork underneath): we wait only for the exec, not for a fork of our whole
   * address space and a second process to be scheduled; the destroyer runs in a session of its
   * own, stdio on /dev/null (our caller's pipes close with us), and holds the slot's flock. */
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  sigset_t none;
  sigemptyset(&none);
  bool ready = posix_spawn_file_actions_init(&actions) == 0;
  if (ready && posix_spawnattr_init(&attr) != 0) {
    posix_spawn_file_actions_destroy(&actions);
    ready = false;
  }
  int r = ready ? 0 : ENOMEM;
  if (!r)
    r = posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDWR, 0);
  if (!r)
    r = posix_spawn_file_actions_adddup2(&actions, 0, 1);
  if (!r)
    r = posix_spawn_file_actions_adddup2(&actions, 0, 2);
  if (!r)
    r = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK);
  if (!r)
    r = posix_spawnattr_setsigmask(&attr, &none);
  /* The slot's flock goes with it, as fd 3; nothing else of ours or our caller's does. */
  if (!r && lockfd >= 0 && lockfd != 3)
    r = posix_spawn_file_actions_adddup2(&actions, lockfd, 3);
  else if (!r && lockfd == 3 && fcntl(lockfd, F_SETFD, 0) < 0)
    r = errno;
  if (!r)
    r = posix_spawn_file_actions_addclosefrom_np(&actions, lockfd >= 0 ? 4 : 3);
  if (!r) {
    r = posix_spawn(destroyer, "/proc/self/exe", &actions, &attr, argv, environ);
    if (lockfd == 3)
      fcntl(lockfd, F_SETFD, FD_CLOEXEC);
  }
  if (ready) {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
  if (r) {
    *destroyer = -1;
    return cordon_session_destroy(s, err);
  }
  cordon_session_close(s);
  return 0;
}

void pool_lease_end(struct pool_lease *lease) {
  pool_slot_release(lease->slot);
  lease->slot = NULL;
}

/* ---- cordon pool submit ---- */

enum { OPT_D_RECIPE = 300, OPT_D_JSON, OPT_D_SLOTS, OPT_D_HELP, OPT_D_ATTESTATION, OPT_D_KID };

static const char submit_usage[] =
    "usage: cordon pool submit NAME [--recipe RECIPE.json] [--json] -- ARGV...\n"
    "\n"
    "Queue ARGV for the pool's workers (`cordon worker run --pool NAME`): a dispatch, canonical\n"
    "JSON whose id is its SHA-256, written atomically under .cordon/pools/queue/NAME/pending/.\n"
    "The recipe is read now and travels with the dispatch; the placement is decided (and may be\n"
    "refused) by the worker that claims it. Prints the dispatch id.\n"
    "\n"
    "options:\n"
    "  --recipe FILE  {\"pool\": NAME, \"overrides\": {...}} (default: no overrides)\n"
    "  --json         {\"dispatch_id\", \"pool\"}\n"
    "\n"
    "exit codes: 0 queued, 1 failed, 2 usage, 3 no such pool, 4 the pool is retired\n";

int cmd_pool_submit(int argc, char **argv) {
  static const struct option opts[] = {{"recipe", required_argument, NULL, OPT_D_RECIPE},
                                       {"json", no_argument, NULL, OPT_D_JSON},
                                       {"help", no_argument, NULL, OPT_D_HELP},
                                       {0}};
  const char *recipe_file = NULL;
  bool json = false;
  int end = cli_args_end(argc, argv), c;
  optind = 0;
  while ((c = cli_getopt(end, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case OPT_D_RECIPE: recipe_file = optarg; break;
    case OPT_D_JSON: json = true; break;
    case 'h':
    case OPT_D_HELP: fputs(submit_usage, stdout); return EXIT_OK;
    default: return cli_option_error("pool submit");
    }
  }
  if (optind >= end)
    return cli_usage_error("pool submit", "no pool named");
  if (optind + 1 < end)
    return cli_usage_error("pool submit", "unexpected argument '%s' (the command goes after --)",
                           argv[optind + 1]);
  const char *pool = argv[optind];
  if (end + 1 >= argc)
    return cli_usage_error("pool submit", "no command given after --");
  struct cordon_error *err = NULL;
  struct cordon_context *ctx = NULL;
  struct pool_recipe recipe = {0};
  struct pool_manifest m = {0};
  struct pool_dispatch d = {0};
  int code = EXIT_OK;
  json_auto_t *recipe_json = NULL;
  _cleanup_free_ unsigned char *data = NULL;
  size_t n = 0;
  if (recipe_file && (fs_read_file(recipe_file, POOL_MANIFEST_MAX, &data, &n, &err) < 0 ||
                      jcs_parse(data, n, POOL_MANIFEST_MAX, recipe_file, &recipe_json, &err) < 0 ||
                      pool_recipe_parse((const char *)data, n, &recipe, &err) < 0)) {
    code = cli_fail(err);
    goto out;
  }
  if (recipe_file && strcmp(recipe.pool, pool)) {
    code = cli_usage_error("pool submit", "the recipe names pool %s, not %s", recipe.pool, pool);
    goto out;
  }
  /* The pool must exist now: a dispatch for no pool would wait forever. */
  if (cordon_context_open(NULL, &ctx, &err) < 0 || pool_lookup(ctx, pool, &m, &err) < 0 ||
      pool_queue_submit(cordon_context_state_dir(ctx), pool, recipe_json,
                        (const char *const *)argv + end + 1, &d, &err) < 0) {
    code = cli_fail(err);
    goto out;
  }
  if (json)
    cli_print_json(json_pack("{s:s,s:s}", "dispatch_id", d.id, "pool", pool));
  else
    printf("%s\n", d.id);
out:
  pool_dispatch_clear(&d);
  pool_manifest_clear(&m);
  pool_recipe_clear(&recipe);
  cordon_context_free(ctx);
  return code;
}

/* ---- cordon pool warm ---- */

static const char warm_usage[] =
    "usage: cordon pool warm NAME --slots N [--recipe RECIPE.json]\n"
    "                        [--attestation FILE [--expected-keyid KID]] [--json]\n"
    "\n"
    "Provision N sessions ahead for the pool, placed as the recipe would be (a placement\n"
    "receipt is chained) and keyed by their effective manifest hash. A dispatch into the pool\n"
    "(`cordon run` or `cordon worker run`) attaches to a warm session only when its effective\n"
    "manifest hash and backend equal the dispatch's, and uses it once (it is destroyed\n"
    "afterwards). A warm session made from another body of the pool (the pool was updated,\n"
    "its template changed) is never used: the next dispatch quarantines it, with a signed\n"
    "receipt chained as pool.warm_quarantined, destroys it, and runs cold. Warm sessions hold\n"
    "no concurrency slot until a dispatch attaches.\n"
    "\n"
    "options:\n"
    "  --slots N      sessions to provision (1 to 64)\n"
    "  --recipe FILE  {\"pool\": NAME, \"overrides\": {...}} (default: no overrides)\n"
    "  --attestation FILE  place through the selector with this verified attestation, as\n"
    "                 the dispatches that should attach will (`cordon pool place`)\n"
    "  --expected-keyid KID  the attestation's signer (default: this install's key)\n"
    "  --json         {\"pool\", \"effective_manifest_hash\", \"backend\", \"sessions\": [...]}\n"
    "\n"
    "exit codes: 0 provisioned, 1 failed, 2 usage, 3 no such pool, 4 refused by the pool\n";

static int warm_parse(int argc, char **argv, const char **pool, const char **recipe,
                      unsigned long long *slots, bool *json, const char **attestation,
                      const char **expected_kid) {
  static const struct option opts[] = {{"recipe", required_argument, NULL, OPT_D_RECIPE},
                                       {"attestation", required_argument, NULL, OPT_D_ATTESTATION},
                                       {"expected-keyid", required_argument, NULL, OPT_D_KID},
                                       {"json", no_argument, NULL, OPT_D_JSON},
                                       {"slots", required_argument, NULL, OPT_D_SLOTS},
                                       {"help", no_argument, NULL, OPT_D_HELP},
                                       {0}};
  int c;
  optind = 0;
  while ((c = cli_getopt(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case OPT_D_RECIPE: *recipe = optarg; break;
    case OPT_D_JSON: *json = true; break;
    case OPT_D_SLOTS:
      if (cli_parse_u64(optarg, slots) < 0 || *slots < 1 || *slots > 64)
        return cli_usage_error("pool warm", "--slots wants 1 to 64, not '%s'", optarg);
      break;
    case OPT_D_ATTESTATION: *attestation = optarg; break;
    case OPT_D_KID:
      if (strlen(optarg) != CORDON_KEY_ID_LEN)
        return cli_usage_error("pool warm",
                               "--expected-keyid needs a key id (%d base64url characters)",
                               CORDON_KEY_ID_LEN);
      *expected_kid = optarg;
      break;
    case 'h':
    case OPT_D_HELP: fputs(warm_usage, stdout); return -1;
    default: return cli_option_error("pool warm");
    }
  }
  if (optind >= argc)
    return cli_usage_error("pool warm", "no pool named");
  if (optind + 1 < argc)
    return cli_usage_error("pool warm", "unexpected argument '%s'", argv[optind + 1]);
  if (!*slots)
    return cli_usage_error("pool warm", "--slots N is required");
  if (*expected_kid && !*attestation)
    return cli_usage_error("pool warm", "--expected-keyid needs --attestation FILE");
  *pool = argv[optind];
  return 0;
}

int cmd_pool_warm(int argc, char **argv) {
  const char *pool = NULL, *recipe = NULL, *attestation = NULL, *expected_kid = NULL;
  unsigned long long slots = 0;
  bool json = false;
  int code = warm_parse(argc, argv, &pool, &recipe, &slots, &json, &attestation, &expected_kid);
  if (code)
    return code < 0 ? EXIT_OK : code;
  struct cordon_error *err = NULL;
  struct cordon_context *ctx = NULL;
  struct cordon_registry *reg = NULL;
  struct pool_dispatch_placed d = {0};
  struct cli_attestation att = {0};
  json_t *sessions = json_array();
  if ((attestation && cli_attestation_load(attestation, expected_kid, &att, &err) < 0) ||
      cordon_context_open(NULL, &ctx, &err) < 0 || cordon_registry_load(&reg, &err) < 0) {
    code = cli_fail(err);
    goto out;
  }
  if ((code = pool_dispatch_place("pool warm", ctx, reg, pool, recipe, NULL,
                                  attestation ? &att : NULL, json, &d)) != EXIT_OK)
    goto out;
  struct pool_warm_record rec;
  current_record(&d, &rec);
  d.inputs.manifest.ephemeral = false;
  d.inputs.manifest.one_shot = false;
  for (unsigned long long i = 0; i < slots; i++) {
    struct cordon_session *s = NULL;
    if (cordon_session_create(ctx, d.backend, &d.inputs.manifest, &s, &err) < 0) {
      code = cli_fail(err);
      goto out;
    }
    snprintf(rec.session, sizeof(rec.session), "%s", s->id);
    json_array_append_new(sessions, json_string(s->id));
    cordon_session_close(s);
    if (pool_warm_add(cordon_context_state_dir(ctx), &rec, &err) < 0) {
      cordon_session_destroy_id(ctx, reg, rec.session, NULL);
      code = cli_fail(err);
      goto out;
    }
    if (!json)
      printf("%s\n", rec.session);
  }
  if (json)
    cli_print_json(json_pack("{s:s,s:s,s:s,s:O}", "pool", pool, "effective_manifest_hash",
                             rec.effective_manifest_hash, "backend", rec.backend, "sessions",
                             sessions));
out:
  json_decref(sessions);
  cli_attestation_clear(&att);
  pool_dispatch_placed_clear(&d);
  cordon_registry_free(reg);
  cordon_context_free(ctx);
  return code;
}
