/* The option parser every verb's loop goes through: getopt_long with three rules of its own.
 * Options may follow positional arguments (getopt's permutation; a verb that takes a command
 * parses only the words before `--`, and `run`, whose command may start at its first
 * positional word, asks for getopt's stop-at-first-word mode with a leading '+'). A long
 * option must be spelled out: getopt_long takes any unique prefix, which turns a typo or a
 * later, longer option into a silent guess, so a token that is not the matched option's full
 * name is refused. And a refused option gets one message, made here. */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "cli/cli.h"

/* What the last '?' was about: the token as given, and what was wrong with it. */
static const char *bad_token;
static char bad_short[3];
static enum { BAD_UNKNOWN, BAD_MISSING_VALUE, BAD_UNWANTED_VALUE } bad_kind;

static const struct option *find_long(const struct option *longopts, const char *name, size_t len) {
  for (const struct option *o = longopts; o && o->name; o++)
    if (strlen(o->name) == len && !strncmp(o->name, name, len))
      return o;
  return NULL;
}

static int refuse(const char *token, int kind) {
  bad_token = token;
  bad_kind = kind;
  return '?';
}

int cli_getopt(int argc, char **argv, const char *shortopts, const struct option *longopts,
               int *longindex) {
  int index = -1;
  opterr = 0;
  optopt = 0;
  int c = getopt_long(argc, argv, shortopts, longopts, &index);
  if (c == -1)
    return c;
  const char *token = optind >= 1 && optind - 1 < argc ? argv[optind - 1] : "";
  if (c == '?' || c == ':') {
    if (strncmp(token, "--", 2) && optopt > 0 && optopt < 256) {
      /* A short option: name the letter, which may sit inside a cluster (-hx). */
      bad_short[0] = '-';
      bad_short[1] = (char)optopt;
      bad_short[2] = 0;
      const char *spec = strchr(shortopts, optopt);
      return refuse(bad_short, spec && spec[1] == ':' ? BAD_MISSING_VALUE : BAD_UNKNOWN);
    }
    if (strncmp(token, "--", 2))
      return refuse(token, BAD_UNKNOWN);
    size_t len = strcspn(token + 2, "=");
    const struct option *o = find_long(longopts, token + 2, len);
    if (o && o->has_arg == no_argument && strchr(token, '='))
      return refuse(token, BAD_UNWANTED_VALUE);
    return refuse(token, o && o->has_arg == required_argument ? BAD_MISSING_VALUE : BAD_UNKNOWN);
  }
  if (index < 0 || !longopts)
    return c; /* a short option */
  /* The value was the next word (not "--name=value"): the option itself is one further back. */
  if (optarg && optind >= 2 && argv[optind - 1] == optarg)
    token = argv[optind - 2];
  if (strncmp(token, "--", 2))
    return refuse(token, BAD_UNKNOWN);
  size_t len = strcspn(token + 2, "=");
  if (len != strlen(longopts[index].name) || strncmp(token + 2, longopts[index].name, len))
    return refuse(token, BAD_UNKNOWN);
  if (longindex)
    *longindex = index;
  return c;
}

int cli_args_end(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--"))
      return i;
  return argc;
}

char *cli_option_message(void) {
  const char *token = bad_token ? bad_token : "?";
  int len = (int)strcspn(token, "=");
  const char *what = bad_kind == BAD_MISSING_VALUE    ? "needs a value"
                     : bad_kind == BAD_UNWANTED_VALUE ? "takes no value"
                                                      : NULL;
  char *message = NULL;
  int n = what ? asprintf(&message, "option '%.*s' %s", len, token, what)
               : asprintf(&message, "unknown option '%.*s'", len, token);
  return n < 0 ? NULL : message;
}

int cli_option_error(const char *verb) {
  char *message = cli_option_message();
  int code = cli_usage_error(verb, "%s", message ? message : "bad option");
  free(message);
  return code;
}

int cli_verify_usage_error(const char *verb, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *message = NULL;
  int n = vasprintf(&message, fmt, ap);
  va_end(ap);
  if (cli_json_errors)
    cli_json_error(n < 0 ? "usage error" : message, "usage", CLI_EXIT_VERIFY_USAGE);
  else
    cli_error("%s (see 'cordon %s --help')", n < 0 ? "usage error" : message, verb);
  free(message);
  return CLI_EXIT_VERIFY_USAGE;
}

int cli_verify_parse(int argc, char **argv, const char *verb, const char *usage, const char *what,
                     struct cli_verify_args *out) {
  static const struct option opts[] = {{"expected-keyid", required_argument, NULL, 'k'},
                                       {"json", no_argument, NULL, 'j'},
                                       {"help", no_argument, NULL, 'h'},
                                       {0}};
  *out = (struct cli_verify_args){0};
  optind = 0;
  int c;
  while ((c = cli_getopt(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case 'k': out->kid = optarg; break;
    case 'j': out->json = true; break;
    case 'h': fputs(usage, stdout); return EXIT_OK;
    default: {
      _cleanup_free_ char *message = cli_option_message();
      return cli_verify_usage_error(verb, "%s", message ? message : "bad option");
    }
    }
  }
  if (optind != argc - 1)
    return cli_verify_usage_error(verb, "give exactly one %s", what);
  if (out->kid && strlen(out->kid) != CORDON_KEY_ID_LEN)
    return cli_verify_usage_error(verb,
                                  "--expected-keyid needs a key id (%d base64url characters, as "
                                  "'cordon key show --kid' prints it)",
                                  CORDON_KEY_ID_LEN);
  out->path = argv[optind];
  return -1;
}
