/* JSON Web Tokens (RFC 7519) signed with EdDSA (RFC 8037): the bearer tokens of `cordon serve`.
 * Only one algorithm is ever accepted, named exactly, so `alg: none` and algorithm confusion are
 * refused by construction; the key id must be the install key's. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/cleanup.h"
#include "crypto/digest.h"
#include "crypto/jcs.h"
#include "crypto/jwt.h"

static const struct {
  const char *name;
  uint32_t bit;
} scope_names[] = {
    {"read", JWT_SCOPE_READ},
    {"exec", JWT_SCOPE_EXEC},
    {"admin", JWT_SCOPE_ADMIN},
};

#define SCOPE_COUNT (sizeof(scope_names) / sizeof(scope_names[0]))

int jwt_scope_parse(const char *text, uint32_t *out, struct cordon_error **err) {
  uint32_t bits = 0;
  const char *p = text;
  while (*p) {
    size_t n = strcspn(p, ", ");
    if (n > 0) {
      size_t i = 0;
      while (i < SCOPE_COUNT &&
             (strlen(scope_names[i].name) != n || strncmp(scope_names[i].name, p, n)))
        i++;
      if (i == SCOPE_COUNT)
        return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                                "unknown scope '%.*s' (read, exec or admin)", (int)n, p);
      bits |= scope_names[i].bit;
    }
    p += n;
    if (*p)
      p++;
  }
  if (!bits)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "no scope given (read, exec or admin)");
  *out = bits;
  return 0;
}

char *jwt_scope_format(uint32_t scopes) {
  char buf[64] = "";
  for (size_t i = 0; i < SCOPE_COUNT; i++)
    if (scopes & scope_names[i].bit) {
      if (buf[0])
        strcat(buf, " ");
      strcat(buf, scope_names[i].name);
    }
  return strdup(buf);
}

bool jwt_scope_allows(uint32_t granted, uint32_t needed) {
  if (granted & JWT_SCOPE_ADMIN)
    return true;
  if (needed & JWT_SCOPE_ADMIN)
    return false;
  /* exec implies read: a client that may change a sandbox may look at it. */
  if (granted & JWT_SCOPE_EXEC)
    granted |= JWT_SCOPE_READ;
  return (granted & needed) == needed;
}

void jwt_claims_clear(struct jwt_claims *c) {
  free(c->sub);
  free(c->jti);
  memset(c, 0, sizeof(*c));
}

static char *b64url(const void *data, size_t length) {
  char *out = malloc(crypto_base64url_length(length) + 1);
  if (out)
    crypto_base64url_encode(data, length, out);
  return out;
}

int jwt_sign(const struct cordon_signing_key *key, const struct jwt_claims *claims, char **token,
             struct cordon_error **err) {
  _cleanup_free_ char *scope = jwt_scope_format(claims->scopes);
  json_t *header =
      json_pack("{s:s, s:s, s:s}", "alg", "EdDSA", "kid", cordon_signing_key_id(key), "typ", "JWT");
  json_t *payload =
      json_pack("{s:s, s:s, s:s, s:I, s:I}", "sub", claims->sub, "jti", claims->jti, "scope",
                scope ? scope : "", "iat", (json_int_t)claims->iat, "exp", (json_int_t)claims->exp);
  _cleanup_free_ char *header_text = NULL, *payload_text = NULL;
  size_t header_length = 0, payload_length = 0;
  int r = -1;
  if (!header || !payload || !scope)
    r = cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "token");
  else if (jcs_dump(header, &header_text, &header_length, err) == 0 &&
           jcs_dump(payload, &payload_text, &payload_length, err) == 0)
    r = 0;
  json_decref(header);
  json_decref(payload);
  if (r < 0)
    return r;
  _cleanup_free_ char *h = b64url(header_text, header_length);
  _cleanup_free_ char *p = b64url(payload_text, payload_length);
  _cleanup_free_ char *signing_input = NULL;
  if (!h || !p || asprintf(&signing_input, "%s.%s", h, p) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "token");
  uint8_t signature[CORDON_ED25519_SIGNATURE_LEN];
  if (cordon_signing_key_sign(key, signing_input, strlen(signing_input), signature, err) < 0)
    return -1;
  _cleanup_free_ char *s = b64url(signature, sizeof(signature));
  if (!s || asprintf(token, "%s.%s", signing_input, s) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "token");
  return 0;
}

/* Decode one base64url part holding a JSON object. */
static json_t *decode_part(const char *text, size_t length) {
  _cleanup_free_ uint8_t *raw = malloc(length + 1);
  if (!raw)
    return NULL;
  long n = crypto_base64url_decode(text, length, raw, length);
  if (n < 0)
    return NULL;
  json_t *value = json_loadb((const char *)raw, (size_t)n, JSON_REJECT_DUPLICATES, NULL);
  if (value && !json_is_object(value)) {
    json_decref(value);
    return NULL;
  }
  return value;
}

static int check_header(const json_t *header, const char *kid, struct cordon_error **err) {
  const char *key;
  json_t *value;
  json_object_foreach((json_t *)header, key, value) {
    if (strcmp(key, "alg") && strcmp(key, "kid") && strcmp(key, "typ"))
      return cordon_error_set(err, CORDON_ERR_DENIED, 0, "token header has unknown field '%s'",
                              key);
  }
  const char *alg = json_string_value(json_object_get(header, "alg"));
  if (!alg || strcmp(alg, "EdDSA"))
    return cordon_error_set(err, CORDON_ERR_DENIED, 0, "token algorithm must be EdDSA, not %s",
                            alg ? alg : "missing");
  const char *token_kid = json_string_value(json_object_get(header, "kid"));
  if (!token_kid || strcmp(token_kid, kid))
    return cordon_error_set(err, CORDON_ERR_DENIED, 0, "token key id %s is not the install key's",
                            token_kid ? token_kid : "missing");
  json_t *typ = json_object_get(header, "typ");
  if (typ && (!json_is_string(typ) || strcmp(json_string_value(typ), "JWT")))
    return cordon_error_set(err, CORDON_ERR_DENIED, 0, "token type must be JWT");
  return 0;
}

static int read_claims(const json_t *payload, struct jwt_claims *out, struct cordon_error **err) {
  const char *sub = json_string_value(json_object_get(payload, "sub"));
  const char *jti = json_string_value(json_object_get(payload, "jti"));
  const char *scope = json_string_value(json_object_get(payload, "scope"));
  json_t *iat = json_object_get(payload, "iat"), *exp = json_object_get(payload, "exp");
  if (!sub || !jti || !scope || !json_is_integer(iat) || !json_is_integer(exp))
    return cordon_error_set(err, CORDON_ERR_DENIED, 0,
                            "token claims must have sub, jti, scope (strings), iat and exp "
                            "(integers)");
  uint32_t scopes = 0;
  if (jwt_scope_parse(scope, &scopes, NULL) < 0)
    return cordon_error_set(err, CORDON_ERR_DENIED, 0, "token scope '%s' is not valid", scope);
  out->sub = strdup(sub);
  out->jti = strdup(jti);
  if (!out->sub || !out->jti) {
    jwt_claims_clear(out);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "token");
  }
  out->scopes = scopes;
  out->iat = json_integer_value(iat);
  out->exp = json_integer_value(exp);
  return 0;
}

int jwt_verify(const char *token, const uint8_t public_key[CORDON_ED25519_PUBLIC_LEN],
               const char *kid, int64_t now, struct jwt_claims *out, struct cordon_error **err) {
  memset(out, 0, sizeof(*out));
  size_t length = strnlen(token, JWT_MAX_LENGTH + 1);
  if (length > JWT_MAX_LENGTH)
    return cordon_error_set(err, CORDON_ERR_DENIED, 0, "token longer than %d bytes",
                            JWT_MAX_LENGTH);
  const char *dot1 = strchr(token, '.');
  const char *dot2 = dot1 ? strchr(dot1 + 1, '.') : NULL;
  if (!dot1 || !dot2 || strchr(dot2 + 1, '.'))
    return cordon_error_set(err, CORDON_ERR_DENIED, 0, "token is not three dot-separated parts");
  json_t *header = decode_part(token, (size_t)(dot1 - token));
  if (!header)
    return cordon_error_set(err, CORDON_ERR_DENIED, 0, "token header is not base64url JSON");
  int r = check_header(header, kid, err);
  json_decref(header);
  if (r < 0)
    return r;
  uint8_t signature[CORDON_ED25519_SIGNATURE_LEN];
  const char *sig_text = dot2 + 1;
  if (crypto_base64url_decode(sig_text, strlen(sig_text), signature, sizeof(signature)) !=
      (long)sizeof(signature))
    return cordon_error_set(err, CORDON_ERR_DENIED, 0, "token signature is not 64 bytes");
  if (cordon_ed25519_verify(public_key, token, (size_t)(dot2 - token), signature, NULL) < 0)
    return cordon_error_set(err, CORDON_ERR_DENIED, 0, "token signature does not verify");
  json_t *payload = decode_part(dot1 + 1, (size_t)(dot2 - dot1 - 1));
  if (!payload)
    return cordon_error_set(err, CORDON_ERR_DENIED, 0, "token payload is not base64url JSON");
  r = read_claims(payload, out, err);
  json_decref(payload);
  if (r < 0)
    return r;
  if (out->exp <= now) {
    jwt_claims_clear(out);
    return cordon_error_set(err, CORDON_ERR_DENIED, 0, "token expired");
  }
  return 0;
}
