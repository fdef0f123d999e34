/* `cordon run`: one command in a fresh session that is destroyed afterwards (the manifest
 * options it shares with `session create` are in cmd-manifest.c). */
#include <getopt.h>
#include <stdio.h>

#include "base/cleanup.h"
#include "base/proc.h"
#include "cli/cli.h"
#include "cli/cmd-manifest.h"
#include "cli/cmd-pool-dispatch.h"
#include "cli/cmd-pool.h"
#include "cli/stream.h"

static const char run_usage[] =
    "usage: cordon run [options] -- ARGV...\n"
    "\n"
    "Create a session, run ARGV in it (never through a shell), destroy the session, and exit\n"
    "with the command's exit code: 124 timed out, 125 cordon failed, 126 cannot execute,\n"
    "127 not found, 128+N killed by signal N. Enforcement is required by default: if the\n"
    "backend cannot confine the command, cordon refuses to run it.\n"
    "\n"
    "options:\n" MANIFEST_HELP
    "  --cwd DIR             working directory (relative to the workspace)\n"
    "  --stdin FILE          feed FILE (or - for cordon's stdin) to the command\n" STREAM_HELP
    "  --pool NAME           place into the named pool first (`cordon pool`): the backend,\n"
    "                        environment, limits and policy come from the pool's template\n"
    "                        and the recipe's overrides, never from the options above\n"
    "                        (but --attestation and --expected-keyid, which its selector\n"
    "                        reads, and --workspace DIR: the pool's read_only and hidden\n"
    "                        paths name paths in DIR; such a run is never served warm); a\n"
    "                        refused recipe exits 4 (receipt chained, nothing created)\n"
    "  --recipe FILE         with --pool: {\"pool\": NAME, \"overrides\": {...}}\n"
    "  --wait SECONDS        with --pool: wait up to SECONDS for one of the pool's\n"
    "                        max_concurrency slots (default: refused at once, exit 4);\n"
    "                        a warm session (`cordon pool warm`) whose effective manifest\n"
    "                        hash equals the placement's is used, once, instead of a new one\n";

/* Options of their own, numbered above cmd-manifest.h's. */
enum { OPT_POOL = 1000, OPT_RECIPE, OPT_WAIT_SLOT };

/* `run --pool`: the manifest comes from the placement. */
static int run_pooled(const char *pool, const char *recipe, double wait, struct manifest_opts *o,
                      struct cli_stream *st, char **command);

int cmd_run(int argc, char **argv) {
  static const struct option opts[] = {MANIFEST_OPTIONS,
                                       {"cwd", required_argument, NULL, OPT_CWD},
                                       {"stdin", required_argument, NULL, OPT_STDIN},
                                       STREAM_OPTIONS,
                                       {"pool", required_argument, NULL, OPT_POOL},
                                       {"recipe", required_argument, NULL, OPT_RECIPE},
                                       {"wait", required_argument, NULL, OPT_WAIT_SLOT},
                                       {0}};
  const char *pool = NULL, *recipe = NULL;
  double wait = -1;
  bool manifest_given = false; /* an option that shapes the manifest (not --json, --quiet) */
  struct cli_stream st = {0};
  struct manifest_opts o = {0};
  int c, code = EXIT_CORDON;
  optind = 0;
  while ((c = cli_getopt(argc, argv, "+hv:" STREAM_SHORT_OPTIONS, opts, NULL)) != -1) {
    if (c == 'h' || c == OPT_HELP) {
      fputs(run_usage, stdout);
      manifest_opts_free(&o);
      return EXIT_OK;
    }
    if (c == OPT_CWD) {
      o.cwd = optarg;
      continue;
    }
    if (c == OPT_STDIN) {
      o.stdin_file = optarg;
      continue;
    }
    if (c == 'i' || c == 't') {
      *(c == 'i' ? &st.interactive : &st.tty) = true;
      continue;
    }
    if (c == OPT_POOL || c == OPT_RECIPE) {
      *(c == OPT_POOL ? &pool : &recipe) = optarg;
      continue;
    }
    if (c == OPT_WAIT_SLOT) {
      if (cli_parse_double(optarg, 0, &wait) < 0) {
        cli_usage_error("run", "--wait wants seconds, not '%s'", optarg);
        manifest_opts_free(&o);
        return EXIT_CORDON;
      }
      continue;
    }
    /* --attestation and --expected-keyid shape no manifest: with --pool they feed its selector. */
    /* --workspace names the caller's directory, not the sandbox's shape: with --pool, the pool's
     * read_only and hidden paths apply to it. */
    if (c != OPT_JSON && c != OPT_QUIET && c != '?' && c != CLI_OPT_ATTESTATION &&
        c != CLI_OPT_EXPECTED_KEYID && c != OPT_WORKSPACE)
      manifest_given = true;
    int r = c == '?' ? cli_option_error("run") : manifest_option("run", c, optarg, &o);
    if (r != 0) {
      manifest_opts_free(&o);
      return r == EXIT_USAGE ? EXIT_CORDON : EXIT_CORDON;
    }
  }
  st.json = o.json;
  if (optind >= argc || cli_stream_check(&st, "run", &o.stdin_file) < 0) {
    if (optind >= argc)
      cli_usage_error("run", "no command given");
    manifest_opts_free(&o);
    return EXIT_CORDON;
  }
  if ((recipe || wait >= 0) && !pool) {
    cli_usage_error("run", "%s needs --pool NAME", recipe ? "--recipe" : "--wait");
    manifest_opts_free(&o);
    return EXIT_CORDON;
  }
  if (pool) {
    if (o.select.expected_kid && !o.select.attestation) {
      cli_usage_error("run", "--expected-keyid needs --attestation FILE");
      manifest_opts_free(&o);
      return EXIT_CORDON;
    }
    if (manifest_given) {
      cli_usage_error("run", "with --pool, the sandbox's shape comes from the pool and its "
                             "recipe, not from manifest options");
      manifest_opts_free(&o);
      return EXIT_CORDON;
    }
    code = run_pooled(pool, recipe, wait < 0 ? 0 : wait, &o, &st, argv + optind);
    manifest_opts_free(&o);
    return code;
  }
  struct cordon_manifest m;
  struct cordon_repo_spec repo = {0};
  if (cli_build_manifest(&o, &m, &repo) != 0) {
    manifest_opts_free(&o);
    return EXIT_CORDON;
  }
  m.ephemeral = true; /* destroyed below, by this process */
  m.one_shot = true;  /* one command: the backend may build the sandbox with it */
  struct cordon_error *err = NULL;
  struct cordon_registry *reg = NULL;
  struct cordon_context *ctx = NULL;
  const struct cordon_backend *b = NULL;
  struct cordon_session *s = NULL;
  _cleanup_free_ unsigned char *stdin_data = NULL;
  size_t stdin_len = 0;
  if (load_stdin(o.stdin_file, &stdin_data, &stdin_len, &err) < 0 ||
      cordon_registry_load(&reg, &err) < 0 || select_backend(reg, &o, &m, &b, &err) < 0 ||
      apply_backend(b, &o, &m, &err) < 0 || cordon_context_open(NULL, &ctx, &err) < 0 ||
      cordon_session_create(ctx, b, &m, &s, &err) < 0) {
    manifest_workspace_hint(&o, err);
    emit_failure(err, o.json, EXIT_CORDON);
    goto out;
  }
  struct cordon_exec_request req = {
      .argv = (const char *const *)(argv + optind),
      .cwd = o.cwd,
      .stdin_data = stdin_data ? stdin_data : (o.stdin_file ? (const void *)"" : NULL),
      .stdin_length = stdin_len,
  };
  struct cordon_exec_result res;
  if (cli_stream_prepare(&st, NULL, &req, &err) < 0 || cli_stream_start(&st, &err) < 0 ||
      cordon_session_exec(s, &req, &res, &err) < 0) {
    cli_stream_end(&st);
    emit_failure(err, o.json, EXIT_CORDON);
  } else {
    cli_stream_end(&st);
    emit_result_memory_limit(m.policy.limits.memory_bytes);
    code = emit_result(&res, o.json, o.timeout);
    cordon_exec_result_clear(&res);
  }
  err = NULL;
  /* Nothing follows but our exit: a sandbox's last steps in the kernel need no waiting for. */
  proc_exit_pending_set();
  if (cordon_session_destroy(s, &err) < 0) {
    cli_fail(err);
    code = EXIT_CORDON;
  }
out:
  cordon_context_free(ctx);
  cordon_registry_free(reg);
  manifest_opts_free(&o);
  return code;
}

static int run_pooled(const char *pool, const char *recipe, double wait, struct manifest_opts *o,
                      struct cli_stream *st, char **command) {
  struct cordon_error *err = NULL;
  struct cordon_registry *reg = NULL;
  struct cordon_context *ctx = NULL;
  struct cordon_session *s = NULL;
  struct pool_dispatch_placed d = {0};
  struct pool_lease lease = {0};
  struct cli_attestation att = {0};
  const char *attestation = o->select.attestation;
  _cleanup_free_ unsigned char *stdin_data = NULL;
  size_t stdin_len = 0;
  int code = EXIT_CORDON;
  if (load_stdin(o->stdin_file, &stdin_data, &stdin_len, &err) < 0 ||
      (attestation && cli_attestation_load(attestation, o->select.expected_kid, &att, &err) < 0) ||
      cordon_registry_load(&reg, &err) < 0 || cordon_context_open(NULL, &ctx, &err) < 0) {
    emit_failure(err, o->json, EXIT_CORDON);
    goto out;
  }
  /* Placement first: a refusal (4) leaves nothing behind but its chained receipt. Then a slot
   * of the pool's ceiling (4 when every one is held past --wait), and a warm session if one
   * fits. */
  int held = pool_dispatch_place("run", ctx, reg, pool, recipe, NULL, attestation ? &att : NULL,
                                 o->json, &d);
  if (held == EXIT_OK)
    held = pool_lease_begin("run", ctx, reg, &d, wait, !o->workspace, o->json, &lease);
  if (held != EXIT_OK) {
    code = held == EXIT_UNAVAILABLE ? EXIT_UNAVAILABLE : EXIT_CORDON;
    goto out;
  }
  d.inputs.manifest.ephemeral = true;
  d.inputs.manifest.one_shot = true;
  /* The caller's directory (a warm session has its own, fresh one: never used with it). */
  d.inputs.manifest.workspace = o->workspace;
  bool warm = lease.warm != NULL;
  if (warm) {
    s = lease.warm; /* used once: destroyed below, after we are gone */
    lease.warm = NULL;
  } else if (cordon_session_create(ctx, d.backend, &d.inputs.manifest, &s, &err) < 0) {
    pool_dispatch_workspace_hint(&d, err);
    emit_failure(err, o->json, EXIT_CORDON);
    goto out;
  }
  struct cordon_exec_request req = {
      .argv = (const char *const *)command,
      .cwd = o->cwd,
      .stdin_data = stdin_data ? stdin_data : (o->stdin_file ? (const void *)"" : NULL),
      .stdin_length = stdin_len,
  };
  struct cordon_exec_result res;
  if (cli_stream_prepare(st, NULL, &req, &err) < 0 || cli_stream_start(st, &err) < 0 ||
      cordon_session_exec(s, &req, &res, &err) < 0) {
    cli_stream_end(st);
    emit_failure(err, o->json, EXIT_CORDON);
  } else {
    cli_stream_end(st);
    emit_result_memory_limit(d.inputs.manifest.policy.limits.memory_bytes);
    code = emit_result(&res, o->json, d.inputs.manifest.default_timeout);
    cordon_exec_result_clear(&res);
  }
  err = NULL;
  proc_exit_pending_set();
  /* A warm session's teardown (a container's, a VM's) is not this command's latency: a detached
   * process destroys it, holding the pool slot until it is gone. */
  pid_t destroyer; /* not waited for: it outlives us, re-parented */
  if ((warm ? pool_lease_destroy_detached(&lease, s, true, &destroyer, &err)
            : cordon_session_destroy(s, &err)) < 0) {
    cli_fail(err);
    code = EXIT_CORDON;
  }
out:
  pool_lease_end(&lease);
  pool_dispatch_placed_clear(&d);
  cli_attestation_clear(&att);
  cordon_context_free(ctx);
  cordon_registry_free(reg);
  return code;
}
