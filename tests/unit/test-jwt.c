/* Unit tests of the API's bearer tokens (src/crypto/jwt.c): signing and checking, every way a
 * token is refused (tampered claims or header, alg none, another key, expiry, malformed parts,
 * unknown header fields), scopes; the revocation list (src/protocol/tokens.c); and the exec
 * result's JSON and its base64 (src/protocol/exec-json.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/fs.h"
#include "crypto/digest.h"
#include "crypto/jwt.h"
#include "crypto/keys.h"
#include "protocol/exec-json.h"
#include "protocol/tokens.h"

static struct cordon_signing_key *key_from(uint8_t fill) {
  uint8_t seed[32];
  memset(seed, fill, sizeof(seed));
  struct cordon_signing_key *key = NULL;
  assert_int_equal(keys_signing_key_from_seed(seed, &key, NULL), 0);
  return key;
}

static char *sign(const struct cordon_signing_key *key, uint32_t scopes, int64_t iat, int64_t exp) {
  struct jwt_claims c = {
      .sub = (char *)"tester", .jti = (char *)"j1", .scopes = scopes, .iat = iat, .exp = exp};
  char *token = NULL;
  int r = jwt_sign(key, &c, &token, NULL);
  assert_int_equal(r, 0);
  return r == 0 ? token : NULL;
}

static int verify(const struct cordon_signing_key *key, const char *token, int64_t now,
                  struct jwt_claims *out, char **why) {
  struct cordon_error *err = NULL;
  int r =
      jwt_verify(token, cordon_signing_key_public(key), cordon_signing_key_id(key), now, out, &err);
  if (r < 0) {
    assert_int_equal(err->kind, CORDON_ERR_DENIED);
    *why = strdup(err->message);
    cordon_error_free(err);
  }
  return r;
}

static char *b64url(const char *text) {
  char *out = malloc(crypto_base64url_length(strlen(text)) + 1);
  crypto_base64url_encode((const uint8_t *)text, strlen(text), out);
  return out;
}

static void test_round_trip(void **state) {
  (void)state;
  struct cordon_signing_key *key = key_from(7);
  char *token = sign(key, JWT_SCOPE_READ | JWT_SCOPE_EXEC, 1000, 2000);
  struct jwt_claims c;
  char *why = NULL;
  assert_int_equal(verify(key, token, 1500, &c, &why), 0);
  assert_string_equal(c.sub, "tester");
  assert_string_equal(c.jti, "j1");
  assert_int_equal(c.scopes, JWT_SCOPE_READ | JWT_SCOPE_EXEC);
  assert_int_equal(c.iat, 1000);
  assert_int_equal(c.exp, 2000);
  jwt_claims_clear(&c);
  /* The header is exactly {"alg":"EdDSA","kid":KID,"typ":"JWT"}. */
  char *dot = strchr(token, '.');
  uint8_t raw[256];
  long n = crypto_base64url_decode(token, (size_t)(dot - token), raw, sizeof(raw));
  assert_true(n > 0);
  char expected[160];
  snprintf(expected, sizeof(expected), "{\"alg\":\"EdDSA\",\"kid\":\"%s\",\"typ\":\"JWT\"}",
           cordon_signing_key_id(key));
  assert_int_equal((size_t)n, strlen(expected));
  assert_memory_equal(raw, expected, (size_t)n);
  /* Expired at exp itself. */
  assert_int_equal(verify(key, token, 2000, &c, &why), -1);
  assert_non_null(strstr(why, "expired"));
  free(why);
  free(token);
  cordon_signing_key_free(key);
}

static void test_refusals(void **state) {
  (void)state;
  struct cordon_signing_key *key = key_from(7), *other = key_from(9);
  char *token = sign(key, JWT_SCOPE_READ, 1000, 2000);
  char *dot1 = strchr(token, '.'), *dot2 = strchr(dot1 + 1, '.');
  struct jwt_claims c;
  char *why = NULL;
  char *buf = NULL;

  /* Claims rewritten under the old signature. */
  char *admin =
      b64url("{\"exp\":2000,\"iat\":1000,\"jti\":\"j1\",\"scope\":\"admin\",\"sub\":\"x\"}");
  assert_true(asprintf(&buf, "%.*s.%s%s", (int)(dot1 - token), token, admin, dot2) > 0);
  assert_int_equal(verify(key, buf, 1500, &c, &why), -1);
  assert_non_null(strstr(why, "signature"));
  free(why), free(buf);

  /* alg none, with and without an empty signature. */
  char header[200];
  snprintf(header, sizeof(header), "{\"alg\":\"none\",\"kid\":\"%s\"}", cordon_signing_key_id(key));
  char *none = b64url(header);
  assert_true(asprintf(&buf, "%s.%s.", none, admin) > 0);
  assert_int_equal(verify(key, buf, 1500, &c, &why), -1);
  assert_non_null(strstr(why, "EdDSA"));
  free(why), free(buf);
  assert_true(asprintf(&buf, "%s.%s", none, admin) > 0);
  assert_int_equal(verify(key, buf, 1500, &c, &why), -1);
  free(why), free(buf);
  free(none);

  /* Another key: its kid is not ours. */
  char *foreign = sign(other, JWT_SCOPE_ADMIN, 1000, 2000);
  assert_int_equal(verify(key, foreign, 1500, &c, &why), -1);
  assert_non_null(strstr(why, "key id"));
  free(why);
  /* Another key's signature under our kid. */
  snprintf(header, sizeof(header), "{\"alg\":\"EdDSA\",\"kid\":\"%s\",\"typ\":\"JWT\"}",
           cordon_signing_key_id(key));
  char *ours = b64url(header);
  char *f1 = strchr(foreign, '.');
  assert_true(asprintf(&buf, "%s%s", ours, f1) > 0);
  assert_int_equal(verify(key, buf, 1500, &c, &why), -1);
  assert_non_null(strstr(why, "signature"));
  free(why), free(buf), free(ours), free(foreign);

  /* An unknown header field (crit, jku, ...) is refused, not ignored. */
  snprintf(header, sizeof(header), "{\"alg\":\"EdDSA\",\"jku\":\"http://x\",\"kid\":\"%s\"}",
           cordon_signing_key_id(key));
  char *jku = b64url(header);
  assert_true(asprintf(&buf, "%s%s", jku, dot1) > 0);
  assert_int_equal(verify(key, buf, 1500, &c, &why), -1);
  free(why), free(buf), free(jku);

  /* Malformed: too few or too many parts, not base64url, overlong. */
  const char *bad[] = {"", "a", "a.b", "a.b.c.d", "!!.b.c"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    assert_int_equal(verify(key, bad[i], 1500, &c, &why), -1);
    free(why);
  }
  char *longer = calloc(1, JWT_MAX_LENGTH + 2);
  memset(longer, 'a', JWT_MAX_LENGTH + 1);
  assert_int_equal(verify(key, longer, 1500, &c, &why), -1);
  free(why), free(longer);

  /* Claims of the wrong types. */
  char *typed =
      b64url("{\"exp\":\"2000\",\"iat\":1000,\"jti\":\"j1\",\"scope\":\"read\",\"sub\":\"x\"}");
  char *unsigned_part = NULL;
  assert_true(asprintf(&unsigned_part, "%.*s.%s", (int)(dot1 - token), token, typed) > 0);
  uint8_t sig[CORDON_ED25519_SIGNATURE_LEN];
  assert_int_equal(cordon_signing_key_sign(key, unsigned_part, strlen(unsigned_part), sig, NULL),
                   0);
  char s64[100];
  crypto_base64url_encode(sig, sizeof(sig), s64);
  assert_true(asprintf(&buf, "%s.%s", unsigned_part, s64) > 0);
  assert_int_equal(verify(key, buf, 1500, &c, &why), -1);
  assert_non_null(strstr(why, "claims"));
  free(why), free(buf), free(unsigned_part), free(typed);

  free(admin);
  free(token);
  cordon_signing_key_free(key);
  cordon_signing_key_free(other);
}

static void test_scopes(void **state) {
  (void)state;
  uint32_t s = 0;
  assert_int_equal(jwt_scope_parse("read,exec", &s, NULL), 0);
  assert_int_equal(s, JWT_SCOPE_READ | JWT_SCOPE_EXEC);
  assert_int_equal(jwt_scope_parse("admin read", &s, NULL), 0);
  assert_int_equal(s, JWT_SCOPE_READ | JWT_SCOPE_ADMIN);
  struct cordon_error *err = NULL;
  assert_int_equal(jwt_scope_parse("root", &s, &err), -1);
  cordon_error_free(err);
  err = NULL;
  assert_int_equal(jwt_scope_parse(",", &s, &err), -1);
  cordon_error_free(err);
  assert_int_equal(jwt_scope_parse("reader", &s, NULL), -1);
  char *text = jwt_scope_format(JWT_SCOPE_ADMIN | JWT_SCOPE_READ);
  assert_string_equal(text, "read admin");
  free(text);
  assert_true(jwt_scope_allows(JWT_SCOPE_ADMIN, JWT_SCOPE_EXEC));
  assert_true(jwt_scope_allows(JWT_SCOPE_EXEC, JWT_SCOPE_READ));
  assert_false(jwt_scope_allows(JWT_SCOPE_READ, JWT_SCOPE_EXEC));
  assert_false(jwt_scope_allows(JWT_SCOPE_EXEC, JWT_SCOPE_ADMIN));
}

static void test_revocation_list(void **state) {
  (void)state;
  char dir[] = "/tmp/cordon-test-jwt.XXXXXX";
  assert_non_null(mkdtemp(dir));
  bool revoked = true, added = false;
  assert_int_equal(tokens_is_revoked(dir, "a1", &revoked, NULL), 0);
  assert_false(revoked);
  assert_int_equal(tokens_revoke(dir, "b2", &added, NULL), 0);
  assert_true(added);
  assert_int_equal(tokens_revoke(dir, "a1", &added, NULL), 0);
  assert_int_equal(tokens_revoke(dir, "a1", &added, NULL), 0);
  assert_false(added);
  assert_int_equal(tokens_is_revoked(dir, "a1", &revoked, NULL), 0);
  assert_true(revoked);
  char *path = NULL;
  assert_true(asprintf(&path, "%s/%s", dir, TOKENS_REVOKED_FILE) > 0);
  unsigned char *data = NULL;
  size_t length = 0;
  assert_int_equal(fs_read_file(path, 4096, &data, &length, NULL), 0);
  assert_string_equal((char *)data, "{\"revoked\":[\"a1\",\"b2\"]}\n");
  free(data);
  /* A malformed list fails closed. */
  assert_int_equal(fs_write_atomic(path, "[1]", 3, 0600, NULL), 0);
  struct cordon_error *err = NULL;
  assert_int_equal(tokens_is_revoked(dir, "a1", &revoked, &err), -1);
  cordon_error_free(err);
  err = NULL;
  assert_int_equal(tokens_revoke(dir, "../x", &added, &err), -1);
  cordon_error_free(err);
  free(path);
  fs_remove_tree(dir, NULL);
}

static void test_exec_json(void **state) {
  (void)state;
  const unsigned char bytes[] = {0, 1, 0xff, 'a'};
  for (size_t n = 0; n <= sizeof(bytes); n++) {
    json_t *s = exec_base64_json(bytes, n);
    unsigned char *back = NULL;
    size_t length = 0;
    assert_int_equal(exec_base64_decode(json_string_value(s), &back, &length), 0);
    assert_int_equal(length, n);
    assert_memory_equal(back, bytes, n);
    free(back);
    json_decref(s);
  }
  unsigned char *out = NULL;
  size_t length = 0;
  assert_int_equal(exec_base64_decode("aGk=", &out, &length), 0);
  assert_int_equal(length, 2);
  free(out);
  const char *bad[] = {"a", "a===", "aG k", "aGk=aGk=", "=aGk"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    assert_int_equal(exec_base64_decode(bad[i], &out, &length), -1);
  struct cordon_exec_result r = {.exit_code = 3,
                                 .stdout_data = (unsigned char *)"\xff",
                                 .stdout_length = 1,
                                 .stdout_total = 9,
                                 .stdout_truncated = true,
                                 .exec_failure = 127,
                                 .duration = 0.5};
  json_t *text = exec_result_json(&r, false), *b64 = exec_result_json(&r, true);
  assert_true(json_is_null(json_object_get(text, "stdout"))); /* not UTF-8 */
  assert_string_equal(json_string_value(json_object_get(b64, "stdout")), "/w==");
  assert_int_equal(json_integer_value(json_object_get(b64, "stdout_bytes")), 9);
  assert_true(json_is_true(json_object_get(b64, "stdout_truncated")));
  assert_string_equal(json_string_value(json_object_get(b64, "exec_failure")), "not_found");
  json_decref(text);
  json_decref(b64);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trip), cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_scopes),     cmocka_unit_test(test_revocation_list),
      cmocka_unit_test(test_exec_json),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
