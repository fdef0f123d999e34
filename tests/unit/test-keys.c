/* Unit tests of the key store and signatures (src/crypto/keys.c, digest.c, signed.c): known
 * answers from RFC 6234/4231 (SHA-256, HMAC), RFC 8032 (Ed25519), RFC 8037/7638 (JWK
 * thumbprints); key files and their permissions; signed documents and verdicts. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/evp.h>

#include <cordon/keys.h>
#include <cordon/receipt.h>

#include "base/fs.h"
#include "crypto/digest.h"
#include "crypto/jcs.h"
#include "crypto/keys.h"

static char tmp_root[] = "/tmp/cordon-test-keys.XXXXXX";

static int setup(void **state) {
  (void)state;
  if (!mkdtemp(tmp_root))
    return -1;
  return 0;
}

static int teardown(void **state) {
  (void)state;
  fs_remove_tree(tmp_root, NULL);
  return 0;
}

static char *fresh_dir(const char *name) {
  char *p = NULL;
  assert_true(asprintf(&p, "%s/%s", tmp_root, name) > 0);
  fs_remove_tree(p, NULL);
  return p;
}

static void hex_to_bytes(const char *hex, uint8_t *out, size_t length) {
  assert_int_equal(crypto_hex_decode(hex, strlen(hex), out, length), 0);
}

static void test_sha256_and_hex(void **state) {
  (void)state;
  char hex[65];
  assert_int_equal(crypto_sha256_hex("abc", 3, hex, NULL), 0);
  assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  assert_int_equal(crypto_sha256_hex("", 0, hex, NULL), 0);
  assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  assert_true(crypto_is_sha256_hex(hex));
  hex[3] = 'A';
  assert_false(crypto_is_sha256_hex(hex));
  uint8_t b[2];
  assert_int_equal(crypto_hex_decode("00ff", 4, b, 2), 0);
  assert_int_equal(b[1], 0xff);
  assert_int_equal(crypto_hex_decode("00FF", 4, b, 2), -1);
  assert_int_equal(crypto_hex_decode("00f", 3, b, 2), -1);
  assert_int_equal(crypto_hex_decode("0g00", 4, b, 2), -1);
}

static void test_base64url(void **state) {
  (void)state;
  static const struct {
    const char *raw, *encoded;
  } vectors[] = {
      {"", ""},           {"f", "Zg"},          {"fo", "Zm8"},          {"foo", "Zm9v"},
      {"foob", "Zm9vYg"}, {"fooba", "Zm9vYmE"}, {"foobar", "Zm9vYmFy"}, {"\xfb\xff", "-_8"}};
  for (size_t i = 0; i < sizeof(vectors) / sizeof(vectors[0]); i++) {
    char out[32];
    size_t n = strlen(vectors[i].raw);
    assert_int_equal(crypto_base64url_length(n), strlen(vectors[i].encoded));
    crypto_base64url_encode((const uint8_t *)vectors[i].raw, n, out);
    assert_string_equal(out, vectors[i].encoded);
    uint8_t back[32];
    assert_int_equal(crypto_base64url_decode(out, strlen(out), back, sizeof(back)), (long)n);
    assert_memory_equal(back, vectors[i].raw, n);
  }
  uint8_t out[8];
  assert_int_equal(crypto_base64url_decode("Zh", 2, out, sizeof(out)), -1);   /* stray bits */
  assert_int_equal(crypto_base64url_decode("Zm9=", 4, out, sizeof(out)), -1); /* padding */
  assert_int_equal(crypto_base64url_decode("Zm+v", 4, out, sizeof(out)), -1); /* std alphabet */
  assert_int_equal(crypto_base64url_decode("Z", 1, out, sizeof(out)), -1);
  assert_int_equal(crypto_base64url_decode("Zm9vYmFy", 8, out, 5), -1); /* no room */
}

/* RFC 4231 test case 2, with the message split in two as the audit chain feeds it. */
static void test_hmac(void **state) {
  (void)state;
  struct crypto_hmac *h = NULL;
  assert_int_equal(crypto_hmac_new((const uint8_t *)"Jefe", 4, &h, NULL), 0);
  uint8_t mac[32];
  char hex[65];
  for (int round = 0; round < 3; round++) { /* the key is reused */
    assert_int_equal(crypto_hmac_2(h, "what do ya ", 11, "want for nothing?", 17, mac, NULL), 0);
    crypto_hex_encode(mac, 32, hex);
    assert_string_equal(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  }
  assert_int_equal(crypto_hmac_2(h, "what do ya want for nothing?", 28, NULL, 0, mac, NULL), 0);
  crypto_hex_encode(mac, 32, hex);
  assert_string_equal(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  crypto_hmac_free(h);

  /* RFC 4231 test 1 (a 20-byte key) and test 6 (a key longer than the block: hashed first). */
  uint8_t key[131];
  memset(key, 0x0b, 20);
  assert_int_equal(crypto_hmac_new(key, 20, &h, NULL), 0);
  assert_int_equal(crypto_hmac_2(h, "Hi There", 8, NULL, 0, mac, NULL), 0);
  crypto_hex_encode(mac, 32, hex);
  assert_string_equal(hex, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  crypto_hmac_free(h);
  memset(key, 0xaa, sizeof(key));
  assert_int_equal(crypto_hmac_new(key, sizeof(key), &h, NULL), 0);
  const char *msg = "Test Using Larger Than Block-Size Key - Hash Key First";
  assert_int_equal(crypto_hmac_2(h, msg, strlen(msg), NULL, 0, mac, NULL), 0);
  crypto_hex_encode(mac, 32, hex);
  assert_string_equal(hex, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  crypto_hmac_free(h);

  /* The same bytes as OpenSSL's EVP HMAC for keys of every length around the block size, and
   * messages split anywhere. */
  uint8_t data[300];
  for (size_t i = 0; i < sizeof(data); i++)
    data[i] = (uint8_t)(i * 7 + 3);
  for (size_t key_length = 0; key_length <= 130; key_length += 13) {
    assert_int_equal(crypto_hmac_new(data, key_length, &h, NULL), 0);
    for (size_t length = 0; length <= sizeof(data); length += 37) {
      uint8_t want[32];
      size_t want_length = 0;
      assert_non_null(EVP_Q_mac(NULL, "HMAC", NULL, "SHA256", NULL, data, key_length, data, length,
                                want, sizeof(want), &want_length));
      assert_int_equal(want_length, 32);
      assert_int_equal(
          crypto_hmac_2(h, data, length / 3, data + length / 3, length - length / 3, mac, NULL), 0);
      assert_memory_equal(mac, want, 32);
    }
    crypto_hmac_free(h);
  }
}

#define RFC8032_SEED "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"

/* RFC 8032 §7.1 test 1; RFC 8037 A.3 (thumbprint) and A.4 (a JWS signature). */
static void test_ed25519_vectors(void **state) {
  (void)state;
  uint8_t seed[32];
  hex_to_bytes(RFC8032_SEED, seed, 32);
  struct cordon_signing_key *key = NULL;
  assert_int_equal(keys_signing_key_from_seed(seed, &key, NULL), 0);
  char hex[129];
  crypto_hex_encode(cordon_signing_key_public(key), 32, hex);
  assert_string_equal(hex, "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a");
  assert_string_equal(cordon_signing_key_id(key), "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k");

  uint8_t sig[64];
  assert_int_equal(cordon_signing_key_sign(key, "", 0, sig, NULL), 0);
  crypto_hex_encode(sig, 64, hex);
  assert_string_equal(hex, "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155"
                           "5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b");
  assert_int_equal(cordon_ed25519_verify(cordon_signing_key_public(key), "", 0, sig, NULL), 0);

  const char *jws_input = "eyJhbGciOiJFZERTQSJ9.RXhhbXBsZSBvZiBFZDI1NTE5IHNpZ25pbmc";
  assert_int_equal(cordon_signing_key_sign(key, jws_input, strlen(jws_input), sig, NULL), 0);
  char b64[90];
  crypto_base64url_encode(sig, 64, b64);
  assert_string_equal(b64, "hgyY0il_MGCjP0JzlnLWG1PPOt7-09PGcvMg3AIbQR6dWbhijcNR4ki4iylGjg5BhVs"
                           "Pt9g7sVvpAr_MuM0KAg");

  /* Any flipped bit of the signature or the message fails. */
  for (int bit = 0; bit < 512; bit += 7) {
    uint8_t bad[64];
    memcpy(bad, sig, 64);
    bad[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    struct cordon_error *err = NULL;
    assert_true(cordon_ed25519_verify(cordon_signing_key_public(key), jws_input, strlen(jws_input),
                                      bad, &err) < 0);
    assert_int_equal(err->kind, CORDON_ERR_INTEGRITY);
    cordon_error_free(err);
  }
  struct cordon_error *err = NULL;
  assert_true(cordon_ed25519_verify(cordon_signing_key_public(key), "x", 1, sig, &err) < 0);
  cordon_error_free(err);

  char *jwk = NULL;
  assert_int_equal(cordon_signing_key_jwk(key, &jwk, NULL), 0);
  assert_string_equal(jwk, "{\"alg\":\"EdDSA\",\"crv\":\"Ed25519\",\"kid\":\"kPrK_qmxVWaYVA9wwBF6Iu"
                           "o3vVzz7TxHCTwXBygrS4k\",\"kty\":\"OKP\",\"use\":\"sig\",\"x\":\"11qYAYK"
                           "xCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo\"}");
  char *jwks = NULL;
  assert_int_equal(cordon_signing_key_jwks(key, &jwks, NULL), 0);
  assert_true(strncmp(jwks, "{\"keys\":[{\"alg\":\"EdDSA\"", 23) == 0);
  free(jwks);
  free(jwk);
  cordon_signing_key_free(key);
}

static void test_jwk_parse(void **state) {
  (void)state;
  uint8_t pub[32], expected[32];
  char kid[44];
  hex_to_bytes("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", expected, 32);
  json_t *jwk = json_pack("{s:s,s:s,s:s}", "kty", "OKP", "crv", "Ed25519", "x",
                          "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo");
  assert_int_equal(keys_parse_public_jwk(jwk, pub, kid, NULL), 0);
  assert_memory_equal(pub, expected, 32);
  assert_string_equal(kid, "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k");
  struct cordon_error *err = NULL;
  json_object_set_new(jwk, "kid", json_string("not-the-thumbprint"));
  assert_true(keys_parse_public_jwk(jwk, pub, kid, &err) < 0);
  assert_int_equal(err->kind, CORDON_ERR_INTEGRITY);
  cordon_error_free(err);
  err = NULL;
  json_object_del(jwk, "kid");
  json_object_set_new(jwk, "d", json_string("secret"));
  assert_true(keys_parse_public_jwk(jwk, pub, kid, &err) < 0);
  assert_non_null(strstr(err->message, "\"d\""));
  cordon_error_free(err);
  err = NULL;
  json_object_del(jwk, "d");
  json_object_set_new(jwk, "crv", json_string("X25519"));
  assert_true(keys_parse_public_jwk(jwk, pub, kid, &err) < 0);
  cordon_error_free(err);
  err = NULL;
  json_object_set_new(jwk, "crv", json_string("Ed25519"));
  json_object_set_new(jwk, "x", json_string("11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHUR"));
  assert_true(keys_parse_public_jwk(jwk, pub, kid, &err) < 0);
  cordon_error_free(err);
  json_decref(jwk);
}

static void test_key_dir_resolution(void **state) {
  (void)state;
  char *saved_key = getenv("CORDON_KEY_DIR") ? strdup(getenv("CORDON_KEY_DIR")) : NULL;
  char *dir = NULL;
  setenv("CORDON_KEY_DIR", "/somewhere/keys", 1);
  assert_int_equal(cordon_key_dir(&dir, NULL), 0);
  assert_string_equal(dir, "/somewhere/keys");
  free(dir);
  struct cordon_error *err = NULL;
  setenv("CORDON_KEY_DIR", "relative/keys", 1);
  assert_true(cordon_key_dir(&dir, &err) < 0);
  cordon_error_free(err);
  unsetenv("CORDON_KEY_DIR");
  setenv("XDG_STATE_HOME", "/xdg/state", 1);
  assert_int_equal(cordon_key_dir(&dir, NULL), 0);
  assert_string_equal(dir, "/xdg/state/cordon/keys");
  free(dir);
  setenv("XDG_STATE_HOME", "not/absolute", 1);
  setenv("HOME", "/home/someone", 1);
  assert_int_equal(cordon_key_dir(&dir, NULL), 0);
  assert_string_equal(dir, "/home/someone/.local/state/cordon/keys");
  free(dir);
  unsetenv("XDG_STATE_HOME");
  if (saved_key)
    setenv("CORDON_KEY_DIR", saved_key, 1);
  free(saved_key);
}

static mode_t mode_of(const char *dir, const char *name) {
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  struct stat st;
  assert_int_equal(lstat(path, &st), 0);
  return st.st_mode & 07777;
}

static void test_init_and_load(void **state) {
  (void)state;
  char *dir = fresh_dir("init/nested/keys");
  struct cordon_key_init_result res;
  assert_int_equal(cordon_key_init(dir, &res, NULL), 0);
  assert_true(res.signing_created);
  assert_true(res.audit_created);
  assert_int_equal(mode_of(dir, "."), 0700);
  assert_int_equal(mode_of(dir, CORDON_SIGNING_KEY_FILE), 0600);
  assert_int_equal(mode_of(dir, CORDON_AUDIT_KEY_FILE), 0600);

  struct cordon_signing_key *key = NULL;
  assert_int_equal(cordon_signing_key_load(dir, &key, NULL), 0);
  char kid[44];
  strcpy(kid, cordon_signing_key_id(key));
  assert_int_equal(strlen(kid), CORDON_KEY_ID_LEN);
  uint8_t sig[64];
  assert_int_equal(cordon_signing_key_sign(key, "hello", 5, sig, NULL), 0);
  assert_int_equal(cordon_ed25519_verify(cordon_signing_key_public(key), "hello", 5, sig, NULL), 0);
  cordon_signing_key_free(key);

  /* init again keeps both keys. */
  uint8_t audit1[32], audit2[32];
  assert_int_equal(cordon_audit_key_load(dir, false, audit1, NULL), 0);
  assert_int_equal(cordon_key_init(dir, &res, NULL), 0);
  assert_false(res.signing_created);
  assert_false(res.audit_created);
  assert_int_equal(cordon_signing_key_load(dir, &key, NULL), 0);
  assert_string_equal(cordon_signing_key_id(key), kid);
  cordon_signing_key_freep(&key); /* for _cleanup_(): frees and clears */
  assert_null(key);
  cordon_signing_key_freep(&key);
  assert_int_equal(cordon_audit_key_load(dir, false, audit2, NULL), 0);
  assert_memory_equal(audit1, audit2, 32);

  /* No temp files are left behind. */
  char cmd[600];
  snprintf(cmd, sizeof(cmd), "test $(ls -A '%s' | wc -l) -eq 2", dir);
  assert_int_equal(system(cmd), 0);
  free(dir);
}

static void expect_load_denied(const char *dir, const char *needle) {
  struct cordon_signing_key *key = NULL;
  struct cordon_error *err = NULL;
  assert_true(cordon_signing_key_load(dir, &key, &err) < 0);
  assert_null(key);
  assert_non_null(err);
  assert_int_equal(err->kind, CORDON_ERR_DENIED);
  if (!strstr(err->message, needle))
    fail_msg("'%s' does not mention '%s'", err->message, needle);
  cordon_error_free(err);
}

static void test_permission_refusal(void **state) {
  (void)state;
  char *dir = fresh_dir("perm");
  assert_int_equal(cordon_key_init(dir, NULL, NULL), 0);
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", dir, CORDON_SIGNING_KEY_FILE);

  static const mode_t bad_modes[] = {0640, 0604, 0660, 0644, 0601, 0610};
  for (size_t i = 0; i < sizeof(bad_modes) / sizeof(bad_modes[0]); i++) {
    assert_int_equal(chmod(path, bad_modes[i]), 0);
    char needle[32];
    snprintf(needle, sizeof(needle), "is %04o: must be 0600", (unsigned)bad_modes[i]);
    expect_load_denied(dir, needle);
    expect_load_denied(dir, "chmod 600");
  }
  assert_int_equal(chmod(path, 0400), 0); /* owner-only read is fine */
  struct cordon_signing_key *key = NULL;
  assert_int_equal(cordon_signing_key_load(dir, &key, NULL), 0);
  cordon_signing_key_free(key);
  assert_int_equal(chmod(path, 0600), 0);

  /* The audit key too, and key init refuses rather than repairing. */
  char audit[512];
  snprintf(audit, sizeof(audit), "%s/%s", dir, CORDON_AUDIT_KEY_FILE);
  assert_int_equal(chmod(audit, 0644), 0);
  uint8_t raw[32];
  struct cordon_error *err = NULL;
  assert_true(cordon_audit_key_load(dir, true, raw, &err) < 0);
  assert_int_equal(err->kind, CORDON_ERR_DENIED);
  cordon_error_free(err);
  err = NULL;
  assert_true(cordon_key_init(dir, NULL, &err) < 0);
  assert_int_equal(err->kind, CORDON_ERR_DENIED);
  cordon_error_free(err);
  assert_int_equal(chmod(audit, 0600), 0);

  /* A directory others can enter is refused. */
  assert_int_equal(chmod(dir, 0755), 0);
  expect_load_denied(dir, "key directory");
  assert_int_equal(chmod(dir, 0700), 0);

  /* A symlinked key file is refused, even to a private file. */
  char target[512];
  snprintf(target, sizeof(target), "%s/elsewhere.key", tmp_root);
  assert_int_equal(rename(path, target), 0);
  assert_int_equal(symlink(target, path), 0);
  expect_load_denied(dir, "symlink");
  unlink(path);
  /* A FIFO in its place is refused without blocking. */
  assert_int_equal(mkfifo(path, 0600), 0);
  expect_load_denied(dir, "not a regular file");
  unlink(path);
  free(dir);
}

static void test_bad_key_files(void **state) {
  (void)state;
  char *dir = fresh_dir("bad");
  assert_int_equal(fs_mkdir_p(dir, 0700, NULL), 0);
  struct cordon_signing_key *key = NULL;
  struct cordon_error *err = NULL;
  assert_true(cordon_signing_key_load(dir, &key, &err) < 0);
  assert_int_equal(err->kind, CORDON_ERR_NOT_FOUND);
  assert_non_null(strstr(err->message, "cordon key init"));
  cordon_error_free(err);
  err = NULL;

  char path[512];
  snprintf(path, sizeof(path), "%s/%s", dir, CORDON_SIGNING_KEY_FILE);
  assert_int_equal(fs_write_atomic(path, "not a key\n", 10, 0600, NULL), 0);
  assert_true(cordon_signing_key_load(dir, &key, &err) < 0);
  assert_int_equal(err->kind, CORDON_ERR_INVALID);
  cordon_error_free(err);
  err = NULL;

  snprintf(path, sizeof(path), "%s/%s", dir, CORDON_AUDIT_KEY_FILE);
  assert_int_equal(fs_write_atomic(path, "short", 5, 0600, NULL), 0);
  uint8_t raw[32];
  assert_true(cordon_audit_key_load(dir, true, raw, &err) < 0);
  assert_int_equal(err->kind, CORDON_ERR_INVALID);
  assert_non_null(strstr(err->message, "5 bytes"));
  cordon_error_free(err);
  err = NULL;

  char *missing = fresh_dir("missing");
  assert_true(cordon_audit_key_load(missing, false, raw, &err) < 0);
  assert_int_equal(err->kind, CORDON_ERR_NOT_FOUND);
  cordon_error_free(err);
  assert_int_equal(cordon_audit_key_load(missing, true, raw, NULL), 0);
  assert_int_equal(mode_of(missing, CORDON_AUDIT_KEY_FILE), 0600);
  free(missing);
  free(dir);
}

/* Four processes initialising at once end up sharing one identity. */
static void test_concurrent_init(void **state) {
  (void)state;
  char *dir = fresh_dir("race");
  int fds[4][2];
  for (int i = 0; i < 4; i++) {
    assert_int_equal(pipe(fds[i]), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      struct cordon_signing_key *key = NULL;
      if (cordon_key_init(dir, NULL, NULL) < 0 || cordon_signing_key_load(dir, &key, NULL) < 0)
        _exit(1);
      ssize_t w = write(fds[i][1], cordon_signing_key_id(key), CORDON_KEY_ID_LEN);
      _exit(w == CORDON_KEY_ID_LEN ? 0 : 1);
    }
    close(fds[i][1]);
  }
  char kids[4][44] = {{0}};
  for (int i = 0; i < 4; i++) {
    int status;
    assert_true(wait(&status) > 0);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  for (int i = 0; i < 4; i++) {
    assert_int_equal(read(fds[i][0], kids[i], CORDON_KEY_ID_LEN), CORDON_KEY_ID_LEN);
    close(fds[i][0]);
    assert_string_equal(kids[i], kids[0]);
  }
  free(dir);
}

static struct cordon_signing_key *rfc_key(void) {
  uint8_t seed[32];
  hex_to_bytes(RFC8032_SEED, seed, 32);
  struct cordon_signing_key *key = NULL;
  assert_int_equal(keys_signing_key_from_seed(seed, &key, NULL), 0);
  return key;
}

static void test_documents(void **state) {
  (void)state;
  struct cordon_signing_key *key = rfc_key();
  const char *body = "{\"winner\":\"t2\", \"base\":\"abc\", \"n\":[1,2.5]}";
  char *doc = NULL, *doc2 = NULL;
  size_t length = 0, length2 = 0;
  assert_int_equal(cordon_document_sign(key, body, strlen(body), &doc, &length, NULL), 0);
  assert_int_equal(strlen(doc), length);
  assert_int_equal(doc[length - 1], '\n');
  /* Deterministic: Ed25519 and canonical JSON give the same bytes every time. */
  assert_int_equal(cordon_document_sign(key, body, strlen(body), &doc2, &length2, NULL), 0);
  assert_int_equal(length, length2);
  assert_memory_equal(doc, doc2, length);
  free(doc2);

  struct cordon_document_check check;
  assert_int_equal(cordon_document_verify(doc, length, NULL, &check, NULL), 0);
  assert_int_equal(check.verdict, CORDON_VERDICT_UNANCHORED);
  assert_string_equal(check.kid, cordon_signing_key_id(key));
  assert_non_null(strstr(check.body_json, "\"signer\":{\"jwk\":"));
  assert_non_null(strstr(check.body_json, "\"winner\":\"t2\""));
  cordon_document_check_clear(&check);
  assert_int_equal(cordon_document_verify(doc, length, cordon_signing_key_id(key), &check, NULL),
                   0);
  assert_int_equal(check.verdict, CORDON_VERDICT_VERIFIED);
  assert_null(check.reason);
  cordon_document_check_clear(&check);
  assert_int_equal(cordon_document_verify(doc, length, "someone-else", &check, NULL), 0);
  assert_int_equal(check.verdict, CORDON_VERDICT_FAILED);
  assert_non_null(strstr(check.reason, "not by the expected key"));
  cordon_document_check_clear(&check);

  /* Every single changed byte, at every position, fails. */
  char *copy = malloc(length);
  for (size_t i = 0; i < length; i++) {
    static const unsigned char flips[] = {0x01, 0x20, 0x80};
    for (size_t f = 0; f < sizeof(flips); f++) {
      memcpy(copy, doc, length);
      copy[i] = (char)(copy[i] ^ flips[f]);
      assert_int_equal(cordon_document_verify(copy, length, NULL, &check, NULL), 0);
      if (check.verdict != CORDON_VERDICT_FAILED)
        fail_msg("flipping byte %zu with %02x still verifies", i, flips[f]);
      assert_non_null(check.reason);
      assert_null(check.body_json);
      cordon_document_check_clear(&check);
    }
  }
  free(copy);
  /* Truncated, extended, re-spaced. */
  assert_int_equal(cordon_document_verify(doc, length - 1, NULL, &check, NULL), 0);
  assert_int_equal(check.verdict, CORDON_VERDICT_FAILED);
  cordon_document_check_clear(&check);
  assert_int_equal(cordon_document_verify("{}\n", 3, NULL, &check, NULL), 0);
  assert_int_equal(check.verdict, CORDON_VERDICT_FAILED);
  cordon_document_check_clear(&check);
  assert_int_equal(cordon_document_verify("\xff\n", 2, NULL, &check, NULL), 0);
  assert_int_equal(check.verdict, CORDON_VERDICT_FAILED);
  cordon_document_check_clear(&check);

  struct cordon_error *err = NULL;
  assert_true(cordon_document_sign(key, "{\"signer\":1}", 12, &doc2, NULL, &err) < 0);
  cordon_error_free(err);
  err = NULL;
  assert_true(cordon_document_sign(key, "[1]", 3, &doc2, NULL, &err) < 0);
  cordon_error_free(err);
  free(doc);
  cordon_signing_key_free(key);
}

static void test_verdicts(void **state) {
  (void)state;
  enum cordon_verdict order[] = {CORDON_VERDICT_VERIFIED, CORDON_VERDICT_UNANCHORED,
                                 CORDON_VERDICT_INCOMPLETE, CORDON_VERDICT_UNREADABLE,
                                 CORDON_VERDICT_FAILED};
  for (size_t i = 0; i < 5; i++)
    for (size_t j = 0; j < 5; j++) {
      enum cordon_verdict w = cordon_verdict_worse(order[i], order[j]);
      assert_int_equal(w, order[i > j ? i : j]);
    }
  assert_int_equal(CORDON_VERDICT_FAILED, 1);
  assert_int_equal(CORDON_VERDICT_INCOMPLETE, 2);
  assert_int_equal(CORDON_VERDICT_UNANCHORED, 3);
  assert_int_equal(CORDON_VERDICT_UNREADABLE, 4);
  assert_string_equal(cordon_verdict_name(CORDON_VERDICT_UNANCHORED), "unanchored");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sha256_and_hex), cmocka_unit_test(test_base64url),
      cmocka_unit_test(test_hmac),           cmocka_unit_test(test_ed25519_vectors),
      cmocka_unit_test(test_jwk_parse),      cmocka_unit_test(test_key_dir_resolution),
      cmocka_unit_test(test_init_and_load),  cmocka_unit_test(test_permission_refusal),
      cmocka_unit_test(test_bad_key_files),  cmocka_unit_test(test_concurrent_init),
      cmocka_unit_test(test_documents),      cmocka_unit_test(test_verdicts),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
