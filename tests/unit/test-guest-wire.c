/* Unit tests of the microvm guest agent's frame codec (src/backends/microvm/guest-wire.c):
 * round trips, partial input, every truncation of a stream, bounds per type, each direction
 * refusing the other's types, replies that are not exactly one exec wire reply, and bytes of
 * every kind (no parse reads past what it was given, which ASan checks). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backends/microvm/guest-wire.h"

#define HDR sizeof(struct guest_wire_header)

static unsigned char *frame(enum guest_wire_type type, uint32_t id, const void *payload,
                            uint32_t length, size_t *total) {
  unsigned char *buf = malloc(HDR + length);
  assert_non_null(buf);
  guest_wire_header_encode(type, id, length, buf);
  if (length)
    memcpy(buf + HDR, payload, length);
  *total = HDR + length;
  return buf;
}

static void test_round_trip(void **state) {
  size_t total;
  unsigned char *buf = frame(GUEST_WIRE_STDOUT, 42, "hello", 5, &total);
  struct guest_wire_header h;
  struct cordon_error *err = NULL;
  assert_int_equal(guest_wire_parse(GUEST_WIRE_TO_HOST, buf, total, &h, &err), 1);
  assert_int_equal(h.type, GUEST_WIRE_STDOUT);
  assert_int_equal(h.exec_id, 42);
  assert_int_equal(h.length, 5);
  assert_memory_equal(buf + HDR, "hello", 5);
  free(buf);
  buf = frame(GUEST_WIRE_PING, 7, NULL, 0, &total);
  assert_int_equal(total, HDR);
  assert_int_equal(guest_wire_parse(GUEST_WIRE_TO_GUEST, buf, total, &h, &err), 1);
  assert_int_equal(h.type, GUEST_WIRE_PING);
  free(buf);
  assert_null(err);
}

/* Every proper prefix of a valid frame asks for more and fills nothing. */
static void test_every_truncation(void **state) {
  size_t total;
  unsigned char payload[100];
  memset(payload, 'x', sizeof(payload));
  unsigned char *buf = frame(GUEST_WIRE_STDIN, 1, payload, sizeof(payload), &total);
  for (size_t n = 0; n < total; n++) {
    struct guest_wire_header h = {.type = 99};
    unsigned char *copy = malloc(n ? n : 1); /* exactly n bytes: ASan sees any over-read */
    memcpy(copy, buf, n);
    assert_int_equal(guest_wire_parse(GUEST_WIRE_TO_GUEST, copy, n, &h, NULL), 0);
    assert_int_equal(h.type, 0);
    free(copy);
  }
  free(buf);
}

/* Two frames back to back: the first parses, the rest starts the second. */
static void test_stream(void **state) {
  size_t a_len, b_len;
  unsigned char *a = frame(GUEST_WIRE_STDERR, 3, "ab", 2, &a_len);
  struct exec_wire_reply reply = {GUEST_WIRE_REPLY_MAGIC, EXEC_WIRE_EXITED, 3, 0};
  unsigned char *b = frame(GUEST_WIRE_REPLY, 3, &reply, sizeof(reply), &b_len);
  unsigned char *both = malloc(a_len + b_len);
  memcpy(both, a, a_len);
  memcpy(both + a_len, b, b_len);
  struct guest_wire_header h;
  assert_int_equal(guest_wire_parse(GUEST_WIRE_TO_HOST, both, a_len + b_len, &h, NULL), 1);
  assert_int_equal(h.type, GUEST_WIRE_STDERR);
  size_t used = HDR + h.length;
  assert_int_equal(
      guest_wire_parse(GUEST_WIRE_TO_HOST, both + used, a_len + b_len - used, &h, NULL), 1);
  assert_int_equal(h.type, GUEST_WIRE_REPLY);
  struct exec_wire_reply parsed;
  assert_int_equal(
      exec_wire_reply_parse(&guest_wire_exec_protocol, both + used + HDR, h.length, &parsed, NULL),
      0);
  assert_int_equal(parsed.a, 3);
  free(a);
  free(b);
  free(both);
}

static void expect_invalid(enum guest_wire_direction dir, const unsigned char *bytes, size_t length,
                           const char *needle) {
  struct guest_wire_header h;
  struct cordon_error *err = NULL;
  assert_int_equal(guest_wire_parse(dir, bytes, length, &h, &err), -1);
  assert_non_null(err);
  assert_non_null(strstr(err->message, needle));
  assert_int_equal(h.type, 0);
  cordon_error_free(err);
}

static void test_bad_magic(void **state) {
  unsigned char buf[HDR];
  guest_wire_header_encode(GUEST_WIRE_PING, 1, 0, buf);
  buf[0] ^= 0xff;
  expect_invalid(GUEST_WIRE_TO_GUEST, buf, sizeof(buf), "bad magic");
}

/* Each end accepts only what the other end sends. */
static void test_direction(void **state) {
  unsigned char buf[HDR];
  const enum guest_wire_type to_guest[] = {GUEST_WIRE_PING, GUEST_WIRE_REQUEST, GUEST_WIRE_STDIN,
                                           GUEST_WIRE_STDIN_EOF, GUEST_WIRE_KILL};
  const enum guest_wire_type to_host[] = {GUEST_WIRE_PONG, GUEST_WIRE_STDOUT, GUEST_WIRE_STDERR};
  for (size_t i = 0; i < sizeof(to_guest) / sizeof(to_guest[0]); i++) {
    guest_wire_header_encode(to_guest[i], 1, 0, buf);
    expect_invalid(GUEST_WIRE_TO_HOST, buf, sizeof(buf), "unexpected type");
  }
  for (size_t i = 0; i < sizeof(to_host) / sizeof(to_host[0]); i++) {
    guest_wire_header_encode(to_host[i], 1, 0, buf);
    expect_invalid(GUEST_WIRE_TO_GUEST, buf, sizeof(buf), "unexpected type");
  }
  guest_wire_header_encode((enum guest_wire_type)0, 1, 0, buf);
  expect_invalid(GUEST_WIRE_TO_GUEST, buf, sizeof(buf), "unexpected type");
  guest_wire_header_encode((enum guest_wire_type)0x7fffffff, 1, 0, buf);
  expect_invalid(GUEST_WIRE_TO_HOST, buf, sizeof(buf), "unexpected type");
}

/* Lengths are refused from the header alone, before any payload arrives or is allocated. */
static void test_bounds(void **state) {
  unsigned char buf[HDR];
  guest_wire_header_encode(GUEST_WIRE_STDOUT, 1, GUEST_WIRE_MAX_DATA + 1, buf);
  expect_invalid(GUEST_WIRE_TO_HOST, buf, sizeof(buf), "out of bounds");
  guest_wire_header_encode(GUEST_WIRE_STDIN, 1, UINT32_MAX, buf);
  expect_invalid(GUEST_WIRE_TO_GUEST, buf, sizeof(buf), "out of bounds");
  guest_wire_header_encode(GUEST_WIRE_REQUEST, 1, (uint32_t)GUEST_WIRE_MAX_REQUEST + 1, buf);
  expect_invalid(GUEST_WIRE_TO_GUEST, buf, sizeof(buf), "out of bounds");
  /* Frames without a payload carry none. */
  guest_wire_header_encode(GUEST_WIRE_KILL, 1, 1, buf);
  expect_invalid(GUEST_WIRE_TO_GUEST, buf, sizeof(buf), "out of bounds");
  guest_wire_header_encode(GUEST_WIRE_PONG, 1, 4, buf);
  expect_invalid(GUEST_WIRE_TO_HOST, buf, sizeof(buf), "out of bounds");
  /* A reply is exactly one exec wire reply. */
  guest_wire_header_encode(GUEST_WIRE_REPLY, 1, 15, buf);
  expect_invalid(GUEST_WIRE_TO_HOST, buf, sizeof(buf), "out of bounds");
  guest_wire_header_encode(GUEST_WIRE_REPLY, 1, 17, buf);
  expect_invalid(GUEST_WIRE_TO_HOST, buf, sizeof(buf), "out of bounds");
  /* The largest data frame is fine: the header says so, the payload is still to come. */
  struct guest_wire_header h;
  guest_wire_header_encode(GUEST_WIRE_STDOUT, 1, GUEST_WIRE_MAX_DATA, buf);
  assert_int_equal(guest_wire_parse(GUEST_WIRE_TO_HOST, buf, sizeof(buf), &h, NULL), 0);
  assert_int_equal(guest_wire_max_length(GUEST_WIRE_KILL), 0);
  assert_int_equal(guest_wire_max_length('z'), 0);
}

/* The exec protocol inside the frames: a reply the guest could send, and what it may not. */
static void test_exec_protocol(void **state) {
  struct exec_wire_reply ok[] = {
      {GUEST_WIRE_REPLY_MAGIC, EXEC_WIRE_EXITED, 125, 0},
      {GUEST_WIRE_REPLY_MAGIC, EXEC_WIRE_EXEC_FAILED, 127, 2},
      {GUEST_WIRE_REPLY_MAGIC, EXEC_WIRE_TIMED_OUT, 0, 0},
      {GUEST_WIRE_REPLY_MAGIC, EXEC_WIRE_FAILED, EXEC_WIRE_STAGE_CHDIR, 2},
      {GUEST_WIRE_REPLY_MAGIC, EXEC_WIRE_FAILED, EXEC_WIRE_STAGE_LOST, 5},
  };
  struct exec_wire_reply bad[] = {
      {GUEST_WIRE_REQUEST_MAGIC, EXEC_WIRE_EXITED, 0, 0},      /* the request's magic */
      {GUEST_WIRE_REPLY_MAGIC, EXEC_WIRE_RUNNING, 0, 0},       /* the guest never sends R */
      {GUEST_WIRE_REPLY_MAGIC, EXEC_WIRE_EXEC_FAILED, 125, 2}, /* only 126 or 127 */
      {GUEST_WIRE_REPLY_MAGIC, EXEC_WIRE_FAILED, 5, 2},        /* a stage it does not have */
      {GUEST_WIRE_REPLY_MAGIC, EXEC_WIRE_EXITED, 256, 0},      /* out of range */
  };
  struct exec_wire_reply out;
  for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
    assert_int_equal(exec_wire_reply_parse(&guest_wire_exec_protocol, (unsigned char *)&ok[i],
                                           sizeof(ok[i]), &out, NULL),
                     0);
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    struct cordon_error *err = NULL;
    assert_true(exec_wire_reply_parse(&guest_wire_exec_protocol, (unsigned char *)&bad[i],
                                      sizeof(bad[i]), &out, &err) < 0);
    assert_non_null(err);
    cordon_error_free(err);
  }
  /* A request round trip under the guest's magic. */
  unsigned char *req = NULL;
  size_t length = 0;
  const char *argv[] = {"echo", "hi", NULL};
  const char *envp[] = {"A=1", NULL};
  assert_int_equal(exec_wire_encode(&guest_wire_exec_protocol, "/workspace", argv, envp, 1500, &req,
                                    &length, NULL),
                   0);
  struct exec_wire_header h;
  memcpy(&h, req, sizeof(h));
  assert_int_equal(exec_wire_check_header(&guest_wire_exec_protocol, &h, NULL), 0);
  struct exec_wire_request r = {0};
  assert_int_equal(exec_wire_decode(&guest_wire_exec_protocol, &h, req + sizeof(h), &r, NULL), 0);
  assert_string_equal(r.cwd, "/workspace");
  assert_string_equal(r.argv[1], "hi");
  assert_int_equal(r.timeout_ms, 1500);
  exec_wire_request_clear(&r);
  free(req);
}

/* Bytes of every value in each header position: parse never crashes, and whatever it accepts
 * is within its bounds. */
static void test_arbitrary_bytes(void **state) {
  unsigned seed = 12345;
  for (int round = 0; round < 20000; round++) {
    unsigned char buf[HDR + 32];
    for (size_t i = 0; i < sizeof(buf); i++) {
      seed = seed * 1103515245u + 12345u;
      buf[i] = (unsigned char)(seed >> 16);
    }
    /* Half the time a valid magic, so the later checks are reached. */
    if (round % 2)
      guest_wire_header_encode((enum guest_wire_type)buf[4], 0, buf[12] % 40, buf);
    size_t length = (seed >> 8) % sizeof(buf);
    struct guest_wire_header h;
    struct cordon_error *err = NULL;
    int r = guest_wire_parse(round % 4 < 2 ? GUEST_WIRE_TO_GUEST : GUEST_WIRE_TO_HOST, buf, length,
                             &h, &err);
    if (r == 1)
      assert_true(HDR + h.length <= length && h.length <= guest_wire_max_length(h.type));
    else
      assert_int_equal(h.type, 0);
    assert_true(r == -1 ? err != NULL : err == NULL);
    cordon_error_free(err);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trip),    cmocka_unit_test(test_every_truncation),
      cmocka_unit_test(test_stream),        cmocka_unit_test(test_bad_magic),
      cmocka_unit_test(test_direction),     cmocka_unit_test(test_bounds),
      cmocka_unit_test(test_exec_protocol), cmocka_unit_test(test_arbitrary_bytes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
