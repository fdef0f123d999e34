/* `cordon gate baseline|check`: the accuracy gate (src/agent/gate.h) on the command line. */
#include <getopt.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "agent/gate.h"
#include "base/cleanup.h"
#include "cli/cli.h"

/* A baseline that is malformed or tampered with: input data cordon refuses (sysexits'
 * EX_DATAERR), told apart from 1, which means "a protected path changed". */
#define EXIT_BAD_BASELINE 65

static const char gate_usage[] =
    "usage: cordon gate SUBVERB [options]\n"
    "\n"
    "The accuracy gate: prove that protected paths (tests, evaluator inputs) did not change.\n"
    "\n"
    "  baseline --out FILE PATH... [--json]\n"
    "                         record what each project-relative PATH holds (a directory by\n"
    "                         its snapshot id, a file by its SHA-256 and mode, a missing\n"
    "                         path as absent). FILE is a bare name, kept as\n"
    "                         .cordon/gates/FILE, or a path beneath the project's .cordon/\n"
    "                         (anything else is refused, exit 4: the agent could reach it)\n"
    "  check FILE [--json]    compare with the baseline: exit 0 when nothing changed, 1 with\n"
    "                         one line per changed, added or removed path (\"changed:\n"
    "                         tests/test_a.py\"; files inside a protected directory by name)\n"
    "\n"
    "Exit codes: 0 unchanged, 1 changed, 2 usage, 3 not found, 4 refused, 65 the baseline is\n"
    "malformed or was tampered with.\n";

enum { OPT_JSON = 256, OPT_OUT, OPT_HELP };

static const struct option gate_options[] = {{"json", no_argument, NULL, OPT_JSON},
                                             {"out", required_argument, NULL, OPT_OUT},
                                             {"help", no_argument, NULL, OPT_HELP},
                                             {0}};

struct gate_args {
  bool json;
  const char *out;
};

static int parse(const char *verb, int argc, char **argv, struct gate_args *a, bool takes_out) {
  int c;
  optind = 0;
  while ((c = cli_getopt(argc, argv, "h", gate_options, NULL)) != -1) {
    switch (c) {
    case OPT_JSON: a->json = true; break;
    case OPT_OUT:
      if (!takes_out)
        return cli_usage_error(verb, "--out belongs to 'gate baseline'");
      a->out = optarg;
      break;
    case 'h':
    case OPT_HELP: fputs(gate_usage, stdout); return -1;
    default: return cli_option_error(verb);
    }
  }
  return 0;
}

static int gate_baseline(int argc, char **argv) {
  struct gate_args a = {0};
  int rc = parse("gate baseline", argc, argv, &a, true);
  if (rc)
    return rc < 0 ? EXIT_OK : rc;
  if (!a.out)
    return cli_usage_error("gate baseline", "--out FILE is required");
  if (optind >= argc)
    return cli_usage_error("gate baseline", "name at least one PATH to protect");
  struct cordon_context *ctx = NULL;
  struct cordon_cas *cas = NULL;
  struct cordon_error *err = NULL;
  struct agent_gate_baseline *b = NULL;
  _cleanup_free_ char *location = NULL;
  int code = EXIT_OK;
  if (cli_open_store(&ctx, &cas, &err) < 0 ||
      agent_gate_location(cordon_context_project_dir(ctx), a.out, &location, &err) < 0 ||
      agent_gate_record(cas, cordon_context_project_dir(ctx), (const char *const *)&argv[optind],
                        &b, &err) < 0 ||
      agent_gate_save(b, location, &err) < 0) {
    code = cli_fail(err);
  } else if (a.json) {
    cli_print_json(json_pack("{s:s, s:I}", "baseline", location, "paths", (json_int_t)b->count));
  } else {
    printf("%s\n", location);
  }
  agent_gate_baseline_free(b);
  cordon_cas_close(cas);
  cordon_context_free(ctx);
  return code;
}

static void print_report(const struct agent_gate_report *r, const char *location, bool json) {
  if (json) {
    json_t *changes = json_array();
    for (size_t i = 0; i < r->count; i++)
      json_array_append_new(changes, json_pack("{s:s, s:s}", "change",
                                               agent_gate_change_kind_name(r->changes[i].kind),
                                               "path", r->changes[i].path));
    cli_print_json(json_pack("{s:s, s:b, s:o}", "baseline", location, "unchanged", r->count == 0,
                             "changes", changes));
    return;
  }
  for (size_t i = 0; i < r->count; i++)
    printf("%s: %s\n", agent_gate_change_kind_name(r->changes[i].kind), r->changes[i].path);
}

/* One line, exit 65: the baseline cannot be trusted, whatever the tree holds. */
static int bad_baseline(struct cordon_error *err) {
  if (cli_json_errors)
    cli_json_error(err->message, "invalid", EXIT_BAD_BASELINE);
  else
    cli_error("%s", err->message);
  cordon_error_free(err);
  return EXIT_BAD_BASELINE;
}

static int gate_check(int argc, char **argv) {
  struct gate_args a = {0};
  int rc = parse("gate check", argc, argv, &a, false);
  if (rc)
    return rc < 0 ? EXIT_OK : rc;
  if (optind + 1 != argc)
    return cli_usage_error("gate check", "give exactly one baseline FILE");
  struct cordon_context *ctx = NULL;
  struct cordon_cas *cas = NULL;
  struct cordon_error *err = NULL;
  struct agent_gate_baseline *b = NULL;
  struct agent_gate_report *r = NULL;
  _cleanup_free_ char *location = NULL;
  int code = EXIT_OK;
  if (cli_open_store(&ctx, &cas, &err) < 0 ||
      agent_gate_location(cordon_context_project_dir(ctx), argv[optind], &location, &err) < 0)
    code = cli_fail(err);
  else if (agent_gate_load(cas, location, &b, &err) < 0)
    code = err && err->kind == CORDON_ERR_INVALID ? bad_baseline(err) : cli_fail(err);
  else if (agent_gate_compare(cas, cordon_context_project_dir(ctx), b, &r, &err) < 0)
    code = cli_fail(err);
  else {
    print_report(r, location, a.json);
    code = r->count ? EXIT_FAILURE_ : EXIT_OK;
  }
  agent_gate_report_free(r);
  agent_gate_baseline_free(b);
  cordon_cas_close(cas);
  cordon_context_free(ctx);
  return code;
}

int cmd_gate(int argc, char **argv) {
  static const struct cli_subverb subs[] = {{"baseline", gate_baseline}, {"check", gate_check}};
  return CLI_DISPATCH("gate", gate_usage, subs, argc, argv);
}
