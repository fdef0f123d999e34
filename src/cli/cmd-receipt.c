/* `cordon receipt verify`: check a selection receipt offline against the project's store. The
 * verdict is the library's (cordon_receipt_verify_file); this file only maps it to the exit
 * code and prints it. */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cordon/cas.h>
#include <cordon/receipt.h>
#include <cordon/session.h>

#include "base/cleanup.h"
#include "cli/cli.h"

/* Problems printed after the first, on a failed verify (the JSON output has them all). */
#define SHOWN_PROBLEMS 10

static const char receipt_usage[] =
    "usage: cordon receipt verify RECEIPT [--expected-keyid KID] [--json]\n"
    "\n"
    "Verify a selection receipt written by 'cordon race', offline: its signature, its\n"
    "internal consistency (the winner among the candidates, the losers exactly the others,\n"
    "well-formed digests, the scores and the ranking re-derived), and, in the project's\n"
    "store, the base's, the winner's and every loser's snapshot manifest and every blob they\n"
    "name, re-hashed. The install key is created on first use, as by 'cordon race'.\n"
    "A race in which no candidate passed has \"winner\": null and \"outcome\": \"no_pass\":\n"
    "it verifies when, besides the above, no candidate passed and none is ranked.\n"
    "\n"
    "  --expected-keyid KID  the key id the receipt must be signed by ('cordon key show');\n"
    "                        without it a receipt that checks is only 'unanchored' (exit 3)\n"
    "  --json                print the verdict and every problem as JSON\n"
    "\n"
    "Exit codes, one verdict by precedence failed > unreadable > incomplete > unanchored:\n"
    "0 verified, 1 failed (bad signature, wrong signer, tampered blob, inconsistent body,\n"
    "malformed digest or receipt), 4 unreadable (a blob or the receipt present but not a\n"
    "readable regular file, e.g. a symlink or a FIFO), 2 incomplete (a blob or the receipt\n"
    "absent), 3 unanchored (everything checks but no --expected-keyid); 64 usage error\n"
    "(EX_USAGE: unknown option, no RECEIPT, a malformed key id).\n"
    "\n"
    "--json prints {\"ok\", \"verdict\", \"exit_code\", \"problems\"} and the receipt's fields.\n";

/* The project's store when the project has one: a verify creates nothing. */
static int open_store(struct cordon_context **ctx, struct cordon_cas **cas,
                      struct cordon_error **err) {
  if (cordon_context_open(NULL, ctx, err) < 0)
    return -1;
  _cleanup_free_ char *dir = NULL;
  if (asprintf(&dir, "%s/cas", cordon_context_state_dir(*ctx)) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "store");
  struct stat st;
  if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
    return 0;
  return cordon_cas_open(dir, cas, err);
}

static void print_json(const char *path, const struct cordon_receipt_report *r) {
  json_t *problems = json_array();
  for (size_t i = 0; i < r->n_problems; i++)
    json_array_append_new(problems,
                          json_pack("{s:s, s:s, s:s}", "verdict",
                                    cordon_verdict_name(r->problems[i].verdict), "object",
                                    r->problems[i].object, "message", r->problems[i].message));
  json_t *o = json_pack(
      "{s:b, s:s, s:s, s:i, s:o, s:I, s:I, s:I, s:I, s:I}", "ok",
      r->verdict == CORDON_VERDICT_VERIFIED, "receipt", path, "verdict",
      cordon_verdict_name(r->verdict), "exit_code", (int)r->verdict, "problems", problems,
      "problems_total", (json_int_t)r->problems_total, "candidates", (json_int_t)r->n_candidates,
      "snapshots_checked", (json_int_t)r->snapshots_checked, "blobs_checked",
      (json_int_t)r->blobs_checked, "bytes_checked", (json_int_t)r->bytes_checked);
  if (r->kid[0])
    json_object_set_new(o, "kid", json_string(r->kid));
  if (r->reason)
    json_object_set_new(o, "reason", json_string(r->reason));
  if (r->winner_task)
    json_object_set_new(
        o, "winner",
        json_pack("{s:s, s:s}", "task_id", r->winner_task, "snapshot", r->winner_snapshot));
  else if (r->outcome) /* read, and no candidate passed */
    json_object_set_new(o, "winner", json_null());
  if (r->outcome) {
    json_object_set_new(o, "outcome", json_string(r->outcome));
    json_object_set_new(o, "allow_no_pass", json_boolean(r->allow_no_pass));
  }
  if (r->base[0])
    json_object_set_new(o, "base", json_string(r->base));
  json_dumpf(o, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
  putchar('\n');
  json_decref(o);
}

static void print_text(const char *path, const struct cordon_receipt_report *r) {
  if ((r->verdict == CORDON_VERDICT_VERIFIED || r->verdict == CORDON_VERDICT_UNANCHORED) &&
      !r->winner_task) {
    printf("%s: %s signed by %s; outcome no_pass: no winner, none of %zu candidates passed, from "
           "base %s; %llu snapshot%s and %llu blob%s re-hashed%s\n",
           cordon_verdict_name(r->verdict), path, r->kid, r->n_candidates, r->base,
           (unsigned long long)r->snapshots_checked, r->snapshots_checked == 1 ? "" : "s",
           (unsigned long long)r->blobs_checked, r->blobs_checked == 1 ? "" : "s",
           r->verdict == CORDON_VERDICT_UNANCHORED
               ? " (not anchored: give --expected-keyid to pin the signer)"
               : "");
    return;
  }
  if (r->verdict == CORDON_VERDICT_VERIFIED || r->verdict == CORDON_VERDICT_UNANCHORED) {
    printf("%s: %s signed by %s; winner %s (snapshot %s) of %zu from base %s; %llu snapshot%s "
           "and %llu blob%s re-hashed%s\n",
           cordon_verdict_name(r->verdict), path, r->kid, r->winner_task, r->winner_snapshot,
           r->n_candidates, r->base, (unsigned long long)r->snapshots_checked,
           r->snapshots_checked == 1 ? "" : "s", (unsigned long long)r->blobs_checked,
           r->blobs_checked == 1 ? "" : "s",
           r->verdict == CORDON_VERDICT_UNANCHORED
               ? " (not anchored: give --expected-keyid to pin the signer)"
               : "");
    return;
  }
  /* Failures go to stderr, the worst first; a bad receipt file is exactly one line. */
  cli_error("receipt %s %s: %s", path, cordon_verdict_name(r->verdict),
            r->reason ? r->reason : "not verified");
  size_t shown = 0;
  for (size_t i = 0; i < r->n_problems && shown < SHOWN_PROBLEMS; i++) {
    if (r->reason && !strcmp(r->problems[i].message, r->reason))
      continue;
    cli_error("  %s: %s", cordon_verdict_name(r->problems[i].verdict), r->problems[i].message);
    shown++;
  }
  if (r->problems_total > shown + 1)
    cli_error("  ... %llu problems in all (--json lists up to %u)",
              (unsigned long long)r->problems_total, CORDON_RECEIPT_MAX_PROBLEMS);
}

static int receipt_verify(int argc, char **argv) {
  struct cli_verify_args args;
  int usage = cli_verify_parse(argc, argv, "receipt verify", receipt_usage, "RECEIPT file", &args);
  if (usage >= 0)
    return usage;
  const char *path = args.path, *kid = args.kid;
  bool json = args.json;
  struct cordon_error *err = NULL;
  struct cordon_context *ctx = NULL;
  struct cordon_cas *cas = NULL;
  struct cordon_receipt_report report = {0};
  int code;
  /* First use of cordon on this install may be a verify: the install key is made here as by
   * race, so the next 'cordon key show --kid' has a key to anchor on. The verdict does not
   * depend on it: a key that cannot be made (unsafe directory) does not fail the verify. */
  struct cordon_error *key_err = NULL;
  if (cli_ensure_install_key(&key_err) < 0)
    cordon_error_free(key_err);
  if (open_store(&ctx, &cas, &err) < 0 ||
      cordon_receipt_verify_file(cas, path, kid, &report, &err) < 0) {
    /* The check itself could not run: never a verdict of success. */
    cli_fail(err);
    code = EXIT_FAILURE_;
  } else {
    if (json)
      print_json(path, &report);
    else
      print_text(path, &report);
    code = (int)report.verdict;
  }
  cordon_receipt_report_clear(&report);
  cordon_cas_close(cas);
  cordon_context_free(ctx);
  return code;
}

int cmd_receipt(int argc, char **argv) {
  static const struct cli_subverb subs[] = {{"verify", receipt_verify}};
  /* A missing or unknown subverb is a usage error too: 64, as for verify's own. */
  if (argc < 2) {
    fputs(receipt_usage, stderr);
    return CLI_EXIT_VERIFY_USAGE;
  }
  if (strcmp(argv[1], "verify") && strcmp(argv[1], "--help") && strcmp(argv[1], "-h"))
    return cli_verify_usage_error("receipt verify", "unknown receipt subverb '%s'", argv[1]);
  return CLI_DISPATCH("receipt", receipt_usage, subs, argc, argv);
}
