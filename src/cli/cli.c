/* The helpers every verb shares (declared in cli.h): errors as one line or, under --json, one
 * JSON object; exit codes by error kind; usage errors; sub-verb dispatch; number and size
 * parsing; opening the project's store. main.c holds only `main` and what it alone needs. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

const char *cli_program = "cordon";

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

const char *cli_error_kind_name(const struct cordon_error *err) {
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
    cli_json_error(err && err->message ? err->message : "failed", cli_error_kind_name(err), code);
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

int cli_operands_error(const char *verb, const char *expected, size_t given) {
  if (given == 0)
    return cli_usage_error(verb, "expected %s, got none", expected);
  return cli_usage_error(verb, "expected %s, got %zu argument%s", expected, given,
                         given == 1 ? "" : "s");
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
