/* `cordon token create|revoke`: bearer tokens for `cordon serve` over TCP, JWTs signed with
 * the install key (crypto/jwt.h), and the project's revocation list (protocol/tokens.h). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "cli/cli.h"
#include "crypto/jwt.h"
#include "protocol/tokens.h"

static const char token_usage[] =
    "usage: cordon token create --scope SCOPE[,SCOPE..] [--ttl DURATION] [--sub NAME] [--json]\n"
    "       cordon token revoke JTI\n"
    "\n"
    "Bearer tokens for `cordon serve --listen`: JWTs signed with the install key (EdDSA,\n"
    "RFC 8037; header {\"alg\":\"EdDSA\",\"kid\":KEY_ID,\"typ\":\"JWT\"}), with claims sub,\n"
    "scope, iat, exp and jti.\n"
    "\n"
    "  create   print a token. --scope: read (GET routes), exec (also what changes a\n"
    "           sandbox: create, exec, write, destroy, ...), admin (everything, host paths\n"
    "           too); --ttl: how long it is valid, N with s, m, h or d (default 1h, at most\n"
    "           365d); --sub: who it is for (default 'cordon'); --json: {token, jti, sub,\n"
    "           scope, iat, exp}\n"
    "  revoke   add JTI to the project's revocation list (.cordon/revoked-tokens.json):\n"
    "           the server refuses the token from its next request on\n"
    "\n"
    "Exit codes: 0 ok, 1 failed, 2 usage.\n";

#define TOKEN_MAX_TTL (365LL * 24 * 3600)

/* "90s", "15m", "1h", "7d"; a bare number is seconds. */
static int parse_ttl(const char *text, long long *out) {
  char *end = NULL;
  long long n = strtoll(text, &end, 10);
  if (end == text || n <= 0)
    return -1;
  long long unit = 1;
  if (*end == 'm')
    unit = 60;
  else if (*end == 'h')
    unit = 3600;
  else if (*end == 'd')
    unit = 86400;
  else if (*end && *end != 's')
    return -1;
  if (*end && end[1])
    return -1;
  if (n > TOKEN_MAX_TTL / unit)
    return -1;
  *out = n * unit;
  return 0;
}

static int token_create(int argc, char **argv) {
  enum { OPT_SCOPE = 1, OPT_TTL, OPT_SUB, OPT_JSON };
  static const struct option opts[] = {{"scope", required_argument, NULL, OPT_SCOPE},
                                       {"ttl", required_argument, NULL, OPT_TTL},
                                       {"sub", required_argument, NULL, OPT_SUB},
                                       {"json", no_argument, NULL, OPT_JSON},
                                       {"help", no_argument, NULL, 'h'},
                                       {0}};
  const char *scope = NULL, *sub = "cordon";
  long long ttl = 3600;
  bool json = false;
  int c;
  optind = 0;
  while ((c = cli_getopt(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case OPT_SCOPE: scope = optarg; break;
    case OPT_TTL:
      if (parse_ttl(optarg, &ttl) < 0)
        return cli_usage_error("token create",
                               "--ttl wants N followed by s, m, h or d, at most 365d, not '%s'",
                               optarg);
      break;
    case OPT_SUB: sub = optarg; break;
    case OPT_JSON: json = true; break;
    case 'h': fputs(token_usage, stdout); return EXIT_OK;
    default: return cli_option_error("token create");
    }
  }
  if (optind < argc)
    return cli_usage_error("token create", "unexpected argument '%s'", argv[optind]);
  if (!scope)
    return cli_usage_error("token create", "--scope is required (read, exec, admin)");
  struct cordon_error *err = NULL;
  struct jwt_claims claims = {.sub = (char *)sub};
  if (jwt_scope_parse(scope, &claims.scopes, &err) < 0) {
    cli_error("%s", err->message);
    cordon_error_free(err);
    return EXIT_USAGE;
  }
  _cleanup_free_ char *jti = NULL, *token = NULL, *scope_text = jwt_scope_format(claims.scopes);
  struct cordon_signing_key *key = NULL;
  if (cli_ensure_install_key(&err) < 0 || cordon_signing_key_load(NULL, &key, &err) < 0 ||
      fs_random_hex(JWT_ID_HEX_LEN / 2, &jti, &err) < 0) {
    cordon_signing_key_free(key);
    return cli_fail(err);
  }
  claims.jti = jti;
  claims.iat = (int64_t)time(NULL);
  claims.exp = claims.iat + ttl;
  int r = jwt_sign(key, &claims, &token, &err);
  cordon_signing_key_free(key);
  if (r < 0)
    return cli_fail(err);
  if (json)
    cli_print_json(json_pack("{s:s, s:s, s:s, s:s?, s:I, s:I}", "token", token, "jti", jti, "sub",
                             sub, "scope", scope_text, "iat", (json_int_t)claims.iat, "exp",
                             (json_int_t)claims.exp));
  else
    printf("%s\n", token);
  return EXIT_OK;
}

static int token_revoke(int argc, char **argv) {
  static const struct option opts[] = {{"help", no_argument, NULL, 'h'}, {0}};
  int c;
  optind = 0;
  while ((c = cli_getopt(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case 'h': fputs(token_usage, stdout); return EXIT_OK;
    default: return cli_option_error("token revoke");
    }
  }
  if (argc - optind != 1)
    return cli_usage_error("token revoke", "one JTI expected");
  const char *jti = argv[optind];
  if (!tokens_jti_valid(jti))
    return cli_usage_error("token revoke", "'%s' is not a token id", jti);
  struct cordon_error *err = NULL;
  struct cordon_context *ctx = NULL;
  bool added = false;
  if (cordon_context_open(NULL, &ctx, &err) < 0 ||
      fs_mkdir_p(cordon_context_state_dir(ctx), 0755, &err) < 0 ||
      tokens_revoke(cordon_context_state_dir(ctx), jti, &added, &err) < 0) {
    cordon_context_free(ctx);
    return cli_fail(err);
  }
  cordon_context_free(ctx);
  printf("%s %s\n", added ? "revoked" : "already revoked:", jti);
  return EXIT_OK;
}

int cmd_token(int argc, char **argv) {
  static const struct cli_subverb subs[] = {{"create", token_create}, {"revoke", token_revoke}};
  return CLI_DISPATCH("token", token_usage, subs, argc, argv);
}
