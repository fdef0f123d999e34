/* `cordon select`, and the selection `run` and `session create` make for `--backend auto`:
 * the attestation verified (anchored to --expected-keyid, else to this install's key), the
 * registry's backends as candidates in cost order, and the library's pure selector
 * (include/cordon/select.h). This file reads files and options and prints. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cordon/attest.h>
#include <cordon/select.h>
#include <cordon/session.h>

#include "base/cleanup.h"
#include "cli/cli.h"

static const char select_usage[] =
    "usage: cordon select --require CAP[,CAP...] [--min-tier TIER] [--net CLASS]\n"
    "                     [--attestation FILE [--expected-keyid KID]] [--allow-unverifiable]\n"
    "                     [--json]\n"
    "\n"
    "Choose the cheapest backend that fits, by a pure function of the requirements, the\n"
    "backends' declarations, the attestation and the cost order (declared tier, lowest\n"
    "first, then the order 'cordon backends' lists). Prints the backend and the SHA-256 of\n"
    "the canonical selector_inputs (same inputs, same digest), or exits 4 with one reason per\n"
    "rejected backend.\n"
    "\n"
    "A backend must be available and declare every CAP, the tier and the egress class. Then\n"
    "the evidence of the attestation (verified first: anchored to --expected-keyid, else to\n"
    "this install's key; one that does not verify is refused): a required capability it\n"
    "refuted, or a measured tier below --min-tier, excludes the backend; a required\n"
    "capability it could not observe, a tier its boundary probes could not measure, a\n"
    "backend it does not list, is unverifiable. Without --attestation nothing was measured:\n"
    "every declared capability and tier is unverifiable. Unverifiable is accepted only with\n"
    "--allow-unverifiable.\n"
    "\n"
    "  --require CAP[,CAP...]  exec, file_rw, network, gpu, snapshot, persistent_volumes,\n"
    "                          caller_stdio (repeatable; at least one)\n"
    "  --min-tier TIER         none, process, container, vm (default none)\n"
    "  --net CLASS             none, loopback, restricted, open: the backend must offer it;\n"
    "                          implies network (its probe is what tests a class)\n"
    "  --attestation FILE      a 'cordon attest' document\n"
    "  --expected-keyid KID    the attestation's signer (default: this install's key)\n"
    "  --allow-unverifiable    accept claims no probe observed\n"
    "  --json                  {backend, selector_inputs, selector_inputs_digest, rejected}\n"
    "\n"
    "Exit codes: 0 a backend fits, 1 the attestation did not verify (or failed), 2 usage,\n"
    "4 no backend fits.\n";

/* The install key's id, when there is one; the attestation is anchored to it by default. */
static char *install_kid(void) {
  struct cordon_signing_key *key = NULL;
  struct cordon_error *err = NULL;
  if (cordon_signing_key_load(NULL, &key, &err) < 0) {
    cordon_error_free(err);
    return NULL;
  }
  char *kid = strdup(cordon_signing_key_id(key));
  cordon_signing_key_free(key);
  return kid;
}

int cli_attestation_load(const char *path, const char *expected_kid, struct cli_attestation *out,
                         struct cordon_error **err) {
  memset(out, 0, sizeof(*out));
  _cleanup_free_ char *anchor = expected_kid ? strdup(expected_kid) : install_kid();
  struct cordon_attest_report report;
  if (cordon_attest_select_rows(path, anchor, &report, out->sha256, &out->rows, &out->n_rows, err) <
      0)
    return -1;
  if (report.verdict != CORDON_VERDICT_VERIFIED) {
    cordon_error_set(err, CORDON_ERR_INVALID, 0, "attestation %s %s: %s", path,
                     cordon_verdict_name(report.verdict),
                     report.reason ? report.reason : "not verified");
    cordon_attest_report_clear(&report);
    cli_attestation_clear(out);
    return -1;
  }
  memcpy(out->kid, report.kid, sizeof(out->kid));
  cordon_attest_report_clear(&report);
  return 0;
}

void cli_attestation_clear(struct cli_attestation *a) {
  cordon_select_attested_free(a->rows, a->n_rows);
  memset(a, 0, sizeof(*a));
}

int cli_select(const struct cordon_registry *reg, const struct cli_select_request *req,
               struct cordon_select_result *result, struct cordon_error **err) {
  struct cli_attestation att = {0};
  if (req->attestation && cli_attestation_load(req->attestation, req->expected_kid, &att, err) < 0)
    return -1;
  struct cordon_select_attested *rows = att.rows;
  size_t n_rows = att.n_rows;
  char *sha256 = att.sha256, *kid = att.kid;
  struct cordon_select_candidate *candidates = NULL;
  size_t n = 0;
  int r = cordon_select_candidates(reg, rows, n_rows, &candidates, &n, err);
  if (r == 0) {
    struct cordon_select_input in = {.requirements = req->requirements,
                                     .candidates = candidates,
                                     .n_candidates = n,
                                     .attestation_sha256 = req->attestation ? sha256 : NULL,
                                     .attestation_kid = req->attestation ? kid : NULL};
    r = cordon_select(&in, result, err);
  }
  free(candidates);
  cli_attestation_clear(&att);
  return r;
}

void cli_select_print_rejections(const struct cordon_select_result *result) {
  for (size_t i = 0; i < result->n_rejections; i++)
    fprintf(stderr, "  %s: %s\n", result->rejections[i].backend, result->rejections[i].reason);
}

int cli_select_option(const char *verb, int c, const char *arg, struct cli_select_request *req) {
  struct cordon_error *err = NULL;
  uint32_t mask = 0;
  switch (c) {
  case CLI_OPT_REQUIRE:
    if (cordon_capabilities_parse(arg, &mask, &err) < 0) {
      int code = cli_usage_error(verb, "--require %s: %s", arg, err->message);
      cordon_error_free(err);
      return code;
    }
    req->requirements.capabilities |= mask;
    req->require_set = true;
    return 0;
  case CLI_OPT_MIN_TIER:
    if (cordon_tier_parse(arg, &req->requirements.min_tier) < 0) {
      return cli_usage_error(verb, "--min-tier %s: not a tier (none, process, container, vm)", arg);
    }
    req->min_tier_set = true;
    return 0;
  case CLI_OPT_ATTESTATION: req->attestation = arg; return 0;
  case CLI_OPT_EXPECTED_KEYID:
    if (strlen(arg) != CORDON_KEY_ID_LEN) {
      return cli_usage_error(verb, "--expected-keyid needs a key id (%d base64url characters)",
                             CORDON_KEY_ID_LEN);
    }
    req->expected_kid = arg;
    return 0;
  case CLI_OPT_ALLOW_UNVERIFIABLE: req->requirements.allow_unverifiable = true; return 0;
  }
  return 1;
}

int cmd_select(int argc, char **argv) {
  static const struct option opts[] = {CLI_SELECT_OPTIONS,
                                       {"net", required_argument, NULL, 'n'},
                                       {"json", no_argument, NULL, 'j'},
                                       {"help", no_argument, NULL, 'h'},
                                       {0}};
  struct cli_select_request req = {0};
  bool json = false;
  optind = 0;
  int c;
  while ((c = cli_getopt(argc, argv, "h", opts, NULL)) != -1) {
    int handled = cli_select_option("select", c, optarg, &req);
    if (handled > 1)
      return handled;
    if (handled == 0)
      continue;
    switch (c) {
    case 'n':
      if (cordon_egress_parse(optarg, &req.requirements.net) < 0)
        return cli_usage_error("select", "--net %s: not a class (none, loopback, restricted, open)",
                               optarg);
      req.requirements.net_set = true;
      break;
    case 'j': json = true; break;
    case 'h': fputs(select_usage, stdout); return EXIT_OK;
    default: return cli_option_error("select");
    }
  }
  if (optind < argc)
    return cli_usage_error("select", "unexpected argument '%s'", argv[optind]);
  if (!req.require_set)
    return cli_usage_error("select", "--require CAP[,CAP...] is needed");
  if (req.expected_kid && !req.attestation)
    return cli_usage_error("select", "--expected-keyid needs --attestation");
  struct cordon_error *err = NULL;
  struct cordon_registry *reg = NULL;
  struct cordon_select_result result = {0};
  if (cordon_registry_load(&reg, &err) < 0 || cli_select(reg, &req, &result, &err) < 0) {
    cordon_registry_free(reg);
    int code = cli_fail(err);
    return code == EXIT_OK ? EXIT_FAILURE_ : code;
  }
  cordon_registry_free(reg);
  int code = result.chosen ? EXIT_OK : EXIT_UNAVAILABLE;
  if (json) {
    json_t *inputs = json_loads(result.inputs_json, 0, NULL);
    json_t *rejected = json_array();
    for (size_t i = 0; i < result.n_rejections; i++)
      json_array_append_new(rejected,
                            json_pack("{s:s, s:s}", "backend", result.rejections[i].backend,
                                      "reason", result.rejections[i].reason));
    cli_print_json(json_pack("{s:s?, s:o, s:s, s:o}", "backend", result.chosen, "selector_inputs",
                             inputs ? inputs : json_null(), "selector_inputs_digest",
                             result.inputs_digest, "rejected", rejected));
  } else if (result.chosen) {
    printf("backend: %s\nselector_inputs: %s\n", result.chosen, result.inputs_digest);
  } else {
    cli_error("select: no backend fits (selector_inputs %s)", result.inputs_digest);
    cli_select_print_rejections(&result);
  }
  cordon_select_result_clear(&result);
  return code;
}
