/* Unit tests of the ns holder's wire protocol (src/backends/ns/proto.c): round trips, and the
 * decoder's refusal of every malformed request (it parses what a client sends the holder). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backends/ns/proto.h"

#define ARGV(...) ((const char *const[]){__VA_ARGS__, NULL})

static void roundtrip(const char *cwd, const char *const *argv, const char *const *envp) {
  unsigned char *buf = NULL;
  size_t len = 0;
  struct cordon_error *err = NULL;
  assert_int_equal(ns_request_encode(cwd, argv, envp, &buf, &len, &err), 0);
  struct ns_request_header h;
  memcpy(&h, buf, sizeof(h));
  assert_int_equal(h.length, len - sizeof(h));
  struct ns_request req;
  if (ns_request_decode(&h, buf + sizeof(h), &req, &err) < 0)
    fail_msg("decode: %s", err->message);
  assert_string_equal(req.cwd, cwd);
  size_t i = 0;
  for (; argv[i]; i++)
    assert_string_equal(req.argv[i], argv[i]);
  assert_null(req.argv[i]);
  for (i = 0; envp && envp[i]; i++)
    assert_string_equal(req.envp[i], envp[i]);
  assert_null(req.envp[i]);
  ns_request_clear(&req);
  free(buf);
}

static void test_roundtrip(void **state) {
  roundtrip("/workspace", ARGV("true"), ARGV("PATH=/usr/bin"));
  roundtrip("/", ARGV("sh", "-c", "echo 'a b' \"c\""), ARGV("A=1", "B=", "C=x=y"));
  roundtrip("/workspace/sub dir", ARGV("prog", "", "", "last"), NULL);
  roundtrip("/w", ARGV("\xc3\xa9t\xc3\xa9", "\x01\x7f\xff"), ARGV("K=\xf0\x9f\x90\xa7"));
}

static void test_encode_refusals(void **state) {
  unsigned char *buf = NULL;
  size_t len = 0;
  struct cordon_error *err = NULL;
  assert_true(ns_request_encode(NULL, ARGV("x"), NULL, &buf, &len, &err) < 0);
  cordon_error_free(err);
  err = NULL;
  const char *const empty[] = {NULL};
  assert_true(ns_request_encode("/w", empty, NULL, &buf, &len, &err) < 0);
  cordon_error_free(err);
  err = NULL;
  /* bigger than the protocol allows */
  size_t big = NS_PROTO_MAX_PAYLOAD + 1;
  char *huge = malloc(big + 1);
  memset(huge, 'a', big);
  huge[big] = 0;
  const char *argv[] = {huge, NULL};
  assert_true(ns_request_encode("/w", argv, NULL, &buf, &len, &err) < 0);
  assert_int_equal(err->kind, CORDON_ERR_USAGE);
  cordon_error_free(err);
  free(huge);
}

/* Build a raw request from NUL-separated bytes and counts, bypassing the encoder. */
static int decode_raw(uint32_t magic, uint32_t argc, uint32_t envc, const char *bytes, size_t len) {
  struct ns_request_header h = {
      .magic = magic, .length = (uint32_t)len, .argc = argc, .envc = envc};
  struct ns_request req;
  struct cordon_error *err = NULL;
  int r = ns_request_decode(&h, (const unsigned char *)bytes, &req, &err);
  if (r == 0)
    ns_request_clear(&req);
  else
    assert_non_null(err);
  cordon_error_free(err);
  return r;
}

static void test_decode_refusals(void **state) {
  static const char ok[] = "/w\0true\0A=1"; /* sizeof includes the final NUL */
  assert_int_equal(decode_raw(NS_PROTO_MAGIC, 1, 1, ok, sizeof(ok)), 0);
  assert_true(decode_raw(0xdeadbeef, 1, 1, ok, sizeof(ok)) < 0);         /* magic */
  assert_true(decode_raw(NS_PROTO_MAGIC, 0, 2, ok, sizeof(ok)) < 0);     /* no argv */
  assert_true(decode_raw(NS_PROTO_MAGIC, 2, 1, ok, sizeof(ok)) < 0);     /* too few strings */
  assert_true(decode_raw(NS_PROTO_MAGIC, 1, 0, ok, sizeof(ok)) < 0);     /* trailing bytes */
  assert_true(decode_raw(NS_PROTO_MAGIC, 1, 1, ok, sizeof(ok) - 1) < 0); /* unterminated */
  assert_true(decode_raw(NS_PROTO_MAGIC, 1, 1, ok, 0) < 0);              /* empty */
  static const char relative[] = "w\0true\0A=1";
  assert_true(decode_raw(NS_PROTO_MAGIC, 1, 1, relative, sizeof(relative)) < 0);
  static const char empty_prog[] = "/w\0\0A=1";
  assert_true(decode_raw(NS_PROTO_MAGIC, 1, 1, empty_prog, sizeof(empty_prog)) < 0);
  /* counts that overflow or exceed the payload */
  assert_true(decode_raw(NS_PROTO_MAGIC, 0xffffffffu, 1, ok, sizeof(ok)) < 0);
  assert_true(decode_raw(NS_PROTO_MAGIC, 1, 0xffffffffu, ok, sizeof(ok)) < 0);
  assert_true(decode_raw(NS_PROTO_MAGIC, 1000, 1000, ok, sizeof(ok)) < 0);
}

static void test_header_check(void **state) {
  struct cordon_error *err = NULL;
  struct ns_request_header h = {
      .magic = NS_PROTO_MAGIC, .length = NS_PROTO_MAX_PAYLOAD + 1, .argc = 1};
  assert_true(ns_request_check_header(&h, &err) < 0);
  cordon_error_free(err);
  err = NULL;
  h.length = 10;
  assert_int_equal(ns_request_check_header(&h, &err), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_roundtrip),
      cmocka_unit_test(test_encode_refusals),
      cmocka_unit_test(test_decode_refusals),
      cmocka_unit_test(test_header_check),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
