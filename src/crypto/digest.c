/* Digests and encodings (see digest.h). SHA-256 and HMAC-SHA256 on OpenSSL's low-level SHA-256
 * (below: why); the HMAC context keeps its keyed states so the hot loop of `audit verify` pays
 * no per-entry key setup. */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include "crypto/digest.h"

void (*crypto_cpu_probe_hook)(void);
#define CRYPTO_PROBE_BYTES 4096

/* Asked for before hashing anything long, and by every HMAC key: until the probe has run,
 * OpenSSL uses its generic code, which is as right but slower. */
static void cpu_probe(void) {
  if (crypto_cpu_probe_hook)
    crypto_cpu_probe_hook();
}

/* The low-level functions, not SHA256(): in OpenSSL 3 that one goes through EVP, whose first
 * fetch costs about 3 ms of CPU (see struct crypto_hmac below). */
int crypto_sha256(const void *data, size_t length, uint8_t out[CRYPTO_SHA256_LEN],
                  struct cordon_error **err) {
  if (length >= CRYPTO_PROBE_BYTES)
    cpu_probe();
  SHA256_CTX ctx;
  if (!SHA256_Init(&ctx) || !SHA256_Update(&ctx, data, length) || !SHA256_Final(out, &ctx))
    return cordon_error_set(err, CORDON_ERR_SYSTEM, 0, "SHA-256 failed");
  return 0;
}

int crypto_sha256_hex(const void *data, size_t length, char out[CRYPTO_SHA256_HEX_LEN + 1],
                      struct cordon_error **err) {
  uint8_t raw[CRYPTO_SHA256_LEN];
  if (crypto_sha256(data, length, raw, err) < 0)
    return -1;
  crypto_hex_encode(raw, sizeof(raw), out);
  return 0;
}

static const char hex_digits[] = "0123456789abcdef";

void crypto_hex_encode(const uint8_t *data, size_t length, char *out) {
  for (size_t i = 0; i < length; i++) {
    out[2 * i] = hex_digits[data[i] >> 4];
    out[2 * i + 1] = hex_digits[data[i] & 15];
  }
  out[2 * length] = 0;
}

/* Digit values of lowercase hex, -1 otherwise: a table, since data-dependent branches on
 * random digits mispredict half the time (this is on the `audit verify` hot path). */
static const signed char hex_table[256] = {
    ['0'] = 1, ['1'] = 2,  ['2'] = 3,  ['3'] = 4,  ['4'] = 5,  ['5'] = 6,  ['6'] = 7,  ['7'] = 8,
    ['8'] = 9, ['9'] = 10, ['a'] = 11, ['b'] = 12, ['c'] = 13, ['d'] = 14, ['e'] = 15, ['f'] = 16,
};

static int hex_value(char c) {
  return hex_table[(unsigned char)c] - 1; /* the table stores value + 1 so 0 means invalid */
}

int crypto_hex_decode(const char *hex, size_t hex_length, uint8_t *out, size_t length) {
  if (hex_length != 2 * length)
    return -1;
  for (size_t i = 0; i < length; i++) {
    int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);
    if (hi < 0 || lo < 0)
      return -1;
    out[i] = (uint8_t)(hi << 4 | lo);
  }
  return 0;
}

bool crypto_is_sha256_hex(const char *s) {
  if (!s || strnlen(s, CRYPTO_SHA256_HEX_LEN + 1) != CRYPTO_SHA256_HEX_LEN)
    return false;
  int ok = 1;
  for (size_t i = 0; i < CRYPTO_SHA256_HEX_LEN; i++)
    ok &= hex_table[(unsigned char)s[i]] != 0;
  return ok;
}

static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

size_t crypto_base64url_length(size_t length) {
  return length / 3 * 4 + (length % 3 ? length % 3 + 1 : 0);
}

void crypto_base64url_encode(const uint8_t *data, size_t length, char *out) {
  size_t o = 0, i = 0;
  for (; i + 3 <= length; i += 3) {
    uint32_t v = (uint32_t)data[i] << 16 | (uint32_t)data[i + 1] << 8 | data[i + 2];
    out[o++] = b64url[v >> 18];
    out[o++] = b64url[(v >> 12) & 63];
    out[o++] = b64url[(v >> 6) & 63];
    out[o++] = b64url[v & 63];
  }
  if (length - i == 1) {
    uint32_t v = (uint32_t)data[i] << 16;
    out[o++] = b64url[v >> 18];
    out[o++] = b64url[(v >> 12) & 63];
  } else if (length - i == 2) {
    uint32_t v = (uint32_t)data[i] << 16 | (uint32_t)data[i + 1] << 8;
    out[o++] = b64url[v >> 18];
    out[o++] = b64url[(v >> 12) & 63];
    out[o++] = b64url[(v >> 6) & 63];
  }
  out[o] = 0;
}

static int b64url_value(char c) {
  if (c >= 'A' && c <= 'Z')
    return c - 'A';
  if (c >= 'a' && c <= 'z')
    return c - 'a' + 26;
  if (c >= '0' && c <= '9')
    return c - '0' + 52;
  if (c == '-')
    return 62;
  if (c == '_')
    return 63;
  return -1;
}

long crypto_base64url_decode(const char *text, size_t text_length, uint8_t *out,
                             size_t out_capacity) {
  if (text_length % 4 == 1)
    return -1;
  size_t need = text_length / 4 * 3 + (text_length % 4 ? text_length % 4 - 1 : 0);
  if (need > out_capacity)
    return -1;
  size_t o = 0;
  uint32_t acc = 0;
  unsigned bits = 0;
  for (size_t i = 0; i < text_length; i++) {
    int v = b64url_value(text[i]);
    if (v < 0)
      return -1;
    acc = acc << 6 | (uint32_t)v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[o++] = (uint8_t)(acc >> bits);
      acc &= (1u << bits) - 1;
    }
  }
  /* Leftover bits must be zero: otherwise two texts would decode to the same bytes. */
  if (acc != 0)
    return -1;
  return (long)o;
}

bool crypto_equal(const void *a, const void *b, size_t length) {
  const volatile uint8_t *x = a, *y = b;
  uint8_t diff = 0;
  for (size_t i = 0; i < length; i++)
    diff |= x[i] ^ y[i];
  return diff == 0;
}

/* HMAC-SHA256 (RFC 2104) on OpenSSL's low-level SHA-256: the key's inner and outer blocks are
 * hashed once, at crypto_hmac_new, and each message starts from copies of those two states.
 * Not EVP_MAC: its first fetch populates OpenSSL's name map with every algorithm (about 3 ms
 * of CPU), which every `cordon session exec` would pay for one handshake; the low-level
 * functions are deprecated in OpenSSL 3 but still provided, and compute the same digest
 * (tests/unit/test-keys.c checks RFC 4231's vectors and EVP_MAC's results). */
struct crypto_hmac {
  SHA256_CTX inner, outer;
};

void crypto_hmac_free(struct crypto_hmac *h) {
  if (!h)
    return;
  OPENSSL_cleanse(h, sizeof(*h));
  free(h);
}

int crypto_hmac_new(const uint8_t *key, size_t key_length, struct crypto_hmac **out,
                    struct cordon_error **err) {
  cpu_probe(); /* a key is made to hash many messages (audit verify) */
  struct crypto_hmac *h = calloc(1, sizeof(*h));
  if (!h)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "HMAC");
  uint8_t block[SHA256_CBLOCK] = {0}, pad[SHA256_CBLOCK];
  bool ok = true;
  if (key_length > sizeof(block)) /* a long key is replaced by its digest */
    ok = SHA256_Init(&h->inner) && SHA256_Update(&h->inner, key, key_length) &&
         SHA256_Final(block, &h->inner);
  else if (key_length)
    memcpy(block, key, key_length);
  for (size_t i = 0; i < sizeof(block); i++)
    pad[i] = block[i] ^ 0x36;
  ok = ok && SHA256_Init(&h->inner) && SHA256_Update(&h->inner, pad, sizeof(pad));
  for (size_t i = 0; i < sizeof(block); i++)
    pad[i] = block[i] ^ 0x5c;
  ok = ok && SHA256_Init(&h->outer) && SHA256_Update(&h->outer, pad, sizeof(pad));
  OPENSSL_cleanse(block, sizeof(block));
  OPENSSL_cleanse(pad, sizeof(pad));
  if (!ok) {
    crypto_hmac_free(h);
    return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0, "OpenSSL SHA-256 unavailable");
  }
  *out = h;
  return 0;
}

static bool keyed_half(const SHA256_CTX *c) {
  return c->Nl == 8 * SHA256_CBLOCK && c->Nh == 0 && c->num == 0 &&
         c->md_len == SHA256_DIGEST_LENGTH;
}

size_t crypto_hmac_state_length(void) {
  return sizeof(struct crypto_hmac);
}

void crypto_hmac_state(const struct crypto_hmac *h, uint8_t *out) {
  memcpy(out, h, sizeof(*h));
}

int crypto_hmac_from_state(const uint8_t *state, size_t length, struct crypto_hmac **out,
                           struct cordon_error **err) {
  if (length != sizeof(struct crypto_hmac))
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "an HMAC state of %zu bytes, not %zu",
                            length, sizeof(struct crypto_hmac));
  struct crypto_hmac *h = malloc(sizeof(*h));
  if (!h)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "HMAC");
  memcpy(h, state, sizeof(*h));
  /* Only a keyed state, as crypto_hmac_new leaves it: each half has hashed its one padded
   * block and holds nothing pending. Anything else (a buffer offset past the block, above all)
   * would send SHA256_Update's copy out of bounds. */
  if (!keyed_half(&h->inner) || !keyed_half(&h->outer)) {
    crypto_hmac_free(h);
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "not the state of a keyed HMAC");
  }
  *out = h;
  return 0;
}

int crypto_hmac_parts(struct crypto_hmac *h, const struct crypto_part *parts, size_t count,
                      uint8_t out[CRYPTO_SHA256_LEN], struct cordon_error **err) {
  SHA256_CTX ctx = h->inner;
  uint8_t inner[CRYPTO_SHA256_LEN];
  bool ok = true;
  for (size_t i = 0; i < count && ok; i++)
    ok = !parts[i].length || SHA256_Update(&ctx, parts[i].data, parts[i].length);
  ok = ok && SHA256_Final(inner, &ctx);
  ctx = h->outer;
  ok = ok && SHA256_Update(&ctx, inner, sizeof(inner)) && SHA256_Final(out, &ctx);
  OPENSSL_cleanse(&ctx, sizeof(ctx));
  return ok ? 0 : cordon_error_set(err, CORDON_ERR_SYSTEM, 0, "HMAC-SHA256 failed");
}

int crypto_hmac_2(struct crypto_hmac *h, const void *a, size_t a_length, const void *b,
                  size_t b_length, uint8_t out[CRYPTO_SHA256_LEN], struct cordon_error **err) {
  const struct crypto_part parts[] = {{a, a_length}, {b, b_length}};
  return crypto_hmac_parts(h, parts, 2, out, err);
}
