/* `cordon build`: a candidate build (src/agent/build.h), and `cordon build show ID`. */
#include <getopt.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "agent/build.h"
#include "base/cleanup.h"
#include "base/strv.h"
#include "cli/cli.h"

static const char build_usage[] =
    "usage: cordon build (--rev GITREV | --from SNAPSHOT) --output PATH... [--protect PATH...]\n"
    "                    [--mechanism NAME] [--json] -- ARGV...\n"
    "       cordon build show ID [--json]\n"
    "\n"
    "Check a git revision of the project (--rev) or a snapshot (--from) out fresh into a new\n"
    "directory under /var/tmp, run ARGV there under agent confinement (never unconfined: no\n"
    "network, a minimal environment, a private /tmp), then verify each declared --output\n"
    "(checkout-relative; no symlink or .. on the way, a regular file), copy it to\n"
    ".cordon/builds/ID/outputs/ and record {path, size, sha256} in .cordon/builds/ID.json\n"
    "with a build.recorded audit event. Prints the build id (128 random bits, hex).\n"
    "\n"
    "  --rev GITREV        a revision of the project's git repository\n"
    "  --from SNAPSHOT     a snapshot of the project's store (a unique prefix will do)\n"
    "  --output PATH       a file the build must produce (repeatable, at least one)\n"
    "  --protect PATH      a path the build must not change (repeatable; the accuracy gate)\n"
    "  --mechanism NAME    auto (default: ns, else bwrap), ns, bwrap, landlock, gvisor;\n"
    "                      CORDON_SANDBOX sets it too; off is refused (exit 4)\n"
    "  --json              print the record as JSON\n"
    "  show ID             print a build's record\n"
    "\n"
    "Exit codes: 0 recorded, 1 the command failed, an output is missing, not a regular file or\n"
    "escapes, or a protected path changed (each named), 2 usage, 3 not found, 4 no confinement\n"
    "available (naming what is missing).\n";

enum { OPT_JSON = 256, OPT_REV, OPT_FROM, OPT_OUTPUT, OPT_PROTECT, OPT_MECHANISM, OPT_HELP };

static const struct option build_options[] = {{"json", no_argument, NULL, OPT_JSON},
                                              {"rev", required_argument, NULL, OPT_REV},
                                              {"from", required_argument, NULL, OPT_FROM},
                                              {"output", required_argument, NULL, OPT_OUTPUT},
                                              {"protect", required_argument, NULL, OPT_PROTECT},
                                              {"mechanism", required_argument, NULL, OPT_MECHANISM},
                                              {"help", no_argument, NULL, OPT_HELP},
                                              {0}};

struct build_args {
  bool json;
  const char *rev, *from, *mechanism;
  char **outputs, **protect;
};

static void build_args_free(struct build_args *a) {
  strv_free(a->outputs);
  strv_free(a->protect);
}

static json_t *record_json(const struct agent_build_record *r) {
  json_t *outputs = json_array(), *argv = json_array(), *protect = json_array();
  for (size_t i = 0; r->protect && r->protect[i]; i++)
    json_array_append_new(protect, json_string(r->protect[i]));
  for (size_t i = 0; i < r->count; i++)
    json_array_append_new(outputs, json_pack("{s:s, s:I, s:s}", "path", r->outputs[i].path, "size",
                                             (json_int_t)r->outputs[i].size, "sha256",
                                             r->outputs[i].sha256));
  for (size_t i = 0; r->argv[i]; i++)
    json_array_append_new(argv, json_string(r->argv[i]));
  return json_pack("{s:s, s:{s:s, s:s, s:s}, s:o, s:s, s:o, s:o}", "id", r->id, "source", "kind",
                   r->source == AGENT_BUILD_FROM_REV ? "rev" : "snapshot", "given", r->given, "id",
                   r->source_id, "argv", argv, "mechanism", r->mechanism, "outputs", outputs,
                   "protected", protect);
}

static void print_record(const struct agent_build_record *r) {
  printf("build %s\nsource: %s %s (%s)\nmechanism: %s\n", r->id,
         r->source == AGENT_BUILD_FROM_REV ? "rev" : "snapshot", r->given, r->source_id,
         r->mechanism);
  for (size_t i = 0; i < r->count; i++)
    printf("output: %s %llu %s\n", r->outputs[i].path, (unsigned long long)r->outputs[i].size,
           r->outputs[i].sha256);
}

static int build_show(int argc, char **argv) {
  static const struct option show_options[] = {
      {"json", no_argument, NULL, OPT_JSON}, {"help", no_argument, NULL, OPT_HELP}, {0}};
  struct build_args a = {0};
  int c;
  optind = 0;
  while ((c = cli_getopt(argc, argv, "h", show_options, NULL)) != -1) {
    if (c == OPT_JSON)
      a.json = true;
    else if (c == 'h' || c == OPT_HELP)
      return fputs(build_usage, stdout), EXIT_OK;
    else
      return cli_option_error("build show");
  }
  if (optind + 1 != argc)
    return cli_usage_error("build show", "give exactly one build ID");
  struct cordon_context *ctx = NULL;
  struct cordon_error *err = NULL;
  struct agent_build_record *r = NULL;
  if (cordon_context_open(NULL, &ctx, &err) < 0 ||
      agent_build_record_load(ctx, argv[optind], &r, &err) < 0) {
    cordon_context_free(ctx);
    return cli_fail(err);
  }
  if (a.json)
    cli_print_json(record_json(r));
  else
    print_record(r);
  agent_build_record_free(r);
  cordon_context_free(ctx);
  return EXIT_OK;
}

static int parse_build(int argc, char **argv, struct build_args *a) {
  int c;
  optind = 0;
  while ((c = cli_getopt(argc, argv, "h", build_options, NULL)) != -1) {
    switch (c) {
    case OPT_JSON: a->json = true; break;
    case OPT_REV: a->rev = optarg; break;
    case OPT_FROM: a->from = optarg; break;
    case OPT_MECHANISM: a->mechanism = optarg; break;
    case OPT_OUTPUT:
      if (strv_push(&a->outputs, optarg) < 0)
        return cli_usage_error("build", "out of memory");
      break;
    case OPT_PROTECT:
      if (strv_push(&a->protect, optarg) < 0)
        return cli_usage_error("build", "out of memory");
      break;
    case 'h':
    case OPT_HELP: fputs(build_usage, stdout); return -1;
    default: return cli_option_error("build");
    }
  }
  if (!a->rev == !a->from)
    return cli_usage_error("build", "give exactly one of --rev GITREV and --from SNAPSHOT");
  if (!a->outputs)
    return cli_usage_error("build", "declare at least one --output PATH");
  return 0;
}

static int report_gate(const struct agent_gate_report *gate) {
  for (size_t i = 0; i < gate->count; i++)
    printf("%s: %s\n", agent_gate_change_kind_name(gate->changes[i].kind), gate->changes[i].path);
  cli_error("the build changed %zu protected path%s", gate->count, gate->count == 1 ? "" : "s");
  return EXIT_FAILURE_;
}

int cmd_build(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "show"))
    return build_show(argc - 1, argv + 1);
  int end = cli_args_end(argc, argv);
  _cleanup_(build_args_free) struct build_args a = {0};
  int rc = parse_build(end, argv, &a);
  if (rc)
    return rc < 0 ? EXIT_OK : rc;
  if (optind < end)
    return cli_usage_error("build", "unexpected argument '%s' (the command goes after --)",
                           argv[optind]);
  if (end + 1 >= argc)
    return cli_usage_error("build", "give the build command after --");
  struct cordon_error *err = NULL;
  struct agent_build_request request = {
      .source = a.rev ? AGENT_BUILD_FROM_REV : AGENT_BUILD_FROM_SNAPSHOT,
      .given = a.rev,
      .argv = (const char *const *)&argv[end + 1],
      .outputs = (const char *const *)a.outputs,
      .protect = (const char *const *)a.protect,
  };
  const char *mechanism = a.mechanism ? a.mechanism : getenv("CORDON_SANDBOX");
  if (mechanism && *mechanism && agent_mechanism_parse(mechanism, &request.kind, &err) < 0)
    return cli_fail(err);
  struct cordon_context *ctx = NULL;
  struct cordon_cas *cas = NULL;
  struct agent_build_record *r = NULL;
  struct agent_gate_report *gate = NULL;
  _cleanup_free_ char *snapshot = NULL;
  int code = EXIT_OK;
  if (cli_open_store(&ctx, &cas, &err) < 0 ||
      (a.from && cli_resolve_snapshot(ctx, a.from, &snapshot, &err) < 0)) {
    code = cli_fail(err);
    goto out;
  }
  if (snapshot)
    request.given = snapshot;
  if (agent_build_run(ctx, cas, &request, &r, &gate, &err) < 0)
    code = gate && gate->count ? report_gate(gate) : cli_fail(err);
  else if (a.json)
    cli_print_json(record_json(r));
  else
    printf("%s\n", r->id);
out:
  agent_gate_report_free(gate);
  agent_build_record_free(r);
  cordon_cas_close(cas);
  cordon_context_free(ctx);
  return code;
}
