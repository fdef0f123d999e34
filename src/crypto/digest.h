/* Digests and encodings: SHA-256, HMAC-SHA256 (with a reusable keyed context for hot loops),
 * lowercase hex, strict base64url (RFC 4648 §5, no padding) and constant-time comparison.
 * Everything here is pure apart from OpenSSL's allocations. */
#ifndef CORDON_CRYPTO_DIGEST_H
#define CORDON_CRYPTO_DIGEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cordon/error.h>

#define CRYPTO_SHA256_LEN 32
#define CRYPTO_SHA256_HEX_LEN 64

int crypto_sha256(const void *data, size_t length, uint8_t out[CRYPTO_SHA256_LEN],
                  struct cordon_error **err);
/* OpenSSL's CPU probe, when the program deferred it from start-up (the `cordon` executable,
 * linked with a static libcrypto: src/cli/main.c sets this); NULL where it ran as libcrypto
 * loaded. Called before any long hash and by every HMAC key; OpenSSL's own initialisation
 * (every EVP use) runs the probe too. It must be idempotent. */
extern void (*crypto_cpu_probe_hook)(void);

/* out holds 65 bytes: 64 lowercase hex digits and a NUL. */
int crypto_sha256_hex(const void *data, size_t length, char out[CRYPTO_SHA256_HEX_LEN + 1],
                      struct cordon_error **err);

/* out holds 2*length+1 bytes. */
void crypto_hex_encode(const uint8_t *data, size_t length, char *out);
/* Decode exactly 2*length lowercase hex digits; anything else (uppercase too) is refused. */
int crypto_hex_decode(const char *hex, size_t hex_length, uint8_t *out, size_t length);
/* True when s is exactly 64 lowercase hex digits. */
bool crypto_is_sha256_hex(const char *s);

/* base64url without padding. encode: out holds crypto_base64url_length(length)+1 bytes. */
size_t crypto_base64url_length(size_t length);
void crypto_base64url_encode(const uint8_t *data, size_t length, char *out);
/* Strict: only the url alphabet, no padding, no whitespace, unused trailing bits must be zero
 * (so every byte string has exactly one encoding). Returns the decoded length or -1. */
long crypto_base64url_decode(const char *text, size_t text_length, uint8_t *out,
                             size_t out_capacity);

bool crypto_equal(const void *a, const void *b, size_t length);

/* HMAC-SHA256 with a key set once and reused for many messages. */
struct crypto_hmac;
int crypto_hmac_new(const uint8_t *key, size_t key_length, struct crypto_hmac **out,
                    struct cordon_error **err);
void crypto_hmac_free(struct crypto_hmac *h);
/* A keyed context's state as bytes, for a fresh image of this same program (the ns holder's
 * spawner, exec'd anew): crypto_hmac_state_length() bytes, as secret as the key itself. */
size_t crypto_hmac_state_length(void);
void crypto_hmac_state(const struct crypto_hmac *h, uint8_t *out);
int crypto_hmac_from_state(const uint8_t *state, size_t length, struct crypto_hmac **out,
                           struct cordon_error **err);
/* HMAC over the concatenation of parts (any may be empty). */
struct crypto_part {
  const void *data;
  size_t length;
};
int crypto_hmac_parts(struct crypto_hmac *h, const struct crypto_part *parts, size_t count,
                      uint8_t out[CRYPTO_SHA256_LEN], struct cordon_error **err);
/* HMAC over the concatenation of two parts (either may be empty). */
int crypto_hmac_2(struct crypto_hmac *h, const void *a, size_t a_length, const void *b,
                  size_t b_length, uint8_t out[CRYPTO_SHA256_LEN], struct cordon_error **err);

#endif
