/* `cordon run`: one command in a fresh session that is destroyed afterwards (the manifest
 * options it shares with `session create` are in cmd-manifest.c). */
#include <getopt.h>
#include <stdio.h>

#include "base/cleanup.h"
#include "base/proc.h"
#include "cli/cli.h"
#include "cli/cmd-manifest.h"
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
    "  --stdin FILE          feed FILE (or - for cordon's stdin) to the command\n" STREAM_HELP;

int cmd_run(int argc, char **argv) {
  static const struct option opts[] = {MANIFEST_OPTIONS,
                                       {"cwd", required_argument, NULL, OPT_CWD},
                                       {"stdin", required_argument, NULL, OPT_STDIN},
                                       STREAM_OPTIONS,
                                       {0}};
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
  struct cordon_manifest m;
  struct cordon_repo_spec repo = {0};
  if (build_manifest(&o, &m, &repo) != 0) {
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
