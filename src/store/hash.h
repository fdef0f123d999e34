/* SHA-256 for the store: a reusable streaming hasher for hot loops (one EVP context per thread,
 * the algorithm fetched once per process) and strict lowercase hex. */
#ifndef CORDON_STORE_HASH_H
#define CORDON_STORE_HASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CAS_DIGEST_LEN 32
#define CAS_HEX_LEN 64

struct cas_hasher {
  void *ctx; /* EVP_MD_CTX */
};

/* Start a new digest; allocates the context on first use. Returns -1 when out of memory. */
int cas_hasher_init(struct cas_hasher *h);
void cas_hasher_update(struct cas_hasher *h, const void *data, size_t length);
/* Feed length zero bytes (a sparse file's hole) without reading or allocating them. */
void cas_hasher_update_zeros(struct cas_hasher *h, uint64_t length);
void cas_hasher_final(struct cas_hasher *h, unsigned char out[CAS_DIGEST_LEN]);
void cas_hasher_free(struct cas_hasher *h);

/* One-shot digest. Returns -1 when out of memory. */
int cas_sha256(const void *data, size_t length, unsigned char out[CAS_DIGEST_LEN]);

/* out holds CAS_HEX_LEN + 1 bytes. */
void cas_hex(const unsigned char digest[CAS_DIGEST_LEN], char out[CAS_HEX_LEN + 1]);
/* Exactly 64 lowercase hex digits followed by NUL; anything else returns -1. */
int cas_unhex(const char *hex, unsigned char digest[CAS_DIGEST_LEN]);
/* Same, for exactly 64 bytes that need not be NUL-terminated. */
int cas_unhex_n(const char *hex, unsigned char digest[CAS_DIGEST_LEN]);
bool cas_hex_valid(const char *hex);

#endif
