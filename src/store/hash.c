/* SHA-256 helpers of the store. OpenSSL 3 looks an algorithm up on every EVP_sha256() init;
 * fetching it once matters when a snapshot hashes tens of thousands of small files. */
#include <openssl/evp.h>
#include <pthread.h>
#include <string.h>

#include "store/hash.h"

static EVP_MD *fetched_sha256;
static pthread_once_t fetch_once = PTHREAD_ONCE_INIT;

static void fetch_sha256(void) {
  fetched_sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
}

static const EVP_MD *sha256_md(void) {
  pthread_once(&fetch_once, fetch_sha256);
  return fetched_sha256 ? fetched_sha256 : EVP_sha256();
}

int cas_hasher_init(struct cas_hasher *h) {
  if (!h->ctx)
    h->ctx = EVP_MD_CTX_new();
  if (!h->ctx || EVP_DigestInit_ex(h->ctx, sha256_md(), NULL) != 1)
    return -1;
  return 0;
}

void cas_hasher_update(struct cas_hasher *h, const void *data, size_t length) {
  if (length > 0)
    EVP_DigestUpdate(h->ctx, data, length);
}

void cas_hasher_update_zeros(struct cas_hasher *h, uint64_t length) {
  /* Small enough to stay in the cache while SHA-256 runs over it again and again. */
  static const unsigned char zeros[64 << 10];
  while (length > 0) {
    size_t n = length < sizeof(zeros) ? (size_t)length : sizeof(zeros);
    EVP_DigestUpdate(h->ctx, zeros, n);
    length -= n;
  }
}

void cas_hasher_final(struct cas_hasher *h, unsigned char out[CAS_DIGEST_LEN]) {
  unsigned int n = 0;
  EVP_DigestFinal_ex(h->ctx, out, &n);
}

void cas_hasher_free(struct cas_hasher *h) {
  EVP_MD_CTX_free(h->ctx);
  h->ctx = NULL;
}

int cas_sha256(const void *data, size_t length, unsigned char out[CAS_DIGEST_LEN]) {
  unsigned int n = 0;
  return EVP_Digest(data, length, out, &n, sha256_md(), NULL) == 1 ? 0 : -1;
}

void cas_hex(const unsigned char digest[CAS_DIGEST_LEN], char out[CAS_HEX_LEN + 1]) {
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < CAS_DIGEST_LEN; i++) {
    out[2 * i] = digits[digest[i] >> 4];
    out[2 * i + 1] = digits[digest[i] & 15];
  }
  out[CAS_HEX_LEN] = 0;
}

static int nibble(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  return -1;
}

int cas_unhex_n(const char *hex, unsigned char digest[CAS_DIGEST_LEN]) {
  for (size_t i = 0; i < CAS_DIGEST_LEN; i++) {
    int hi = nibble(hex[2 * i]);
    int lo = hi < 0 ? -1 : nibble(hex[2 * i + 1]);
    if (lo < 0)
      return -1;
    digest[i] = (unsigned char)(hi << 4 | lo);
  }
  return 0;
}

int cas_unhex(const char *hex, unsigned char digest[CAS_DIGEST_LEN]) {
  if (!hex || strnlen(hex, CAS_HEX_LEN + 1) != CAS_HEX_LEN)
    return -1;
  return cas_unhex_n(hex, digest);
}

bool cas_hex_valid(const char *hex) {
  unsigned char d[CAS_DIGEST_LEN];
  return cas_unhex(hex, d) == 0;
}
