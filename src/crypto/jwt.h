/* JSON Web Tokens signed with the install key (EdDSA over Ed25519, RFC 8037), the bearer tokens
 * of `cordon serve`. Making and checking a token is pure apart from the signature itself: the
 * clock (`now`) and the revocation list are the caller's. The scopes of a token are a set of
 * bits; `admin` grants every route, `exec` what changes a sandbox, `read` the GET routes. */
#ifndef CORDON_CRYPTO_JWT_H
#define CORDON_CRYPTO_JWT_H

#include <stdint.h>

#include <cordon/keys.h>

enum jwt_scope {
  JWT_SCOPE_READ = 1u << 0,
  JWT_SCOPE_EXEC = 1u << 1,
  JWT_SCOPE_ADMIN = 1u << 2,
};

/* The longest token accepted (an Authorization header beyond it is refused unread). */
#define JWT_MAX_LENGTH 4096
/* A jti: 32 lowercase hex digits (16 random bytes). */
#define JWT_ID_HEX_LEN 32

/* "read,exec" (also space-separated) into bits; an unknown or empty name is refused. */
int jwt_scope_parse(const char *text, uint32_t *out, struct cordon_error **err);
/* The scope claim: names in a fixed order, space-separated ("read exec"); malloc'd. */
char *jwt_scope_format(uint32_t scopes);
/* Whether a token's scopes grant what a route needs (admin grants everything). */
bool jwt_scope_allows(uint32_t granted, uint32_t needed);

struct jwt_claims {
  char *sub;
  char *jti;
  uint32_t scopes;
  int64_t iat;
  int64_t exp;
};
void jwt_claims_clear(struct jwt_claims *c);

/* A signed token for claims (jti and iat as given): header {"alg":"EdDSA","kid":KID,
 * "typ":"JWT"}, payload {"exp","iat","jti","scope","sub"} in canonical JSON. */
int jwt_sign(const struct cordon_signing_key *key, const struct jwt_claims *claims, char **token,
             struct cordon_error **err);

/* Check a token against the install key's public half and id: three base64url parts, a header
 * of exactly alg EdDSA and kid `kid` (typ JWT optional), a valid signature over the first two
 * parts, a payload with sub, scope, iat, exp and jti of the right types, and exp > now. Any
 * failure is CORDON_ERR_DENIED with the reason. */
int jwt_verify(const char *token, const uint8_t public_key[CORDON_ED25519_PUBLIC_LEN],
               const char *kid, int64_t now, struct jwt_claims *out, struct cordon_error **err);

#endif
