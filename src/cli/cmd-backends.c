/* `cordon backends` and `cordon conformance`. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "base/fs.h"
#include "cli/cli.h"

static const char backends_usage[] =
    "usage: cordon backends [--json]\n"
    "\n"
    "List every backend (built-in and plugins from CORDON_PLUGIN_PATH) with its capabilities,\n"
    "isolation tier (none < process < container < vm) and whether it is available on this host,\n"
    "with the reason when it is not. A plugin that failed to load is listed with the reason.\n"
    "gpu is listed for ns and docker only where this host has GPU device nodes.\n"
    "--json also lists the policy features each backend enforces (read_only_paths,\n"
    "hidden_paths, host_grants, memory, pids, cpu, nofile, fsize, tmp_size, net_none,\n"
    "net_loopback, net_restricted); asking a backend for another is refused; and its egress\n"
    "classes: none, loopback, restricted where it enforces them, open where it has network.\n";

static json_t *features_json(uint32_t features) {
  json_t *a = json_array();
  for (unsigned i = 0; i < CORDON_FEATURE_COUNT; i++)
    if (features & (1u << i))
      json_array_append_new(a, json_string(cordon_feature_name(1u << i)));
  return a;
}

/* The --net classes a backend can be asked for without a waiver (cordon_backend_egress_offered). */
static json_t *egress_json(const struct cordon_backend *b) {
  uint32_t offered = cordon_backend_egress_offered(b);
  json_t *a = json_array();
  for (enum cordon_egress e = CORDON_EGRESS_NONE; e <= CORDON_EGRESS_OPEN; e++)
    if (offered & (1u << e))
      json_array_append_new(a, json_string(cordon_egress_name(e)));
  return a;
}

/* A backend's capabilities as "file_rw,exec,..." in caps (128 bytes: every name fits), "-" for
 * a plugin that failed to load; returns caps. */
static const char *capabilities_text(const struct cordon_backend *b, char caps[128]) {
  if (!b)
    return strcpy(caps, "-");
  caps[0] = 0;
  uint32_t have = cordon_backend_capabilities(b);
  for (unsigned k = 0; k < CORDON_CAP_COUNT; k++)
    if (have & (1u << k)) {
      if (*caps)
        strcat(caps, ",");
      strcat(caps, cordon_capability_name(1u << k));
    }
  return caps;
}

static json_t *capabilities_json(uint32_t caps) {
  json_t *a = json_array();
  for (unsigned i = 0; i < CORDON_CAP_COUNT; i++)
    if (caps & (1u << i))
      json_array_append_new(a, json_string(cordon_capability_name(1u << i)));
  return a;
}

int cmd_backends(int argc, char **argv) {
  bool json = false;
  static const struct option opts[] = {
      {"json", no_argument, NULL, 'j'}, {"help", no_argument, NULL, 'h'}, {0}};
  int c;
  optind = 0;
  while ((c = cli_getopt(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case 'j': json = true; break;
    case 'h': fputs(backends_usage, stdout); return EXIT_OK;
    default: return cli_option_error("backends");
    }
  }
  if (optind < argc)
    return cli_usage_error("backends", "unexpected argument '%s'", argv[optind]);

  struct cordon_error *err = NULL;
  struct cordon_registry *reg = NULL;
  if (cordon_registry_load(&reg, &err) < 0)
    return cli_fail(err);
  json_t *list = json_array();
  const char *default_name = cordon_registry_default_name();
  /* The name and capabilities columns are as wide as their widest entries (a plugin's file
   * name, ns's capabilities), so that NOTES stays aligned. */
  int name_width = 11, caps_width = (int)strlen("CAPABILITIES");
  for (size_t i = 0; i < cordon_registry_count(reg); i++) {
    const struct cordon_registry_entry *e = cordon_registry_entry(reg, i);
    char caps[128];
    int n = (int)strlen(capabilities_text(e->backend, caps));
    caps_width = n > caps_width ? n : caps_width;
    name_width = (int)strlen(e->name) > name_width ? (int)strlen(e->name) : name_width;
  }
  if (!json)
    printf("%-*s %-10s %-5s %-*s %s\n", name_width, "BACKEND", "TIER", "AVAIL", caps_width,
           "CAPABILITIES", "NOTES");
  for (size_t i = 0; i < cordon_registry_count(reg); i++) {
    const struct cordon_registry_entry *e = cordon_registry_entry(reg, i);
    const struct cordon_backend *b = e->backend;
    char *reason = NULL;
    int available = b ? b->available(b, &reason) == 1 : 0;
    const char *why = b ? (available ? NULL : reason ? reason : "unavailable") : e->load_error;
    if (json) {
      json_t *o = json_pack("{s:s, s:s, s:b, s:b}", "name", e->name, "origin", e->origin,
                            "available", available, "default", strcmp(e->name, default_name) == 0);
      if (b) {
        json_object_set_new(o, "tier", json_string(cordon_tier_name(b->tier)));
        json_object_set_new(o, "capabilities", capabilities_json(cordon_backend_capabilities(b)));
        json_object_set_new(o, "enforces", features_json(b->enforces));
        json_object_set_new(o, "summary", json_string(b->summary ? b->summary : ""));
        json_object_set_new(o, "egress", egress_json(b));
      }
      if (why)
        json_object_set_new(o, b ? "unavailable_reason" : "load_error", json_string(why));
      json_array_append_new(list, o);
    } else {
      char caps[128];
      printf("%-*s %-10s %-5s %-*s %s%s%s%s\n", name_width, e->name,
             b ? cordon_tier_name(b->tier) : "-", available ? "yes" : "no", caps_width,
             capabilities_text(b, caps), strcmp(e->name, default_name) == 0 ? "(default) " : "",
             b && b->summary ? b->summary : "",
             why ? (b ? "; unavailable: " : "failed to load: ") : "", why ? why : "");
    }
    free(reason);
  }
  if (json) {
    json_dumpf(list, stdout, JSON_INDENT(2));
    putchar('\n');
  }
  json_decref(list);
  cordon_registry_free(reg);
  return EXIT_OK;
}

static const char conformance_usage[] =
    "usage: cordon conformance BACKEND [--json]\n"
    "\n"
    "Run the conformance suite against BACKEND in a temporary project (in $TMPDIR, else\n"
    "/tmp), removed afterwards: the suite's sessions, snapshots and blobs never reach the\n"
    "current project's store. Prints one line per check and, last,\n"
    "\"N passed, N failed, N skipped\"; with --json one JSON document. Exits 0 only when no\n"
    "check failed.\n";

int cmd_conformance(int argc, char **argv) {
  bool json = false;
  static const struct option opts[] = {
      {"json", no_argument, NULL, 'j'}, {"help", no_argument, NULL, 'h'}, {0}};
  int c;
  optind = 0;
  while ((c = cli_getopt(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case 'j': json = true; break;
    case 'h': fputs(conformance_usage, stdout); return EXIT_OK;
    default: return cli_option_error("conformance");
    }
  }
  if (optind != argc - 1)
    return cli_operands_error("conformance", "exactly one BACKEND", (size_t)(argc - optind));
  struct cordon_error *err = NULL;
  struct cordon_registry *reg = NULL;
  struct cordon_context *ctx = NULL;
  const struct cordon_backend *b = NULL;
  if (cordon_registry_load(&reg, &err) < 0)
    return cli_fail(err);
  int code = EXIT_OK;
  struct cordon_conformance_summary sum = {0};
  /* A scratch project of its own: the snapshots the suite takes are test data, and in the
   * user's store they would be blobs nobody asked for (until a gc). */
  char *scratch = NULL;
  const char *tmp = getenv("TMPDIR");
  if (asprintf(&scratch, "%s/cordon-conformance-XXXXXX", tmp && *tmp ? tmp : "/tmp") < 0) {
    cordon_registry_free(reg);
    return cli_fail(NULL);
  }
  if (!mkdtemp(scratch)) {
    cordon_error_set(&err, CORDON_ERR_SYSTEM, errno, "conformance: scratch project %s", scratch);
    free(scratch);
    scratch = NULL;
  }
  if (!scratch || cordon_registry_find(reg, argv[optind], &b, &err) < 0 ||
      cordon_context_open(scratch, &ctx, &err) < 0 ||
      cordon_conformance_run(ctx, b, stdout, json, &sum, &err) < 0)
    code = cli_fail(err);
  else if (sum.failed > 0)
    code = EXIT_FAILURE_;
  cordon_context_free(ctx);
  cordon_registry_free(reg);
  if (scratch) {
    struct cordon_error *rm_err = NULL;
    if (fs_remove_tree(scratch, &rm_err) < 0) {
      cli_error("cannot remove the scratch project: %s", rm_err->message);
      cordon_error_free(rm_err);
    }
    free(scratch);
  }
  return code;
}
