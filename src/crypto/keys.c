/* The key store: where the install identity lives, how its files are created and checked, and
 * Ed25519 signing, verification and JWK thumbprints. Key material only ever sits in memory
 * that is cleansed before it is freed. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/private-dirs.h"
#include "crypto/digest.h"
#include "crypto/jcs.h"
#include "crypto/keys.h"

#define KEY_FILE_MAX 16384

struct cordon_signing_key {
  EVP_PKEY *pkey;
  uint8_t public_key[CORDON_ED25519_PUBLIC_LEN];
  char kid[CORDON_KEY_ID_LEN + 1];
};

/* ---- where ------------------------------------------------------------------------------ */

int cordon_key_dir(char **out, struct cordon_error **err) {
  const char *env = getenv("CORDON_KEY_DIR");
  char *path = NULL;
  if (env && *env) {
    if (env[0] != '/')
      return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                              "CORDON_KEY_DIR must be an absolute path, not '%s'", env);
    path = strdup(env);
  } else {
    _cleanup_free_ char *home = NULL;
    if (private_state_home(&home, err) < 0)
      return -1;
    if (asprintf(&path, "%s/keys", home) < 0)
      path = NULL;
  }
  if (!path)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "key directory");
  *out = path;
  return 0;
}

static int resolve_dir(const char *dir, char **owned, const char **out, struct cordon_error **err) {
  if (dir) {
    *out = dir;
    return 0;
  }
  if (cordon_key_dir(owned, err) < 0)
    return -1;
  *out = *owned;
  return 0;
}

static int check_private_mode(const struct stat *st, const char *what, const char *path,
                              struct cordon_error **err) {
  if (st->st_uid != geteuid())
    return cordon_error_set(err, CORDON_ERR_DENIED, 0,
                            "%s %s is owned by uid %u, not by the current user (uid %u): refused",
                            what, path, (unsigned)st->st_uid, (unsigned)geteuid());
  /* Say what the mode is, what it must be and why, and the command that fixes it. */
  if (st->st_mode & 077)
    return cordon_error_set(err, CORDON_ERR_DENIED, 0,
                            "%s %s is %04o: must be %s, not readable by group or others "
                            "(chmod %s %s)",
                            what, path, (unsigned)(st->st_mode & 07777),
                            S_ISDIR(st->st_mode) ? "0700" : "0600",
                            S_ISDIR(st->st_mode) ? "700" : "600", path);
  return 0;
}

int keys_open_dir(const char *dir, bool create, struct cordon_error **err) {
  if (create && fs_mkdir_p(dir, 0700, err) < 0)
    return cordon_error_prefix(err, "key directory");
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT)
      return cordon_error_set(err, CORDON_ERR_NOT_FOUND, 0,
                              "key directory %s does not exist (run 'cordon key init')", dir);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot open key directory %s", dir);
  }
  struct stat st;
  if (fstat(fd, &st) < 0) {
    int saved = errno;
    close(fd);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, saved, "key directory %s", dir);
  }
  if (check_private_mode(&st, "key directory", dir, err) < 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* ---- files -------------------------------------------------------------------------------- */

static void free_secret(unsigned char *p, size_t length) {
  if (p) {
    OPENSSL_cleanse(p, length);
    free(p);
  }
}

/* Read dir/name after checking it is a regular file of ours with no group/other bits. */
static int read_key_file(int dirfd, const char *dir, const char *name, unsigned char **data,
                         size_t *length, struct cordon_error **err) {
  _cleanup_free_ char *path = NULL;
  if (asprintf(&path, "%s/%s", dir, name) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "%s", name);
  _cleanup_close_ int fd =
      openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT)
      return cordon_error_set(err, CORDON_ERR_NOT_FOUND, 0, "no key at %s (run 'cordon key init')",
                              path);
    if (errno == ELOOP)
      return cordon_error_set(err, CORDON_ERR_DENIED, 0, "key file %s is a symlink: refused", path);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot open key file %s", path);
  }
  struct stat st;
  if (fstat(fd, &st) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "key file %s", path);
  if (!S_ISREG(st.st_mode))
    return cordon_error_set(err, CORDON_ERR_DENIED, 0, "key file %s is not a regular file", path);
  if (check_private_mode(&st, "key file", path, err) < 0)
    return -1;
  if (st.st_size > KEY_FILE_MAX)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "key file %s is too large", path);
  unsigned char *buf = malloc(KEY_FILE_MAX + 1);
  if (!buf)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "%s", path);
  size_t got = 0;
  for (;;) {
    ssize_t n = read(fd, buf + got, KEY_FILE_MAX + 1 - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      int saved = errno;
      free_secret(buf, KEY_FILE_MAX + 1);
      return cordon_error_set(err, CORDON_ERR_SYSTEM, saved, "cannot read key file %s", path);
    }
    if (n == 0)
      break;
    got += (size_t)n;
    if (got > KEY_FILE_MAX) {
      free_secret(buf, KEY_FILE_MAX + 1);
      return cordon_error_set(err, CORDON_ERR_INVALID, 0, "key file %s is too large", path);
    }
  }
  *data = buf;
  *length = got;
  return 0;
}

/* Create dir/name holding data, mode 0600, without ever replacing an existing file: the bytes
 * go to a temp file, are fsync'd, and the temp file is hard-linked to the final name
 * (FS_COMMIT_NO_REPLACE). Returns 1 when created, 0 when the name already existed. */
static int create_key_file(int dirfd, const char *dir, const char *name, const void *data,
                           size_t length, struct cordon_error **err) {
  _cleanup_fs_temp_ struct fs_temp t = FS_TEMP_INIT;
  if (fs_temp_create(dirfd, name, 0600, &t, err) < 0)
    return cordon_error_prefix(err, "cannot create a key file in %s", dir);
  if (fs_write_all(t.fd, data, length) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot create key file %s/%s", dir,
                            name);
  int r = fs_temp_commit(&t, name, FS_COMMIT_NO_REPLACE, err);
  if (r < 0)
    return cordon_error_prefix(err, "%s", dir);
  return r;
}

/* ---- Ed25519 ------------------------------------------------------------------------------ */

static int openssl_fail(struct cordon_error **err, const char *what) {
  return cordon_error_set(err, CORDON_ERR_SYSTEM, 0, "OpenSSL: %s failed", what);
}

int cordon_jwk_thumbprint(const uint8_t public_key[CORDON_ED25519_PUBLIC_LEN],
                          char out[CORDON_KEY_ID_LEN + 1], struct cordon_error **err) {
  /* RFC 7638 §3.2: the required members only, in lexicographic order, no whitespace. */
  char x[CORDON_KEY_ID_LEN + 1];
  crypto_base64url_encode(public_key, CORDON_ED25519_PUBLIC_LEN, x);
  char json[128];
  int n = snprintf(json, sizeof(json), "{\"crv\":\"Ed25519\",\"kty\":\"OKP\",\"x\":\"%s\"}", x);
  uint8_t digest[CRYPTO_SHA256_LEN];
  if (crypto_sha256(json, (size_t)n, digest, err) < 0)
    return -1;
  crypto_base64url_encode(digest, sizeof(digest), out);
  return 0;
}

static int key_from_pkey(EVP_PKEY *pkey, struct cordon_signing_key **out,
                         struct cordon_error **err) {
  struct cordon_signing_key *key = calloc(1, sizeof(*key));
  if (!key) {
    EVP_PKEY_free(pkey);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "signing key");
  }
  key->pkey = pkey;
  size_t length = sizeof(key->public_key);
  if (!EVP_PKEY_get_raw_public_key(pkey, key->public_key, &length) ||
      length != CORDON_ED25519_PUBLIC_LEN) {
    cordon_signing_key_free(key);
    return openssl_fail(err, "reading the Ed25519 public key");
  }
  if (cordon_jwk_thumbprint(key->public_key, key->kid, err) < 0) {
    cordon_signing_key_free(key);
    return -1;
  }
  *out = key;
  return 0;
}

int keys_signing_key_from_seed(const uint8_t seed[32], struct cordon_signing_key **out,
                               struct cordon_error **err) {
  EVP_PKEY *pkey = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, seed, 32);
  if (!pkey)
    return openssl_fail(err, "loading an Ed25519 seed");
  return key_from_pkey(pkey, out, err);
}

void cordon_signing_key_free(struct cordon_signing_key *key) {
  if (!key)
    return;
  EVP_PKEY_free(key->pkey);
  free(key);
}

void cordon_signing_key_freep(struct cordon_signing_key **key) {
  cordon_signing_key_free(*key);
  *key = NULL;
}

const char *cordon_signing_key_id(const struct cordon_signing_key *key) {
  return key->kid;
}

const uint8_t *cordon_signing_key_public(const struct cordon_signing_key *key) {
  return key->public_key;
}

static int no_passphrase(char *buf, int size, int rwflag, void *u) {
  (void)buf, (void)size, (void)rwflag, (void)u;
  return 0; /* never prompt: an encrypted key file is simply refused */
}

static int parse_signing_key(const unsigned char *pem, size_t length, const char *path,
                             struct cordon_signing_key **out, struct cordon_error **err) {
  BIO *bio = BIO_new_mem_buf(pem, (int)length);
  if (!bio)
    return openssl_fail(err, "BIO_new_mem_buf");
  EVP_PKEY *pkey = PEM_read_bio_PrivateKey(bio, NULL, no_passphrase, NULL);
  BIO_free(bio);
  if (!pkey)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                            "signing key %s is not an unencrypted PKCS#8 PEM private key", path);
  if (EVP_PKEY_get_id(pkey) != EVP_PKEY_ED25519) {
    EVP_PKEY_free(pkey);
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "signing key %s is not an Ed25519 key",
                            path);
  }
  return key_from_pkey(pkey, out, err);
}

static int load_signing_at(int dirfd, const char *dir, struct cordon_signing_key **out,
                           struct cordon_error **err) {
  unsigned char *pem = NULL;
  size_t length = 0;
  if (read_key_file(dirfd, dir, CORDON_SIGNING_KEY_FILE, &pem, &length, err) < 0)
    return -1;
  _cleanup_free_ char *path = NULL;
  int r = asprintf(&path, "%s/%s", dir, CORDON_SIGNING_KEY_FILE) < 0
              ? cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "signing key")
              : parse_signing_key(pem, length, path, out, err);
  free_secret(pem, KEY_FILE_MAX + 1);
  return r;
}

int cordon_signing_key_load(const char *dir, struct cordon_signing_key **out,
                            struct cordon_error **err) {
  _cleanup_free_ char *owned = NULL;
  if (resolve_dir(dir, &owned, &dir, err) < 0)
    return -1;
  _cleanup_close_ int dirfd = keys_open_dir(dir, false, err);
  if (dirfd < 0)
    return -1;
  return load_signing_at(dirfd, dir, out, err);
}

/* Generate a key and store it; 1 created, 0 another process created one first. */
static int generate_signing_at(int dirfd, const char *dir, struct cordon_error **err) {
  EVP_PKEY *pkey = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
  if (!pkey)
    return openssl_fail(err, "Ed25519 key generation");
  BIO *bio = BIO_new(BIO_s_secmem());
  int r = -1;
  if (!bio || !PEM_write_bio_PrivateKey(bio, pkey, NULL, NULL, 0, NULL, NULL)) {
    openssl_fail(err, "writing the private key");
  } else {
    char *pem = NULL;
    long length = BIO_get_mem_data(bio, &pem);
    r = create_key_file(dirfd, dir, CORDON_SIGNING_KEY_FILE, pem, (size_t)length, err);
  }
  BIO_free(bio);
  EVP_PKEY_free(pkey);
  return r;
}

int cordon_signing_key_sign(const struct cordon_signing_key *key, const void *data, size_t length,
                            uint8_t signature[CORDON_ED25519_SIGNATURE_LEN],
                            struct cordon_error **err) {
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  size_t sig_length = CORDON_ED25519_SIGNATURE_LEN;
  int ok = ctx && EVP_DigestSignInit(ctx, NULL, NULL, NULL, key->pkey) == 1 &&
           EVP_DigestSign(ctx, signature, &sig_length, data, length) == 1 &&
           sig_length == CORDON_ED25519_SIGNATURE_LEN;
  EVP_MD_CTX_free(ctx);
  return ok ? 0 : openssl_fail(err, "Ed25519 signing");
}

int cordon_ed25519_verify(const uint8_t public_key[CORDON_ED25519_PUBLIC_LEN], const void *data,
                          size_t length, const uint8_t signature[CORDON_ED25519_SIGNATURE_LEN],
                          struct cordon_error **err) {
  EVP_PKEY *pkey =
      EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, public_key, CORDON_ED25519_PUBLIC_LEN);
  if (!pkey)
    return cordon_error_set(err, CORDON_ERR_INTEGRITY, 0, "invalid Ed25519 public key");
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  int r = -2;
  if (ctx && EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, pkey) == 1)
    r = EVP_DigestVerify(ctx, signature, CORDON_ED25519_SIGNATURE_LEN, data, length);
  EVP_MD_CTX_free(ctx);
  EVP_PKEY_free(pkey);
  if (r == 1)
    return 0;
  if (r == -2)
    return openssl_fail(err, "Ed25519 verification setup");
  return cordon_error_set(err, CORDON_ERR_INTEGRITY, 0, "bad Ed25519 signature");
}

/* ---- JWK ---------------------------------------------------------------------------------- */

json_t *keys_public_jwk(const uint8_t public_key[CORDON_ED25519_PUBLIC_LEN]) {
  char x[CORDON_KEY_ID_LEN + 1], kid[CORDON_KEY_ID_LEN + 1];
  crypto_base64url_encode(public_key, CORDON_ED25519_PUBLIC_LEN, x);
  if (cordon_jwk_thumbprint(public_key, kid, NULL) < 0)
    return NULL;
  return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "alg", "EdDSA", "crv", "Ed25519", "kid", kid,
                   "kty", "OKP", "use", "sig", "x", x);
}

static int jwk_string(const json_t *jwk, const char *name, bool required, const char **out,
                      struct cordon_error **err) {
  json_t *v = json_object_get(jwk, name);
  *out = NULL;
  if (!v)
    return required ? cordon_error_set(err, CORDON_ERR_INVALID, 0, "JWK: missing \"%s\"", name) : 0;
  if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "JWK: \"%s\" is not a string", name);
  *out = json_string_value(v);
  return 0;
}

int keys_parse_public_jwk(const json_t *jwk, uint8_t public_key[CORDON_ED25519_PUBLIC_LEN],
                          char kid[CORDON_KEY_ID_LEN + 1], struct cordon_error **err) {
  if (!json_is_object(jwk))
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "JWK: not an object");
  static const char *const allowed[] = {"alg", "crv", "kid", "kty", "use", "x"};
  const char *name;
  json_t *value;
  json_object_foreach((json_t *)jwk, name, value) {
    bool known = false;
    for (size_t i = 0; i < ARRAY_SIZE(allowed); i++)
      known = known || !strcmp(name, allowed[i]);
    if (!known)
      return cordon_error_set(err, CORDON_ERR_INVALID, 0, "JWK: unexpected member \"%s\"", name);
  }
  const char *kty, *crv, *x, *alg, *use, *given_kid;
  if (jwk_string(jwk, "kty", true, &kty, err) < 0 || jwk_string(jwk, "crv", true, &crv, err) < 0 ||
      jwk_string(jwk, "x", true, &x, err) < 0 || jwk_string(jwk, "alg", false, &alg, err) < 0 ||
      jwk_string(jwk, "use", false, &use, err) < 0 ||
      jwk_string(jwk, "kid", false, &given_kid, err) < 0)
    return -1;
  if (strcmp(kty, "OKP") || strcmp(crv, "Ed25519"))
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "JWK: not an Ed25519 key (%s/%s)", kty,
                            crv);
  if ((alg && strcmp(alg, "EdDSA")) || (use && strcmp(use, "sig")))
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "JWK: wrong alg or use");
  if (crypto_base64url_decode(x, strlen(x), public_key, CORDON_ED25519_PUBLIC_LEN) !=
      CORDON_ED25519_PUBLIC_LEN)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "JWK: \"x\" is not 32 base64url bytes");
  if (cordon_jwk_thumbprint(public_key, kid, err) < 0)
    return -1;
  if (given_kid && strcmp(given_kid, kid))
    return cordon_error_set(err, CORDON_ERR_INTEGRITY, 0,
                            "JWK: kid %s does not match the key's thumbprint %s", given_kid, kid);
  return 0;
}

static int dump_owned(json_t *v, char **json, struct cordon_error **err) {
  if (!v)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "JWK");
  int r = jcs_dump(v, json, NULL, err);
  json_decref(v);
  return r;
}

int cordon_signing_key_jwk(const struct cordon_signing_key *key, char **json,
                           struct cordon_error **err) {
  return dump_owned(keys_public_jwk(key->public_key), json, err);
}

int cordon_signing_key_jwks(const struct cordon_signing_key *key, char **json,
                            struct cordon_error **err) {
  json_t *jwk = keys_public_jwk(key->public_key);
  return dump_owned(jwk ? json_pack("{s:[o]}", "keys", jwk) : NULL, json, err);
}

/* ---- the audit key ------------------------------------------------------------------------ */

static int load_audit_at(int dirfd, const char *dir, uint8_t key[CORDON_AUDIT_KEY_LEN],
                         struct cordon_error **err) {
  unsigned char *data = NULL;
  size_t length = 0;
  if (read_key_file(dirfd, dir, CORDON_AUDIT_KEY_FILE, &data, &length, err) < 0)
    return -1;
  int r = 0;
  if (length != CORDON_AUDIT_KEY_LEN)
    r = cordon_error_set(err, CORDON_ERR_INVALID, 0, "audit key %s/%s is %zu bytes, not %d", dir,
                         CORDON_AUDIT_KEY_FILE, length, CORDON_AUDIT_KEY_LEN);
  else
    memcpy(key, data, CORDON_AUDIT_KEY_LEN);
  free_secret(data, KEY_FILE_MAX + 1);
  return r;
}

static int generate_audit_at(int dirfd, const char *dir, struct cordon_error **err) {
  uint8_t key[CORDON_AUDIT_KEY_LEN];
  if (RAND_priv_bytes(key, sizeof(key)) != 1)
    return openssl_fail(err, "random audit key");
  int r = create_key_file(dirfd, dir, CORDON_AUDIT_KEY_FILE, key, sizeof(key), err);
  OPENSSL_cleanse(key, sizeof(key));
  return r;
}

static bool is_not_found(const struct cordon_error *e) {
  return e && e->kind == CORDON_ERR_NOT_FOUND;
}

/* Hand a locally caught error to the caller. */
static int pass_error(struct cordon_error **err, struct cordon_error *local) {
  if (err && !*err)
    *err = local;
  else
    cordon_error_free(local);
  return -1;
}

int cordon_audit_key_load(const char *dir, bool create, uint8_t key[CORDON_AUDIT_KEY_LEN],
                          struct cordon_error **err) {
  _cleanup_free_ char *owned = NULL;
  if (resolve_dir(dir, &owned, &dir, err) < 0)
    return -1;
  _cleanup_close_ int dirfd = keys_open_dir(dir, create, err);
  if (dirfd < 0)
    return -1;
  struct cordon_error *local = NULL;
  if (load_audit_at(dirfd, dir, key, &local) == 0)
    return 0;
  if (!create || !is_not_found(local))
    return pass_error(err, local);
  cordon_error_free(local);
  if (generate_audit_at(dirfd, dir, err) < 0)
    return -1;
  return load_audit_at(dirfd, dir, key, err);
}

int cordon_key_init(const char *dir, struct cordon_key_init_result *result,
                    struct cordon_error **err) {
  _cleanup_free_ char *owned = NULL;
  if (resolve_dir(dir, &owned, &dir, err) < 0)
    return -1;
  struct cordon_key_init_result res = {0};
  _cleanup_close_ int dirfd = keys_open_dir(dir, true, err);
  if (dirfd < 0)
    return -1;

  struct cordon_error *local = NULL;
  struct cordon_signing_key *key = NULL;
  if (load_signing_at(dirfd, dir, &key, &local) < 0) {
    if (!is_not_found(local)) {
      return pass_error(err, local);
    }
    cordon_error_free(local);
    int r = generate_signing_at(dirfd, dir, err);
    if (r < 0 || load_signing_at(dirfd, dir, &key, err) < 0)
      return -1;
    res.signing_created = r == 1;
  }
  cordon_signing_key_free(key);

  uint8_t audit_key[CORDON_AUDIT_KEY_LEN];
  local = NULL;
  if (load_audit_at(dirfd, dir, audit_key, &local) < 0) {
    if (!is_not_found(local)) {
      return pass_error(err, local);
    }
    cordon_error_free(local);
    int r = generate_audit_at(dirfd, dir, err);
    if (r < 0 || load_audit_at(dirfd, dir, audit_key, err) < 0)
      return -1;
    res.audit_created = r == 1;
  }
  OPENSSL_cleanse(audit_key, sizeof(audit_key));
  if (result)
    *result = res;
  return 0;
}
