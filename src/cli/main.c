/* `cordon`: the command line. One verb per file group; each verb parses its own options and
 * talks only to the library API. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

const char *cli_program = "cordon";

static const char main_usage[] =
    "usage: cordon VERB [options]\n"
    "\n"
    "Run untrusted commands in isolated, reproducible sandboxes.\n"
    "\n"
    "verbs:\n"
    "  run [options] -- ARGV...        create a session, run ARGV in it, destroy it\n"
    "  session create|exec|read|write|files|list|snapshot|shutdown|destroy\n"
    "                                  sessions that outlive one command\n"
    "  backends [--json]               list backends, capabilities, tiers, availability\n"
    "  conformance BACKEND [--json]    run the conformance suite against a backend\n"
    "  key init|show|jwks              the install identity: Ed25519 key, key id, JWKS\n"
    "  audit append|show|verify|repair the HMAC-chained audit log of the project\n"
    "  gc [--dry-run] [--all-projects] remove what killed cordon processes left behind\n"
    "  cas put|get|info|verify|prune   the project's content-addressed store\n"
    "  snapshot take|restore|export|import|show|list|forget\n"
    "                                  snapshots of directory trees, canonical tar images\n"
    "  race --base ID --k K --out RECEIPT -- ARGV...\n"
    "                                  fork K candidates from a snapshot, rank them, sign\n"
    "                                  a selection receipt\n"
    "  receipt verify RECEIPT [--expected-keyid KID]\n"
    "                                  verify a receipt offline (exit 0 verified, 1 failed,\n"
    "                                  4 unreadable, 2 incomplete, 3 unanchored, 64 usage)\n"
    "  version [--json]                the version (also -V, --version)\n"
    "\n"
    "Options may come before or after a verb's arguments (`cordon conformance ns --json`);\n"
    "long options are spelled out in full (no abbreviations). A command to run goes after\n"
    "`--`: what follows it is the command's, never cordon's (`cordon run` also takes the\n"
    "command from its first word that is not an option). Where a snapshot or session id is\n"
    "expected, a unique prefix of 8 or more hex digits will do; an ambiguous one is a usage\n"
    "error (2) naming the candidates, an unknown one \"no such ...\" (3).\n"
    "  volume list|remove              the project's persistent volumes (-v NAME:PATH)\n"
    "\n"
    "Every verb takes --help. Exit codes: 0 ok, 1 failed, 2 usage, 3 not found,\n"
    "4 unavailable or refused; `run` and `session exec` return the command's own code,\n"
    "124 on timeout, 125 when cordon failed, 126 cannot execute, 127 not found.\n"
    "Interrupted (SIGINT, SIGTERM, SIGHUP), `run`, `session` and `race` kill what runs,\n"
    "remove what they made, and exit by that signal (130, 143, 129).\n"
    "\n"
    "environment: CORDON_PROJECT (project directory holding .cordon/), CORDON_BACKEND,\n"
    "CORDON_SANDBOX=auto|ns|off, CORDON_SANDBOX_ALLOW, CORDON_PLUGIN_PATH,\n"
    "CORDON_KEY_DIR (where the keys live, outside every workspace),\n"
    "CORDON_RUNTIME_DIR (session sockets, secrets and --env values; default /run/cordon as\n"
    "root, else $XDG_RUNTIME_DIR/cordon), CORDON_QUIET=1 (no notice that a backend isolates\n"
    "nothing)\n";

void cli_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s: ", cli_program);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

int cli_exit_code_for(const struct cordon_error *err) {
  switch (err ? err->kind : CORDON_ERR_SYSTEM) {
  case CORDON_ERR_USAGE: return EXIT_USAGE;
  case CORDON_ERR_NOT_FOUND: return EXIT_NOT_FOUND;
  case CORDON_ERR_UNAVAILABLE:
  case CORDON_ERR_DENIED:
  case CORDON_ERR_UNSUPPORTED: return EXIT_UNAVAILABLE;
  default: return EXIT_FAILURE_;
  }
}

/* --json errors: with --json anywhere among a verb's options (before any "--"), an error is one
 * JSON object on stderr, {"error": {"message", "kind", "exit_code"}}, so a caller parsing
 * the output never has to scrape a plain line. Set once in main, before the verb runs. */
bool cli_json_errors;

static void detect_json_flag(int argc, char **argv) {
  for (int i = 2; i < argc && strcmp(argv[i], "--"); i++)
    if (!strcmp(argv[i], "--json"))
      cli_json_errors = true;
}

static const char *error_kind_name(const struct cordon_error *err) {
  switch (err ? err->kind : CORDON_ERR_SYSTEM) {
  case CORDON_ERR_USAGE: return "usage";
  case CORDON_ERR_NOT_FOUND: return "not_found";
  case CORDON_ERR_INVALID: return "invalid";
  case CORDON_ERR_UNAVAILABLE: return "unavailable";
  case CORDON_ERR_DENIED: return "denied";
  case CORDON_ERR_INTEGRITY: return "integrity";
  case CORDON_ERR_UNSUPPORTED: return "unsupported";
  case CORDON_ERR_INTERRUPTED: return "interrupted";
  default: return "system";
  }
}

void cli_json_error(const char *message, const char *kind, int exit_code) {
  json_t *doc = json_pack("{s:{s:s, s:s, s:i}}", "error", "message", message, "kind", kind,
                          "exit_code", exit_code);
  json_dumpf(doc, stderr, JSON_COMPACT | JSON_SORT_KEYS);
  fputc('\n', stderr);
  json_decref(doc);
}

json_t *cli_json_mode(unsigned mode) {
  char text[16];
  snprintf(text, sizeof(text), "%04o", mode & 07777);
  return json_string(text);
}

int cli_fail(struct cordon_error *err) {
  int code = cli_exit_code_for(err);
  if (cli_json_errors) {
    cli_json_error(err && err->message ? err->message : "failed", error_kind_name(err), code);
    cordon_error_free(err);
    return code;
  }
  /* Keep the promise of one line even if a message carries a newline from a library. */
  if (err && err->message)
    for (char *p = err->message; *p; p++)
      if (*p == '\n')
        *p = ' ';
  cli_error("%s", err && err->message ? err->message : "failed");
  cordon_error_free(err);
  return code;
}

int cli_usage_error(const char *verb, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (cli_json_errors) {
    char *message = NULL;
    int n = vasprintf(&message, fmt, ap);
    va_end(ap);
    cli_json_error(n < 0 ? "usage error" : message, "usage", EXIT_USAGE);
    free(message);
    return EXIT_USAGE;
  }
  fprintf(stderr, "%s: ", cli_program);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, " (see 'cordon %s --help')\n", verb);
  va_end(ap);
  return EXIT_USAGE;
}

int cli_dispatch(const char *verb, const char *usage, const struct cli_subverb *subs, size_t count,
                 int argc, char **argv) {
  if (argc < 2) {
    fputs(usage, stderr);
    return EXIT_USAGE;
  }
  const char *sub = argv[1];
  if (!strcmp(sub, "--help") || !strcmp(sub, "-h")) {
    fputs(usage, stdout);
    return EXIT_OK;
  }
  for (size_t i = 0; i < count; i++)
    if (!strcmp(sub, subs[i].name))
      return subs[i].fn(argc - 1, argv + 1);
  return cli_usage_error(verb, "unknown %s subverb '%s'", verb, sub);
}

void cli_print_json(json_t *doc) {
  json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
  putchar('\n');
  json_decref(doc);
}

int cli_open_store(struct cordon_context **ctx, struct cordon_cas **cas,
                   struct cordon_error **err) {
  *ctx = NULL;
  *cas = NULL;
  if (cordon_context_open(NULL, ctx, err) < 0)
    return -1;
  if (cordon_cas_open_project(*ctx, cas, err) < 0) {
    cordon_context_free(*ctx);
    *ctx = NULL;
    return -1;
  }
  return 0;
}

int cli_resolve_snapshot(struct cordon_context *ctx, const char *given, char **id,
                         struct cordon_error **err) {
  *id = NULL;
  if (cordon_digest_valid(given)) { /* whole: no store to open */
    *id = strdup(given);
    return *id ? 0 : cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "snapshot %s", given);
  }
  struct cordon_cas *cas = NULL;
  if (cordon_cas_open_project(ctx, &cas, err) < 0)
    return -1;
  int r = cordon_snapshot_resolve_id(cas, given, id, err);
  cordon_cas_close(cas);
  return r;
}

int cli_parse_double(const char *s, double min, double *out) {
  char *end = NULL;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || !*s || *end || v != v || v < min || v > 1e9)
    return -1;
  *out = v;
  return 0;
}

int cli_parse_u64(const char *s, unsigned long long *out) {
  char *end = NULL;
  if (!*s || *s == '-')
    return -1;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || *end)
    return -1;
  *out = v;
  return 0;
}

int cli_parse_size(const char *s, unsigned long long *out) {
  char *end = NULL;
  if (!*s || *s == '-')
    return -1;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s)
    return -1;
  unsigned shift = 0;
  if (*end) {
    switch (*end) {
    case 'k':
    case 'K': shift = 10; break;
    case 'm':
    case 'M': shift = 20; break;
    case 'g':
    case 'G': shift = 30; break;
    default: return -1;
    }
    if (end[1] && !(end[1] == 'i' && end[2] == 'B' && !end[3]) && !(end[1] == 'B' && !end[2]))
      return -1;
  }
  if (shift && v > (ULLONG_MAX >> shift))
    return -1;
  *out = v << shift;
  return 0;
}

int cli_parse_size_limit(const char *s, uint64_t *out) {
  unsigned long long v;
  if (!strcmp(s, "unlimited")) {
    *out = UINT64_MAX;
    return 0;
  }
  if (cli_parse_size(s, &v) < 0)
    return -1;
  *out = v ? (uint64_t)v : UINT64_MAX;
  return 0;
}

/* SIGINT, SIGTERM and SIGHUP while sandboxes run: the library is asked to stop
 * (cordon_interrupt), kills what runs, destroys what this command made, and then we die of the
 * same signal, as the caller (a shell, a CI runner) expects. A second signal does not wait for
 * that cleanup. */
static volatile sig_atomic_t caught_signal;

static void on_interrupt(int sig) {
  if (caught_signal) {
    signal(sig, SIG_DFL);
    raise(sig); /* delivered as soon as this handler returns */
    return;
  }
  caught_signal = sig;
  cordon_interrupt();
}

static void catch_interrupts(void) {
  struct sigaction sa = {.sa_handler = on_interrupt}; /* no SA_RESTART: waits wake up */
  sigemptyset(&sa.sa_mask);
  const int signals[] = {SIGINT, SIGTERM, SIGHUP};
  for (size_t i = 0; i < sizeof(signals) / sizeof(signals[0]); i++) {
    struct sigaction old;
    /* A signal ignored by whoever started us (nohup, a background job's SIGINT) stays so. */
    if (sigaction(signals[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN)
      sigaction(signals[i], &sa, NULL);
  }
}

static int exit_as_interrupted(int code) {
  if (!caught_signal)
    return code;
  fflush(NULL);
  signal(caught_signal, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, caught_signal);
  sigprocmask(SIG_UNBLOCK, &set, NULL);
  raise(caught_signal);
  return 128 + caught_signal;
}

/* `cordon version [--json]`, also `cordon -V` and `cordon --version`: one line. */
static int print_version(int argc, char **argv) {
  static const struct option opts[] = {
      {"json", no_argument, NULL, 'j'}, {"help", no_argument, NULL, 'h'}, {0}};
  bool json = false;
  int c;
  optind = 0;
  while ((c = cli_getopt(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case 'j': json = true; break;
    case 'h':
      fputs("usage: cordon version [--json]   (also cordon -V, cordon --version)\n", stdout);
      return EXIT_OK;
    default: return cli_option_error("version");
    }
  }
  if (optind < argc)
    return cli_usage_error("version", "unexpected argument '%s'", argv[optind]);
  if (json) {
    json_t *doc = json_pack("{s:s}", "version", CORDON_VERSION);
    json_dumpf(doc, stdout, JSON_COMPACT);
    putchar('\n');
    json_decref(doc);
  } else {
    printf("cordon %s\n", CORDON_VERSION);
  }
  return EXIT_OK;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fputs(main_usage, stderr);
    return EXIT_USAGE;
  }
  const char *verb = argv[1];
  if (!strcmp(verb, "--help") || !strcmp(verb, "-h") || !strcmp(verb, "help")) {
    fputs(main_usage, stdout);
    return EXIT_OK;
  }
  if (!strcmp(verb, "--version") || !strcmp(verb, "-V"))
    return print_version(argc - 1, argv + 1);
  static const struct {
    const char *name;
    int (*fn)(int argc, char **argv);
  } verbs[] = {
      {"run", cmd_run},
      {"session", cmd_session},
      {"backends", cmd_backends},
      {"conformance", cmd_conformance},
      {"key", cmd_key},
      {"audit", cmd_audit},
      {"gc", cmd_gc},
      {"cas", cmd_cas},
      {"snapshot", cmd_snapshot},
      {"race", cmd_race},
      {"receipt", cmd_receipt},
      {"version", print_version},
      {"volume", cmd_volume},
  };
  detect_json_flag(argc, argv);
  for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
    if (!strcmp(verb, verbs[i].name)) {
      /* The verbs that start sandboxes clean up when interrupted; the others keep the default
       * (their writes are atomic, and what a kill leaves in the store is removed by gc). */
      if (verbs[i].fn == cmd_run || verbs[i].fn == cmd_session || verbs[i].fn == cmd_race)
        catch_interrupts();
      /* A snapshot being taken or restored stops and removes its temporary files. */
      if (verbs[i].fn == cmd_snapshot && argc > 2 &&
          (!strcmp(argv[2], "take") || !strcmp(argv[2], "restore")))
        catch_interrupts();
      return exit_as_interrupted(verbs[i].fn(argc - 1, argv + 1));
    }
  cli_error("unknown verb '%s' (see 'cordon --help')", verb);
  return EXIT_USAGE;
}
