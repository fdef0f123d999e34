/* `cordon key`: the install identity (an Ed25519 signing key and the audit HMAC key), kept
 * outside every workspace in the key directory. */
#include <getopt.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include <cordon/keys.h>

#include "base/cleanup.h"
#include "cli/cli.h"

int cmd_key(int argc, char **argv);

static const char key_usage[] =
    "usage: cordon key init|show|jwks [--json]\n"
    "\n"
    "The install identity: an Ed25519 signing key (for receipts) and the audit chain's HMAC\n"
    "key, kept outside every workspace in the key directory: $CORDON_KEY_DIR, else\n"
    "$XDG_STATE_HOME/cordon/keys, else ~/.local/state/cordon/keys. The directory is 0700 and\n"
    "the files 0600; a key file or directory with group or other access is refused. init\n"
    "accepts an existing empty 0700 directory. 'cordon race' creates the key on first use.\n"
    "\n"
    "  init [--json]   create whichever keys are missing (existing keys are kept, never\n"
    "                  overwritten) and print the key id\n"
    "  show [--json]   print the key id (RFC 7638 JWK thumbprint) and the public JWK\n"
    "  show --kid      print the bare key id, one line, nothing else\n"
    "  jwks            print the JWKS document {\"keys\":[JWK]} (canonical JSON)\n"
    "\n"
    "Exit codes: 0 ok, 1 failed (unreadable or malformed key), 2 usage, 3 no key yet\n"
    "(run 'cordon key init'), 4 refused (unsafe permissions, symlink, other owner).\n";

/* Parse [--json] [--help] for a subverb; returns -1 after printing help, > 0 an exit code. */
static int parse_flags(const char *verb, int argc, char **argv, bool allow_json, bool *json,
                       bool *kid_only) {
  static const struct option opts[] = {{"json", no_argument, NULL, 'j'},
                                       {"help", no_argument, NULL, 'h'},
                                       {"kid", no_argument, NULL, 'k'},
                                       {0}};
  *json = false;
  optind = 0;
  int c;
  while ((c = cli_getopt(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case 'j':
      if (!allow_json)
        return cli_usage_error(verb, "--json is not an option here: the output is JSON");
      *json = true;
      break;
    case 'h': fputs(key_usage, stdout); return -1;
    case 'k': /* only `key show` has --kid (kid_only NULL elsewhere) */
      if (!kid_only)
        return cli_usage_error(verb, "unknown option '%s'", argv[optind - 1]);
      *kid_only = true;
      break;
    default: return cli_option_error(verb);
    }
  }
  if (optind < argc)
    return cli_usage_error(verb, "unexpected argument '%s'", argv[optind]);
  return 0;
}

int cli_ensure_install_key(struct cordon_error **err) {
  _cleanup_free_ char *dir = NULL;
  if (cordon_key_dir(&dir, err) < 0)
    return -1;
  struct cordon_error *local = NULL;
  struct cordon_signing_key *key = NULL;
  if (cordon_signing_key_load(dir, &key, &local) == 0) {
    cordon_signing_key_free(key);
    return 0;
  }
  /* Only a key that does not exist yet is made here; an unsafe or broken one stays an error. */
  if (local->kind != CORDON_ERR_NOT_FOUND) {
    *err = local;
    return -1;
  }
  cordon_error_free(local);
  struct cordon_key_init_result res;
  if (cordon_key_init(dir, &res, err) < 0 || cordon_signing_key_load(dir, &key, err) < 0)
    return -1;
  if (res.signing_created)
    fprintf(stderr, "%s: created the install key %s in %s\n", cli_program,
            cordon_signing_key_id(key), dir);
  cordon_signing_key_free(key);
  return 0;
}

static int key_init(int argc, char **argv) {
  bool json;
  int r = parse_flags("key init", argc, argv, true, &json, NULL);
  if (r)
    return r < 0 ? EXIT_OK : r;
  struct cordon_error *err = NULL;
  char *dir = NULL;
  struct cordon_key_init_result res;
  struct cordon_signing_key *key = NULL;
  if (cordon_key_dir(&dir, &err) < 0 || cordon_key_init(dir, &res, &err) < 0 ||
      cordon_signing_key_load(dir, &key, &err) < 0) {
    free(dir);
    return cli_fail(err);
  }
  if (json)
    cli_print_json(json_pack("{s:s, s:s, s:b, s:b}", "dir", dir, "kid", cordon_signing_key_id(key),
                             "signing_key_created", res.signing_created, "audit_key_created",
                             res.audit_created));
  else
    printf("%s signing key %s in %s%s\n", res.signing_created ? "created" : "kept",
           cordon_signing_key_id(key), dir, res.audit_created ? " (and a new audit key)" : "");
  cordon_signing_key_free(key);
  free(dir);
  return EXIT_OK;
}

static int key_show(int argc, char **argv) {
  bool json, kid_only = false;
  int r = parse_flags("key show", argc, argv, true, &json, &kid_only);
  if (r)
    return r < 0 ? EXIT_OK : r;
  struct cordon_error *err = NULL;
  char *dir = NULL, *jwk = NULL;
  struct cordon_signing_key *key = NULL;
  if (cordon_key_dir(&dir, &err) < 0 || cordon_signing_key_load(dir, &key, &err) < 0 ||
      cordon_signing_key_jwk(key, &jwk, &err) < 0) {
    cordon_signing_key_free(key);
    free(dir);
    return cli_fail(err);
  }
  if (kid_only) /* for scripts: KID=$(cordon key show --kid) */
    printf("%s\n", cordon_signing_key_id(key));
  else if (json)
    cli_print_json(json_pack("{s:s, s:s, s:o}", "dir", dir, "kid", cordon_signing_key_id(key),
                             "jwk", json_loads(jwk, 0, NULL)));
  else
    printf("kid: %s\njwk: %s\ndir: %s\n", cordon_signing_key_id(key), jwk, dir);
  free(jwk);
  cordon_signing_key_free(key);
  free(dir);
  return EXIT_OK;
}

static int key_jwks(int argc, char **argv) {
  bool json;
  int r = parse_flags("key jwks", argc, argv, false, &json, NULL);
  if (r)
    return r < 0 ? EXIT_OK : r;
  struct cordon_error *err = NULL;
  char *jwks = NULL;
  struct cordon_signing_key *key = NULL;
  if (cordon_signing_key_load(NULL, &key, &err) < 0 ||
      cordon_signing_key_jwks(key, &jwks, &err) < 0) {
    cordon_signing_key_free(key);
    return cli_fail(err);
  }
  printf("%s\n", jwks);
  free(jwks);
  cordon_signing_key_free(key);
  return EXIT_OK;
}

int cmd_key(int argc, char **argv) {
  static const struct cli_subverb subs[] = {
      {"init", key_init}, {"show", key_show}, {"jwks", key_jwks}};
  return CLI_DISPATCH("key", key_usage, subs, argc, argv);
}
