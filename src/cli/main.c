/* `cordon`: the command line. One verb per file group; each verb parses its own options and
 * talks only to the library API. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/cmd-pool-dispatch.h"
#include "crypto/digest.h"

static const char main_usage[] =
    "usage: cordon VERB [options]\n"
    "\n"
    "Run untrusted commands in isolated, reproducible sandboxes.\n"
    "\n"
    "sandboxes:\n"
    "  run [options] -- ARGV...        create a session, run ARGV in it, destroy it\n"
    "  session create|exec|read|write|files|list|snapshot|shutdown|destroy\n"
    "                                  sessions that outlive one command\n"
    "  volume list|remove              the project's persistent volumes (-v NAME:PATH)\n"
    "  agent [options] -- ARGV...      run an agent CLI confined at the project's own path\n"
    "  plan run PLAN.yaml [--dry-run] [--json]\n"
    "                                  run a plan's stages in order, each in a session\n"
    "  events [--follow] [--json] [--since TIME]\n"
    "                                  the project's event log: session create, destroy, exec\n"
    "\n"
    "snapshots and races:\n"
    "  snapshot take|restore|export|import|show|list|forget\n"
    "                                  snapshots of directory trees, canonical tar images\n"
    "  cas put|get|info|verify|prune   the project's content-addressed store\n"
    "  race --base ID --k K --out RECEIPT -- ARGV...\n"
    "                                  fork K candidates from a snapshot, rank them, sign\n"
    "                                  a selection receipt\n"
    "  receipt verify RECEIPT [--expected-keyid KID]\n"
    "                                  verify a receipt offline (exit 0 verified, 1 failed,\n"
    "                                  4 unreadable, 2 incomplete, 3 unanchored, 64 usage)\n"
    "  gate baseline|check             the accuracy gate: did protected paths change?\n"
    "  build (--rev REV | --from ID) --output PATH... -- ARGV...\n"
    "                                  a candidate build: fresh checkout, confined, outputs\n"
    "                                  verified and recorded; build show ID reads a record\n"
    "\n"
    "backends and placement:\n"
    "  backends [--json]               list backends, capabilities, tiers, availability\n"
    "  conformance BACKEND [--json]    run the conformance suite against a backend\n"
    "  attest [--backend NAME]... [--out FILE]\n"
    "                                  probe this host's backends, sign what was measured;\n"
    "                                  attest verify FILE [--expected-keyid KID] checks one\n"
    "  select --require CAP[,CAP...] [--min-tier TIER] [--net CLASS] [--attestation FILE]\n"
    "                                  the cheapest backend that fits, and its inputs' digest\n"
    "  pool register|list|show|retire|verify|place|submit|warm\n"
    "                                  named sandbox pools: governed placement with receipts\n"
    "  worker enrol|run --pool NAME    enrol this install as a pool's worker; run the\n"
    "                                  dispatches `pool submit` queues, with signed claims\n"
    "\n"
    "keys, audit and service:\n"
    "  key init|show|jwks              the install identity: Ed25519 key, key id, JWKS\n"
    "  audit append|show|verify|repair the HMAC-chained audit log of the project\n"
    "  serve [--listen ADDR:PORT | --socket PATH]\n"
    "                                  the HTTP API, /metrics and the JWKS (docs/api.md)\n"
    "  token create|revoke             bearer tokens for `cordon serve` over TCP\n"
    "  gc [--dry-run] [--all-projects] remove what killed cordon processes left behind\n"
    "  version [--json]                the version (also -V, --version)\n"
    "\n"
    "Options may come before or after a verb's arguments (`cordon conformance ns --json`);\n"
    "long options are spelled out in full (no abbreviations). A command to run goes after\n"
    "`--`: what follows it is the command's, never cordon's (`cordon run` also takes the\n"
    "command from its first word that is not an option). Where a snapshot or session id is\n"
    "expected, a unique prefix of 8 or more hex digits will do; an ambiguous one is a usage\n"
    "error (2) naming the candidates, an unknown one \"no such ...\" (3).\n"
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

static void detect_json_flag(int argc, char **argv) {
  for (int i = 2; i < argc && strcmp(argv[i], "--"); i++)
    if (!strcmp(argv[i], "--json"))
      cli_json_errors = true;
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

/* Page faults are dear where cordon often runs: in a VM whose page tables the hypervisor
 * shadows, one fault costs ~10-15 us while one madvise populates a page for ~1 us. A verb
 * touches its first tens of kilobytes of heap, its stack's top and its own .data/.bss in any
 * case: they are mapped in three calls instead of ~20 faults (bench/startup: a cold
 * `cordon run` takes ~20 faults fewer). Best effort: a kernel without MADV_POPULATE_WRITE
 * (5.14) says EINVAL, and the pages fault in as before. */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#define PREFAULT_HEAP_BYTES (112 * 1024)
#define PREFAULT_STACK_BYTES (32 * 1024)

extern char __data_start[], _end[]; /* the linker's: .data's start, .bss's end */

static void populate(uintptr_t start, uintptr_t end) {
  const uintptr_t page = 4096;
  start &= ~(page - 1);
  end = (end + page - 1) & ~(page - 1);
  if (end > start)
    (void)madvise((void *)start, end - start, MADV_POPULATE_WRITE);
}

static void prefault_startup(void) {
  void *heap = malloc(PREFAULT_HEAP_BYTES); /* below the mmap threshold: the brk heap */
  if (heap) {
    /* only whole pages inside the block: the heap's first page holds malloc's own data */
    uintptr_t from = ((uintptr_t)heap + 4095) & ~(uintptr_t)4095;
    populate(from, ((uintptr_t)heap + PREFAULT_HEAP_BYTES) & ~(uintptr_t)4095);
    free(heap);
  }
  uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
  populate(sp - PREFAULT_STACK_BYTES, sp);
  populate((uintptr_t)__data_start, (uintptr_t)_end);
}

#ifdef CORDON_DEFER_OPENSSL_CPUID
/* OpenSSL's CPU probe, called from .init before main and again by OpenSSL's own initialisation
 * (and crypto/digest.c's crypto_cpu_probe, before long hashes): skipped before main, done at the
 * first call after it. Until then libcrypto sees no CPU features, which only means its generic
 * code. */
static bool main_started;
void __real_OPENSSL_cpuid_setup(void);
void __wrap_OPENSSL_cpuid_setup(void);
void __wrap_OPENSSL_cpuid_setup(void) {
  if (main_started)
    __real_OPENSSL_cpuid_setup();
}
/* crypto/digest.c's hook: before long hashes and HMAC keys. Idempotent. */
static void cpu_probe_now(void) {
  __real_OPENSSL_cpuid_setup();
}
#endif

int main(int argc, char **argv) {
#ifdef CORDON_DEFER_OPENSSL_CPUID
  main_started = true;
  crypto_cpu_probe_hook = cpu_probe_now;
#endif
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
      {"agent", cmd_agent},
      {"gate", cmd_gate},
      {"build", cmd_build},
      {"events", cmd_events},
      {"plan", cmd_plan},
      {"serve", cmd_serve},
      {"token", cmd_token},
      {"attest", cmd_attest},
      {"pool", cmd_pool},
      {"worker", cmd_worker},
      {"select", cmd_select},
  };
  detect_json_flag(argc, argv);
  prefault_startup();
  for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
    if (!strcmp(verb, verbs[i].name)) {
      /* The verbs that start sandboxes clean up when interrupted; the others keep the default
       * (their writes are atomic, and what a kill leaves in the store is removed by gc). */
      if (verbs[i].fn == cmd_run || verbs[i].fn == cmd_session || verbs[i].fn == cmd_race ||
          verbs[i].fn == cmd_agent || verbs[i].fn == cmd_plan || verbs[i].fn == cmd_worker)
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
