/* Internal side of the key store (include/cordon/keys.h): JWK building and parsing as jansson
 * values, and a signing key made from a known seed (tests, known-answer vectors). */
#ifndef CORDON_CRYPTO_KEYS_H
#define CORDON_CRYPTO_KEYS_H

#include <jansson.h>

#include <cordon/keys.h>

/* {"alg":"EdDSA","crv":"Ed25519","kid":...,"kty":"OKP","use":"sig","x":...} */
json_t *keys_public_jwk(const uint8_t public_key[CORDON_ED25519_PUBLIC_LEN]);

/* Read an Ed25519 public JWK strictly: kty OKP, crv Ed25519, x of exactly 32 bytes; optional
 * alg (EdDSA), use (sig) and kid (must equal the thumbprint); nothing else. */
int keys_parse_public_jwk(const json_t *jwk, uint8_t public_key[CORDON_ED25519_PUBLIC_LEN],
                          char kid[CORDON_KEY_ID_LEN + 1], struct cordon_error **err);

int keys_signing_key_from_seed(const uint8_t seed[32], struct cordon_signing_key **out,
                               struct cordon_error **err);

/* Open (and with create, make) the key directory; checks owner and mode. */
int keys_open_dir(const char *dir, bool create, struct cordon_error **err);

#endif
