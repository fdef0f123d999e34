/* cordon — the install identity: an Ed25519 signing key and the audit chain's HMAC key.
 *
 * Secrets live outside every workspace, in the key directory: $CORDON_KEY_DIR, else
 * $XDG_STATE_HOME/cordon/keys, else ~/.local/state/cordon/keys. The directory is 0700, the files
 * 0600, created with O_EXCL (written to a private temp file, then linked into place, so a
 * reader never sees half a key and a key is never overwritten). A key file or the directory
 * with group or other permission bits or owned by another user, and a key file that is a
 * symlink or not a regular file, are refused.
 *
 * Files: ed25519.key (PKCS#8 PEM, readable by `openssl pkey`), audit-hmac.key (32 raw bytes).
 * The key id is the RFC 7638 JWK thumbprint: base64url(SHA-256 of the canonical
 * {"crv":"Ed25519","kty":"OKP","x":...}). Signatures are Ed25519 over canonical bytes. */
#ifndef CORDON_KEYS_H
#define CORDON_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cordon/error.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CORDON_ED25519_PUBLIC_LEN 32
#define CORDON_ED25519_SIGNATURE_LEN 64
#define CORDON_KEY_ID_LEN 43 /* base64url of 32 bytes, no padding */
#define CORDON_AUDIT_KEY_LEN 32

#define CORDON_SIGNING_KEY_FILE "ed25519.key"
#define CORDON_AUDIT_KEY_FILE "audit-hmac.key"

/* The key directory path (malloc'd), from the environment as described above. */
CORDON_API int cordon_key_dir(char **out, struct cordon_error **err);

struct cordon_key_init_result {
  bool signing_created; /* false: a valid key was already there */
  bool audit_created;
};

/* Create the directory (0700) and whichever keys are missing; existing keys are checked and
 * kept. dir NULL: cordon_key_dir(). */
CORDON_API int cordon_key_init(const char *dir, struct cordon_key_init_result *result,
                               struct cordon_error **err);

struct cordon_signing_key;

/* Load the signing key from dir (NULL: cordon_key_dir()). A missing key is
 * CORDON_ERR_NOT_FOUND; unsafe permissions are CORDON_ERR_DENIED. */
CORDON_API int cordon_signing_key_load(const char *dir, struct cordon_signing_key **out,
                                       struct cordon_error **err);
CORDON_API void cordon_signing_key_free(struct cordon_signing_key *key);
/* For _cleanup_(): frees *key (NULL is fine) and sets it to NULL. */
CORDON_API void cordon_signing_key_freep(struct cordon_signing_key **key);
/* The RFC 7638 thumbprint, CORDON_KEY_ID_LEN characters. */
CORDON_API const char *cordon_signing_key_id(const struct cordon_signing_key *key);
/* CORDON_ED25519_PUBLIC_LEN bytes. */
CORDON_API const uint8_t *cordon_signing_key_public(const struct cordon_signing_key *key);
/* Canonical JSON of the public JWK: alg EdDSA, crv Ed25519, kid, kty OKP, use sig, x. */
CORDON_API int cordon_signing_key_jwk(const struct cordon_signing_key *key, char **json,
                                      struct cordon_error **err);
/* Canonical JSON of the JWKS document {"keys":[JWK]}. */
CORDON_API int cordon_signing_key_jwks(const struct cordon_signing_key *key, char **json,
                                       struct cordon_error **err);
CORDON_API int cordon_signing_key_sign(const struct cordon_signing_key *key, const void *data,
                                       size_t length,
                                       uint8_t signature[CORDON_ED25519_SIGNATURE_LEN],
                                       struct cordon_error **err);

/* 0 when signature is a valid Ed25519 signature of data by public_key; otherwise < 0 with a
 * CORDON_ERR_INTEGRITY error. */
CORDON_API int cordon_ed25519_verify(const uint8_t public_key[CORDON_ED25519_PUBLIC_LEN],
                                     const void *data, size_t length,
                                     const uint8_t signature[CORDON_ED25519_SIGNATURE_LEN],
                                     struct cordon_error **err);

/* RFC 7638 thumbprint of an Ed25519 public key into out (CORDON_KEY_ID_LEN + 1 bytes). */
CORDON_API int cordon_jwk_thumbprint(const uint8_t public_key[CORDON_ED25519_PUBLIC_LEN],
                                     char out[CORDON_KEY_ID_LEN + 1], struct cordon_error **err);

/* Load the audit HMAC key; create (and the directory) first when create is true and it is
 * missing. dir NULL: cordon_key_dir(). */
CORDON_API int cordon_audit_key_load(const char *dir, bool create,
                                     uint8_t key[CORDON_AUDIT_KEY_LEN], struct cordon_error **err);

#ifdef __cplusplus
}
#endif
#endif
