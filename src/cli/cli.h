/* Shared pieces of the `cordon` command line: exit codes, error reporting, option helpers. */
#ifndef CORDON_CLI_H
#define CORDON_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include <cordon/cordon.h>

/* Exit codes of every verb but `run` and `session exec` (which return the command's). */
enum {
  EXIT_OK = 0,
  EXIT_FAILURE_ = 1,    /* the operation failed */
  EXIT_USAGE = 2,       /* bad flags or arguments */
  EXIT_NOT_FOUND = 3,   /* no such session, backend or file */
  EXIT_UNAVAILABLE = 4, /* backend or mechanism missing on this host; refused by policy */
  EXIT_TIMED_OUT = 124, /* run / session exec: the command hit its timeout */
  EXIT_CORDON = 125,    /* run / session exec: cordon itself failed */
};

extern const char *cli_program;

/* Print "cordon: message" on stderr, one line. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Print the error, free it, and return the exit code its kind maps to. */
int cli_fail(struct cordon_error *err);
int cli_exit_code_for(const struct cordon_error *err);
/* The kind of err as the JSON dialect names it ("not_found", "usage", ...). */
const char *cli_error_kind_name(const struct cordon_error *err);
/* A verb group's subverbs (`cordon VERB SUBVERB ...`). */
struct cli_subverb {
  const char *name;
  int (*fn)(int argc, char **argv); /* argv[0] is the subverb */
};
/* Run the subverb argv[1] names: usage on stderr (exit 2) without one, on stdout (exit 0) for
 * --help or -h, one line naming the verb for an unknown one (exit 2). */
int cli_dispatch(const char *verb, const char *usage, const struct cli_subverb *subs, size_t count,
                 int argc, char **argv);
#define CLI_DISPATCH(verb, usage, subs, argc, argv) \
  cli_dispatch(verb, usage, subs, sizeof(subs) / sizeof(subs[0]), argc, argv)

/* Report a usage problem with a hint to --help; returns EXIT_USAGE. */
int cli_usage_error(const char *verb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The usage error for a wrong number of operands: what the verb expects ("ID DIR") and how many
 * it was given ("expected ID DIR, got 1 argument"). */
int cli_operands_error(const char *verb, const char *expected, size_t given);

/* Signed-document verifies (receipt, attestation) exit 64 on a usage error (EX_USAGE of
 * sysexits.h), not the 2 other verbs use: 2 is already the verdict "incomplete", and a script
 * must be able to tell them apart. */
#define CLI_EXIT_VERIFY_USAGE 64
int cli_verify_usage_error(const char *verb, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The arguments every signed-document verify takes: exactly one FILE (`what` names it in the
 * error), --expected-keyid KID (checked for length), --json, --help (prints `usage`).
 * Returns -1 to go on with *out filled, else the exit code to return. */
struct cli_verify_args {
  const char *path;
  const char *kid;
  bool json;
};
int cli_verify_parse(int argc, char **argv, const char *verb, const char *usage, const char *what,
                     struct cli_verify_args *out);

/* The option parser of every verb (cli-options.c): getopt_long, but options may follow
 * positional arguments (unless shortopts starts with '+'), abbreviated long options are
 * refused, and a refused or unknown option returns '?' for cli_option_error to report. Set
 * optind = 0 before the first call of a loop. */
struct option;
int cli_getopt(int argc, char **argv, const char *shortopts, const struct option *longopts,
               int *longindex);
/* The index of the first "--" in argv, else argc: a verb that takes a command parses only
 * the words before it. */
int cli_args_end(int argc, char **argv);
/* Report the option the last cli_getopt refused ("unknown option '--work'", "option
 * '--timeout' needs a value"); returns EXIT_USAGE. */
int cli_option_error(const char *verb);
/* The message cli_option_error prints, malloc'd (NULL on ENOMEM), for a verb with its own
 * usage exit code. */
char *cli_option_message(void);

/* Strict number parsing: the whole string, in range. */
int cli_parse_double(const char *s, double min, double *out);
int cli_parse_u64(const char *s, unsigned long long *out);
/* Sizes with an optional K, M, G suffix (powers of 1024). */
int cli_parse_size(const char *s, unsigned long long *out);
/* A size limit: SIZE as cli_parse_size, or "0" or "unlimited" for none (UINT64_MAX). */
int cli_parse_size_limit(const char *s, uint64_t *out);

/* --json errors (main.c): true when the verb was given --json; then cli_fail and
 * cli_usage_error print one JSON object on stderr instead of a plain line. */
extern bool cli_json_errors;
/* Print {"error": {"message", "kind", "exit_code"}} on stderr, one line. */
void cli_json_error(const char *message, const char *kind, int exit_code);

/* A file mode as the CLI's JSON gives it: an octal string, "0644". */
json_t *cli_json_mode(unsigned mode);

/* The install key (cmd-key.c): create it when there is none yet, saying so once on stderr
 * ("cordon: created the install key KID in DIR"); an unsafe or unreadable key is an error. */
int cli_ensure_install_key(struct cordon_error **err);

/* Print a JSON document on stdout (indented, keys sorted) and release it. */
void cli_print_json(json_t *doc);
/* Open the project's context and its store (created if needed); both NULL on failure. */
int cli_open_store(struct cordon_context **ctx, struct cordon_cas **cas, struct cordon_error **err);

/* The whole snapshot id given names (a unique prefix of 8+ hex digits is enough), malloc'd;
 * the project's store is opened only for a prefix. */
int cli_resolve_snapshot(struct cordon_context *ctx, const char *given, char **id,
                         struct cordon_error **err);

int cmd_run(int argc, char **argv);
int cmd_session(int argc, char **argv);
int cmd_backends(int argc, char **argv);
int cmd_conformance(int argc, char **argv);
int cmd_key(int argc, char **argv);      /* cmd-key.c */
int cmd_audit(int argc, char **argv);    /* cmd-audit.c */
int cmd_gc(int argc, char **argv);       /* cmd-gc.c */
int cmd_cas(int argc, char **argv);      /* cmd-cas.c */
int cmd_snapshot(int argc, char **argv); /* cmd-snapshot.c */
/* In cmd-race.c and cmd-receipt.c. */
int cmd_race(int argc, char **argv);
int cmd_receipt(int argc, char **argv);
int cmd_volume(int argc, char **argv); /* cmd-volume.c */
int cmd_agent(int argc, char **argv);  /* cmd-agent.c */
int cmd_gate(int argc, char **argv);   /* cmd-gate.c */
int cmd_build(int argc, char **argv);  /* cmd-build.c */
int cmd_events(int argc, char **argv); /* cmd-events.c */
int cmd_plan(int argc, char **argv);   /* cmd-plan.c */
int cmd_pool(int argc, char **argv);   /* cmd-pool.c */

/* `cordon serve` and `cordon token` (cmd-serve.c, cmd-token.c). The server is src/server/, on
 * this floor: its one entry is declared here rather than included (src/server/serve.h). */
int cmd_serve(int argc, char **argv);
int cmd_token(int argc, char **argv);
int server_run(const char *listen_spec, const char *socket_path, const char *token_file,
               FILE *announce, struct cordon_error **err);

int cmd_attest(int argc, char **argv); /* cmd-attest.c */

/* `cordon select` and `--backend auto` (cmd-select.c): the options both take, and the
 * selection with the attestation verified first. */
enum {
  CLI_OPT_REQUIRE = 400,
  CLI_OPT_MIN_TIER,
  CLI_OPT_ATTESTATION,
  CLI_OPT_EXPECTED_KEYID,
  CLI_OPT_ALLOW_UNVERIFIABLE,
};
#define CLI_SELECT_OPTIONS                                                   \
  {"require", required_argument, NULL, CLI_OPT_REQUIRE},                     \
      {"min-tier", required_argument, NULL, CLI_OPT_MIN_TIER},               \
      {"attestation", required_argument, NULL, CLI_OPT_ATTESTATION},         \
      {"expected-keyid", required_argument, NULL, CLI_OPT_EXPECTED_KEYID}, { \
    "allow-unverifiable", no_argument, NULL, CLI_OPT_ALLOW_UNVERIFIABLE      \
  }
struct cli_select_request {
  struct cordon_select_requirements requirements;
  const char *attestation;  /* NULL: none, every declared claim unverifiable */
  const char *expected_kid; /* NULL: this install's key */
  bool require_set, min_tier_set;
};
/* 0 handled, 1 not a selector option, else the exit code of a usage error (said). */
int cli_select_option(const char *verb, int c, const char *arg, struct cli_select_request *req);
/* The attestation (when named) verified, else refused (CORDON_ERR_INVALID); then the
 * selection. result->chosen NULL: nothing fits. */
int cli_select(const struct cordon_registry *reg, const struct cli_select_request *req,
               struct cordon_select_result *result, struct cordon_error **err);
/* An attestation file verified as `cordon select` verifies it (anchored to expected_kid, else
 * this install's key), read into the selector's rows; anything but verified is refused
 * (CORDON_ERR_INVALID naming the file). */
struct cli_attestation {
  struct cordon_select_attested *rows;
  size_t n_rows;
  char sha256[65];
  char kid[CORDON_KEY_ID_LEN + 1];
};
int cli_attestation_load(const char *path, const char *expected_kid, struct cli_attestation *out,
                         struct cordon_error **err);
void cli_attestation_clear(struct cli_attestation *a);
/* "  BACKEND: reason" per rejected backend, on stderr. */
void cli_select_print_rejections(const struct cordon_select_result *result);
int cmd_select(int argc, char **argv);

#endif
