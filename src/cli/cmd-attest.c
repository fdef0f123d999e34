/* `cordon attest` and `cordon attest verify`: mint the signed isolation attestation of this
 * host's backends, and verify one. The probes, the document and the verdict are the
 * library's (include/cordon/attest.h); this file parses options, prints and maps exit codes. */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cordon/attest.h>
#include <cordon/session.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "cli/cli.h"

/* As for `receipt verify`: 2 is the verdict "incomplete", so usage errors of verify exit 64. */
#define MAX_BACKENDS 64

static const char attest_usage[] =
    "usage: cordon attest [--backend NAME]... [--host-facts FILE] [--json] [--out FILE]\n"
    "       cordon attest verify FILE [--expected-keyid KID] [--json]\n"
    "\n"
    "Measure what each backend does on this host and sign it with the install key. Every\n"
    "capability a backend declares is probed through a real session (exec, file_rw,\n"
    "snapshot, network, gpu, persistent_volumes) and ends observed, refuted or\n"
    "unverifiable; boundary probes run from inside (host processes and files invisible, not\n"
    "root on the host, seccomp, no route off with --net none, memory and pids limits, own\n"
    "kernel) and give the measured tier (none < process < container < vm). A backend that is\n"
    "unavailable here is listed with the reason, every declared capability unverifiable;\n"
    "a plugin's boundary is unverifiable (its commands may run off this host). The document\n"
    "has no time or run id: an unchanged host attests to the same bytes. A sandbox.attested\n"
    "event (the document's digest, the signer) goes to the project's audit chain.\n"
    "\n"
    "  --backend NAME     attest this backend (repeatable); default: every backend\n"
    "  --host-facts FILE  a JSON object of host facts laid over the measured ones (names of\n"
    "                     the allowlist only: architecture, cgroup_layout, cordon_version,\n"
    "                     kernel_release, kvm, landlock_abi, seccomp, user_namespaces)\n"
    "  --out FILE         write the document there (atomically) instead of stdout\n"
    "  --json             print a summary as JSON (with --out) or the document (without)\n"
    "\n"
    "verify: exit 0 verified (signature, structure, partitions, tiers re-derived from the\n"
    "probes, signed by --expected-keyid), 1 failed, 4 unreadable, 2 incomplete (no such\n"
    "file), 3 unanchored (everything checks but no --expected-keyid), 64 usage error;\n"
    "precedence failed > unreadable > incomplete > unanchored, as 'cordon receipt verify'.\n"
    "attest itself exits 0, 1 failed, 2 usage, 3 no such backend.\n";

static int attest_verify(int argc, char **argv) {
  struct cli_verify_args args;
  int usage = cli_verify_parse(argc, argv, "attest", attest_usage, "attestation FILE", &args);
  if (usage >= 0)
    return usage;
  const char *path = args.path, *kid = args.kid;
  bool json = args.json;
  struct cordon_attest_report report;
  struct cordon_error *err = NULL;
  if (cordon_attest_verify_file(path, kid, &report, &err) < 0) {
    cli_fail(err);
    return EXIT_FAILURE_;
  }
  int code = (int)report.verdict;
  if (json) {
    json_t *o = json_pack("{s:b, s:s, s:s, s:i, s:I}", "ok", code == 0, "attestation", path,
                          "verdict", cordon_verdict_name(report.verdict), "exit_code", code,
                          "backends", (json_int_t)report.n_backends);
    if (report.kid[0])
      json_object_set_new(o, "kid", json_string(report.kid));
    if (report.host_facts_digest[0])
      json_object_set_new(o, "host_facts_digest", json_string(report.host_facts_digest));
    if (report.reason)
      json_object_set_new(o, "reason", json_string(report.reason));
    cli_print_json(o);
  } else if (report.verdict == CORDON_VERDICT_VERIFIED ||
             report.verdict == CORDON_VERDICT_UNANCHORED) {
    printf("%s: %s signed by %s; %zu backends; host facts %s%s\n",
           cordon_verdict_name(report.verdict), path, report.kid, report.n_backends,
           report.host_facts_digest,
           report.verdict == CORDON_VERDICT_UNANCHORED
               ? " (not anchored: give --expected-keyid to pin the signer)"
               : "");
  } else {
    cli_error("attestation %s %s: %s", path, cordon_verdict_name(report.verdict),
              report.reason ? report.reason : "not verified");
  }
  cordon_attest_report_clear(&report);
  return code;
}

static int attest_mint(int argc, char **argv) {
  static const struct option opts[] = {
      {"backend", required_argument, NULL, 'b'}, {"host-facts", required_argument, NULL, 'f'},
      {"out", required_argument, NULL, 'o'},     {"json", no_argument, NULL, 'j'},
      {"help", no_argument, NULL, 'h'},          {0}};
  const char *backends[MAX_BACKENDS + 1] = {0};
  size_t n = 0;
  const char *facts_path = NULL, *out = NULL;
  bool json = false;
  optind = 0;
  int c;
  while ((c = cli_getopt(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case 'b':
      if (n == MAX_BACKENDS)
        return cli_usage_error("attest", "at most %d --backend", MAX_BACKENDS);
      backends[n++] = optarg;
      break;
    case 'f': facts_path = optarg; break;
    case 'o': out = optarg; break;
    case 'j': json = true; break;
    case 'h': fputs(attest_usage, stdout); return EXIT_OK;
    default: return cli_option_error("attest");
    }
  }
  if (optind < argc)
    return cli_usage_error("attest", "unexpected argument '%s'", argv[optind]);
  struct cordon_error *err = NULL;
  _cleanup_free_ unsigned char *facts = NULL;
  size_t facts_length = 0;
  if (facts_path && fs_read_file(facts_path, 65536, &facts, &facts_length, &err) < 0)
    return cli_fail(err);
  struct cordon_context *ctx = NULL;
  struct cordon_registry *reg = NULL;
  struct cordon_attest_result res = {0};
  struct cordon_attest_options o = {.backends = n ? backends : NULL,
                                    .host_facts_json = (const char *)facts,
                                    .cordon_version = CORDON_VERSION,
                                    .out_path = out};
  int code = EXIT_OK;
  if (cli_ensure_install_key(&err) < 0 || cordon_context_open(NULL, &ctx, &err) < 0 ||
      cordon_registry_load(&reg, &err) < 0 || cordon_attest_run(ctx, reg, &o, &res, &err) < 0) {
    code = cli_fail(err);
  } else if (!out) {
    fwrite(res.document, 1, res.length, stdout);
  } else if (json) {
    cli_print_json(
        json_pack("{s:s, s:s, s:s}", "attestation", out, "sha256", res.digest, "kid", res.kid));
  } else {
    printf("attestation %s (sha256 %s) signed by %s\n", out, res.digest, res.kid);
  }
  cordon_attest_result_clear(&res);
  cordon_registry_free(reg);
  cordon_context_free(ctx);
  return code;
}

int cmd_attest(int argc, char **argv) {
  if (argc >= 2 && !strcmp(argv[1], "verify"))
    return attest_verify(argc - 1, argv + 1);
  return attest_mint(argc, argv);
}
