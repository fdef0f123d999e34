/* Unit tests of the exec request wire format (src/exec/wire.c), under a protocol of the tests'
 * own: the encoder and both parsers (round trips, every truncation, oversized fields, bad
 * magic, values out of range) and the socket layer (fds attached and refused, probes,
 * truncated and late requests and replies). The backends' own protocols are tested with their
 * backends (test-ns-proto.c, test-docker.c). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/cleanup.h"
#include "exec/wire.h"

#define ARGV(...) ((const char *const[]){__VA_ARGS__, NULL})

static const struct exec_wire_protocol test_protocol = {
    .request_magic = 0x31545443u, /* "CTT1" */
    .reply_magic = 0x32545443u,   /* "CTT2" */
    .reply_types = "RFXT",
    .last_stage = EXEC_WIRE_STAGE_CHDIR,
    .peer = "the test helper",
};

/* The same protocol under other magic numbers: a request or reply of one is not the other's. */
static const struct exec_wire_protocol other_protocol = {
    .request_magic = 0x31544f43u,
    .reply_magic = 0x32544f43u,
    .reply_types = "RFX",
    .last_stage = EXEC_WIRE_STAGE_NO_SECCOMP,
    .peer = "the other helper",
};

static void encode(const char *cwd, const char *const *argv, const char *const *envp,
                   uint32_t timeout_ms, unsigned char **buf, size_t *len) {
  struct cordon_error *err = NULL;
  if (exec_wire_encode(&test_protocol, cwd, argv, envp, timeout_ms, buf, len, &err) < 0)
    fail_msg("encode: %s", err->message);
}

static void expect_error(struct cordon_error *err, const char *needle) {
  assert_non_null(err);
  assert_null(strchr(err->message, '\n')); /* one line */
  if (needle && !strstr(err->message, needle))
    fail_msg("'%s' does not mention '%s'", err->message, needle);
  cordon_error_free(err);
}

/* ---- requests: pure --------------------------------------------------------------------- */

static void roundtrip(const char *cwd, const char *const *argv, const char *const *envp,
                      uint32_t timeout_ms) {
  unsigned char *buf = NULL;
  size_t len = 0;
  encode(cwd, argv, envp, timeout_ms, &buf, &len);
  struct exec_wire_header h;
  memcpy(&h, buf, sizeof(h));
  assert_int_equal(h.magic, test_protocol.request_magic);
  assert_int_equal(h.length, len - sizeof(h));
  assert_int_equal(h.timeout_ms, timeout_ms);
  struct exec_wire_request req;
  struct cordon_error *err = NULL;
  if (exec_wire_decode(&test_protocol, &h, buf + sizeof(h), &req, &err) < 0)
    fail_msg("decode: %s", err->message);
  assert_string_equal(req.cwd, cwd);
  size_t i = 0;
  for (; argv[i]; i++)
    assert_string_equal(req.argv[i], argv[i]);
  assert_null(req.argv[i]);
  for (i = 0; envp && envp[i]; i++)
    assert_string_equal(req.envp[i], envp[i]);
  assert_null(req.envp[i]);
  assert_int_equal(req.timeout_ms, timeout_ms);
  assert_null(req.payload); /* decode borrows the payload */
  exec_wire_request_clear(&req);
  free(buf);
}

static void test_roundtrip(void **state) {
  roundtrip("/workspace", ARGV("true"), ARGV("PATH=/usr/bin"), 0);
  roundtrip("/", ARGV("sh", "-c", "echo 'a b' \"c\""), ARGV("A=1", "B=", "C=x=y"), 1500);
  roundtrip("/workspace/sub dir", ARGV("prog", "", "", "last"), NULL, UINT32_MAX);
  roundtrip("/w", ARGV("\xc3\xa9t\xc3\xa9", "\x01\x7f\xff"), ARGV("K=\xf0\x9f\x90\xa7"), 1);
}

static void test_encode_refusals(void **state) {
  unsigned char *buf = NULL;
  size_t len = 0;
  struct cordon_error *err = NULL;
  const char *const empty[] = {NULL};
  assert_true(exec_wire_encode(&test_protocol, NULL, ARGV("x"), NULL, 0, &buf, &len, &err) < 0);
  expect_error(err, "absolute cwd");
  err = NULL;
  assert_true(exec_wire_encode(&test_protocol, "rel", ARGV("x"), NULL, 0, &buf, &len, &err) < 0);
  expect_error(err, "absolute cwd");
  err = NULL;
  assert_true(exec_wire_encode(&test_protocol, "/w", empty, NULL, 0, &buf, &len, &err) < 0);
  expect_error(err, "program");
  err = NULL;
  assert_true(exec_wire_encode(&test_protocol, "/w", ARGV(""), NULL, 0, &buf, &len, &err) < 0);
  expect_error(err, "program");
  err = NULL;
  /* One byte over the payload bound (the cwd and the NULs take 4 of it). */
  size_t big = EXEC_WIRE_MAX_PAYLOAD - 4 + 1;
  char *huge = malloc(big + 1);
  assert_non_null(huge);
  memset(huge, 'a', big);
  huge[big] = 0;
  const char *argv[] = {huge, NULL};
  assert_true(exec_wire_encode(&test_protocol, "/w", argv, NULL, 0, &buf, &len, &err) < 0);
  assert_int_equal(err->kind, CORDON_ERR_USAGE);
  expect_error(err, "larger than");
  err = NULL;
  huge[big - 1] = 0; /* exactly at the bound: fine */
  assert_int_equal(exec_wire_encode(&test_protocol, "/w", argv, NULL, 0, &buf, &len, &err), 0);
  assert_int_equal(len, sizeof(struct exec_wire_header) + EXEC_WIRE_MAX_PAYLOAD);
  free(buf);
  free(huge);
  /* More strings than the bound. */
  const char **many = calloc(EXEC_WIRE_MAX_STRINGS + 1, sizeof(char *));
  assert_non_null(many);
  for (size_t i = 0; i < EXEC_WIRE_MAX_STRINGS; i++)
    many[i] = "x";
  assert_true(exec_wire_encode(&test_protocol, "/w", many, NULL, 0, &buf, &len, &err) < 0);
  expect_error(err, "too many strings");
  free(many);
}

/* Decode raw bytes under a header made by hand, bypassing the encoder. */
static int decode_raw(uint32_t magic, uint32_t argc, uint32_t envc, const char *bytes, size_t len,
                      const char *needle) {
  struct exec_wire_header h = {.magic = magic, .length = (uint32_t)len, .argc = argc, .envc = envc};
  struct exec_wire_request req;
  struct cordon_error *err = NULL;
  int r = exec_wire_decode(&test_protocol, &h, (const unsigned char *)bytes, &req, &err);
  if (r == 0) {
    exec_wire_request_clear(&req);
  } else {
    expect_error(err, needle);
    assert_null(req.cwd); /* nothing half-filled */
    assert_null(req.argv);
  }
  return r;
}

static void test_decode_refusals(void **state) {
  const uint32_t m = test_protocol.request_magic;
  static const char ok[] = "/w\0true\0A=1"; /* sizeof includes the final NUL */
  assert_int_equal(decode_raw(m, 1, 1, ok, sizeof(ok), NULL), 0);
  assert_true(decode_raw(0xdeadbeef, 1, 1, ok, sizeof(ok), "bad magic") < 0);
  assert_true(decode_raw(other_protocol.request_magic, 1, 1, ok, sizeof(ok), "bad magic") < 0);
  assert_true(decode_raw(m, 0, 2, ok, sizeof(ok), "bad counts") < 0); /* no argv */
  assert_true(decode_raw(m, 2, 1, ok, sizeof(ok), "too few strings") < 0);
  assert_true(decode_raw(m, 1, 0, ok, sizeof(ok), "trailing bytes") < 0);
  assert_true(decode_raw(m, 1, 1, ok, sizeof(ok) - 1, "unterminated") < 0);
  assert_true(decode_raw(m, 1, 1, ok, 0, "bad length") < 0);
  static const char relative[] = "w\0true\0A=1";
  assert_true(decode_raw(m, 1, 1, relative, sizeof(relative), "relative cwd") < 0);
  static const char empty_prog[] = "/w\0\0A=1";
  assert_true(decode_raw(m, 1, 1, empty_prog, sizeof(empty_prog), "empty program") < 0);
  /* Counts that overflow, exceed the bound or exceed the payload. */
  assert_true(decode_raw(m, 0xffffffffu, 1, ok, sizeof(ok), "bad counts") < 0);
  assert_true(decode_raw(m, 1, 0xffffffffu, ok, sizeof(ok), "bad counts") < 0);
  assert_true(decode_raw(m, EXEC_WIRE_MAX_STRINGS + 1, 0, ok, sizeof(ok), "bad counts") < 0);
  assert_true(decode_raw(m, 1000, 1000, ok, sizeof(ok), "bad counts") < 0);
}

/* A payload cut anywhere, with the header saying so, never decodes. */
static void test_request_every_truncation(void **state) {
  unsigned char *buf = NULL;
  size_t len = 0;
  encode("/work", ARGV("sh", "-c", "exit 3"), ARGV("A=1", "BB=22"), 7, &buf, &len);
  struct exec_wire_header h;
  memcpy(&h, buf, sizeof(h));
  uint32_t full = h.length;
  for (uint32_t cut = 0; cut < full; cut++) {
    h.length = cut;
    struct exec_wire_request req;
    struct cordon_error *err = NULL;
    if (exec_wire_decode(&test_protocol, &h, buf + sizeof(h), &req, &err) == 0)
      fail_msg("a payload cut to %u of %u bytes decoded", cut, full);
    expect_error(err, NULL);
  }
  free(buf);
}

static void test_header_check(void **state) {
  struct cordon_error *err = NULL;
  struct exec_wire_header h = {.magic = test_protocol.request_magic, .length = 10, .argc = 1};
  assert_int_equal(exec_wire_check_header(&test_protocol, &h, &err), 0);
  assert_true(exec_wire_check_header(&other_protocol, &h, &err) < 0);
  expect_error(err, "bad magic");
  err = NULL;
  h.length = EXEC_WIRE_MAX_PAYLOAD;
  assert_int_equal(exec_wire_check_header(&test_protocol, &h, &err), 0);
  h.length = EXEC_WIRE_MAX_PAYLOAD + 1;
  assert_true(exec_wire_check_header(&test_protocol, &h, &err) < 0);
  expect_error(err, "bad length");
  err = NULL;
  h.length = 0xffffffffu;
  assert_true(exec_wire_check_header(&test_protocol, &h, &err) < 0);
  expect_error(err, "bad length");
  err = NULL;
  h.length = 10;
  h.argc = 5;
  h.envc = 5; /* 11 strings cannot fit in 10 bytes */
  assert_true(exec_wire_check_header(&test_protocol, &h, &err) < 0);
  expect_error(err, "bad counts");
}

static void test_timeout_ms(void **state) {
  assert_int_equal(exec_wire_timeout_ms(0), 0);
  assert_int_equal(exec_wire_timeout_ms(-3), 0);
  assert_int_equal(exec_wire_timeout_ms(1e-9), 1); /* a real timeout is never "none" */
  assert_int_equal(exec_wire_timeout_ms(1.5), 1500);
  assert_int_equal(exec_wire_timeout_ms(1e12), UINT32_MAX);
}

/* ---- replies: pure ---------------------------------------------------------------------- */

static struct exec_wire_reply make_reply(const struct exec_wire_protocol *p, uint32_t type,
                                         int32_t a, int32_t b) {
  return (struct exec_wire_reply){.magic = p->reply_magic, .type = type, .a = a, .b = b};
}

static void expect_reply(uint32_t type, int32_t a, int32_t b) {
  struct exec_wire_reply in = make_reply(&test_protocol, type, a, b), out;
  struct cordon_error *err = NULL;
  if (exec_wire_reply_parse(&test_protocol, (unsigned char *)&in, sizeof(in), &out, &err) < 0)
    fail_msg("reply '%c' %d %d: %s", (char)type, a, b, err->message);
  assert_memory_equal(&in, &out, sizeof(in));
}

static void expect_bad_reply(const struct exec_wire_protocol *p, const void *bytes, size_t length,
                             const char *needle) {
  struct exec_wire_reply r;
  struct cordon_error *err = NULL;
  assert_true(exec_wire_reply_parse(p, bytes, length, &r, &err) < 0);
  assert_int_equal(err->errnum, EPROTO);
  assert_non_null(strstr(err->message, p->peer));
  expect_error(err, needle);
  assert_int_equal(r.type, 0); /* nothing half-filled for the caller to trust */
}

static void test_reply_parse(void **state) {
  expect_reply(EXEC_WIRE_RUNNING, 0, 0);
  expect_reply(EXEC_WIRE_TIMED_OUT, 0, 0);
  expect_reply(EXEC_WIRE_EXITED, 0, 0);
  expect_reply(EXEC_WIRE_EXITED, 255, 0);
  expect_reply(EXEC_WIRE_EXITED, 137, 9);
  expect_reply(EXEC_WIRE_EXITED, 192, 64);
  expect_reply(EXEC_WIRE_FAILED, EXEC_WIRE_STAGE_SETUP, 0);
  expect_reply(EXEC_WIRE_FAILED, EXEC_WIRE_STAGE_CHDIR, EXEC_WIRE_MAX_ERRNO);

  const struct exec_wire_protocol *p = &test_protocol;
  struct exec_wire_reply in = make_reply(p, EXEC_WIRE_EXITED, 0, 0);
  unsigned char big[64] = {0};
  memcpy(big, &in, sizeof(in));
  for (size_t length = 0; length < sizeof(big); length++) {
    if (length == sizeof(in))
      continue;
    char needle[64];
    snprintf(needle, sizeof(needle), "%zu bytes instead of 16", length);
    expect_bad_reply(p, big, length, needle);
  }
  expect_bad_reply(p, "HTTP/1.1 400 Bad", 16, "bad magic");
  in = make_reply(&other_protocol, EXEC_WIRE_EXITED, 0, 0);
  expect_bad_reply(p, &in, sizeof(in), "bad magic");
  /* Types: unknown, NUL (which strchr would find), above ASCII, and one this protocol lacks. */
  in = make_reply(p, 'Z', 0, 0);
  expect_bad_reply(p, &in, sizeof(in), "unknown type");
  in = make_reply(p, 0, 0, 0);
  expect_bad_reply(p, &in, sizeof(in), "unknown type");
  in = make_reply(p, 0x100 + 'X', 0, 0);
  expect_bad_reply(p, &in, sizeof(in), "unknown type");
  in = make_reply(&other_protocol, EXEC_WIRE_TIMED_OUT, 0, 0);
  expect_bad_reply(&other_protocol, &in, sizeof(in), "unknown type");
  /* Values out of range: an exit code past 255 or negative, a signal that does not match the
   * code or is past 64, a huge or negative errno, an unknown stage (above the protocol's last),
   * a running or timed-out reply carrying values. */
  const struct {
    uint32_t type;
    int32_t a, b;
  } bad[] = {
      {EXEC_WIRE_EXITED, 256, 0},
      {EXEC_WIRE_EXITED, -1, 0},
      {EXEC_WIRE_EXITED, 0, 9},
      {EXEC_WIRE_EXITED, 128 + 65, 65},
      {EXEC_WIRE_EXITED, 128 + 99, 99},
      {EXEC_WIRE_EXITED, INT32_MIN, INT32_MIN},
      {EXEC_WIRE_FAILED, EXEC_WIRE_STAGE_CHDIR, EXEC_WIRE_MAX_ERRNO + 1},
      {EXEC_WIRE_FAILED, EXEC_WIRE_STAGE_CHDIR, -1},
      {EXEC_WIRE_FAILED, 0, 0},
      {EXEC_WIRE_FAILED, EXEC_WIRE_STAGE_NO_SECCOMP, 0},
      {EXEC_WIRE_FAILED, 42, 0},
      {EXEC_WIRE_RUNNING, 1, 0},
      {EXEC_WIRE_RUNNING, 0, -1},
      {EXEC_WIRE_TIMED_OUT, 0, 9},
  };
  for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
    in = make_reply(p, bad[i].type, bad[i].a, bad[i].b);
    expect_bad_reply(p, &in, sizeof(in), "out of range");
  }
  /* The stage another protocol has is in range there. */
  in = make_reply(&other_protocol, EXEC_WIRE_FAILED, EXEC_WIRE_STAGE_NO_SECCOMP, 0);
  struct exec_wire_reply out;
  struct cordon_error *err = NULL;
  assert_int_equal(
      exec_wire_reply_parse(&other_protocol, (unsigned char *)&in, sizeof(in), &out, &err), 0);
}

/* ---- the socket layer ------------------------------------------------------------------- */

static size_t open_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  assert_non_null(d);
  size_t n = 0;
  while (readdir(d))
    n++;
  closedir(d);
  return n;
}

static void socket_pair(int sv[2]) {
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
}

static void pipe_fds(int fds[3]) {
  int p[2];
  assert_int_equal(pipe2(p, O_CLOEXEC), 0);
  fds[0] = p[0];
  fds[1] = p[1];
  fds[2] = dup(p[1]);
  assert_true(fds[2] >= 0);
}

static void close_all(int *fds, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (fds[i] >= 0)
      close(fds[i]);
}

static void test_request_over_socket(void **state) {
  int sv[2], stdio[3];
  socket_pair(sv);
  pipe_fds(stdio);
  unsigned char *buf = NULL;
  size_t len = 0;
  encode("/w", ARGV("echo", "hi"), ARGV("A=1"), 250, &buf, &len);
  assert_int_equal(exec_wire_send_with_fds(sv[0], buf, len, stdio, 3), 0);
  free(buf);
  int got[3];
  struct exec_wire_request req;
  struct cordon_error *err = NULL;
  if (exec_wire_receive_request(sv[1], &test_protocol, 1000, got, &req, &err) != 1)
    fail_msg("receive: %s", err ? err->message : "probe");
  assert_string_equal(req.cwd, "/w");
  assert_string_equal(req.argv[1], "hi");
  assert_string_equal(req.envp[0], "A=1");
  assert_int_equal(req.timeout_ms, 250);
  assert_non_null(req.payload);
  exec_wire_request_clear(&req);
  /* The fds arrived close-on-exec and are the pipe's ends: what goes into "stdout" comes out
   * of "stdin". */
  for (int i = 0; i < 3; i++)
    assert_true(fcntl(got[i], F_GETFD) & FD_CLOEXEC);
  assert_int_equal(write(got[1], "x", 1), 1);
  char c = 0;
  assert_int_equal(read(got[0], &c, 1), 1);
  assert_int_equal(c, 'x');
  close_all(got, 3);
  close_all(stdio, 3);
  close_all(sv, 2);
}

/* Send `length` bytes of a request with n_fds fds, hang up, and receive. */
static int receive_after(const unsigned char *bytes, size_t length, size_t n_fds, int timeout_ms,
                         struct cordon_error **err, bool hang_up) {
  int sv[2], fds[3];
  socket_pair(sv);
  pipe_fds(fds);
  if (length > 0)
    assert_int_equal(exec_wire_send_with_fds(sv[0], bytes, length, fds, n_fds), 0);
  close_all(fds, 3);
  if (hang_up)
    close(sv[0]);
  int stdio[3];
  struct exec_wire_request req;
  int r = exec_wire_receive_request(sv[1], &test_protocol, timeout_ms, stdio, &req, err);
  if (r == 1) {
    exec_wire_request_clear(&req);
    close_all(stdio, 3);
  } else {
    for (int i = 0; i < 3; i++)
      assert_int_equal(stdio[i], -1);
  }
  if (!hang_up)
    close(sv[0]);
  close(sv[1]);
  return r;
}

static void test_request_refusals_over_socket(void **state) {
  unsigned char *buf = NULL;
  size_t len = 0;
  encode("/w", ARGV("true"), NULL, 0, &buf, &len);
  size_t before = open_fds();
  struct cordon_error *err = NULL;
  assert_int_equal(receive_after(buf, len, 3, 1000, &err, true), 1);
  /* A connection closed before anything: a probe, with nothing to answer. */
  assert_int_equal(receive_after(buf, 0, 0, 1000, &err, true), 0);
  assert_null(err);
  /* Every truncation: within the header, then within the payload. */
  for (size_t cut = 1; cut < len; cut++) {
    assert_int_equal(receive_after(buf, cut, 3, 1000, &err, true), -1);
    expect_error(err,
                 cut < sizeof(struct exec_wire_header) ? "truncated header" : "truncated payload");
    err = NULL;
  }
  /* Too few and too many fds; none left open. */
  for (size_t n = 0; n < 3; n++) {
    assert_int_equal(receive_after(buf, len, n, 1000, &err, true), -1);
    expect_error(err, "stdio fds");
    err = NULL;
  }
  /* A connection that stays silent after part of a request: late. */
  assert_int_equal(receive_after(buf, 5, 3, 50, &err, false), -1);
  assert_int_equal(err->errnum, ETIMEDOUT);
  expect_error(err, "no complete header");
  err = NULL;
  assert_int_equal(receive_after(buf, len - 1, 3, 50, &err, false), -1);
  assert_int_equal(err->errnum, ETIMEDOUT);
  expect_error(err, "no complete payload");
  err = NULL;
  /* Another protocol's request. */
  struct exec_wire_header h;
  memcpy(&h, buf, sizeof(h));
  h.magic = other_protocol.request_magic;
  memcpy(buf, &h, sizeof(h));
  assert_int_equal(receive_after(buf, len, 3, 1000, &err, true), -1);
  expect_error(err, "bad magic");
  free(buf);
  assert_int_equal(open_fds(), before);
}

static void test_too_many_fds(void **state) {
  unsigned char *buf = NULL;
  size_t len = 0;
  encode("/w", ARGV("true"), NULL, 0, &buf, &len);
  size_t before = open_fds();
  /* Four fds on the first message. */
  int sv[2], fds[4];
  socket_pair(sv);
  pipe_fds(fds);
  fds[3] = dup(fds[0]);
  union {
    char buf[CMSG_SPACE(sizeof(int) * 4)];
    struct cmsghdr align;
  } control;
  memset(&control, 0, sizeof(control));
  struct iovec iov = {.iov_base = buf, .iov_len = len};
  struct msghdr msg = {.msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = control.buf,
                       .msg_controllen = sizeof(control.buf)};
  struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(int) * 4);
  memcpy(CMSG_DATA(cm), fds, sizeof(int) * 4);
  assert_int_equal(sendmsg(sv[0], &msg, 0), (ssize_t)len);
  close_all(fds, 4);
  int stdio[3];
  struct exec_wire_request req;
  struct cordon_error *err = NULL;
  assert_int_equal(exec_wire_receive_request(sv[1], &test_protocol, 1000, stdio, &req, &err), -1);
  expect_error(err, "stdio fds");
  close_all(sv, 2);
  free(buf);
  assert_int_equal(open_fds(), before);
}

static void test_reply_over_socket(void **state) {
  int sv[2];
  socket_pair(sv);
  struct exec_wire_reply r;
  struct cordon_error *err = NULL;
  assert_int_equal(exec_wire_send_reply(sv[0], &test_protocol, EXEC_WIRE_RUNNING, 0, 0), 0);
  assert_int_equal(exec_wire_send_reply(sv[0], &test_protocol, EXEC_WIRE_EXITED, 137, 9), 0);
  assert_int_equal(exec_wire_read_reply(sv[1], &test_protocol, 1000, &r, &err), 1);
  assert_int_equal(r.type, EXEC_WIRE_RUNNING);
  assert_int_equal(exec_wire_read_reply(sv[1], &test_protocol, -1, &r, &err), 1);
  assert_int_equal(r.type, EXEC_WIRE_EXITED);
  assert_int_equal(r.a, 137);
  assert_int_equal(r.b, 9);
  /* The kill byte. */
  exec_wire_send_kill(sv[1]);
  char byte = 0;
  assert_int_equal(read(sv[0], &byte, 1), 1);
  assert_int_equal(byte, EXEC_WIRE_KILL_BYTE);
  /* Late: nothing comes. */
  assert_int_equal(exec_wire_read_reply(sv[1], &test_protocol, 30, &r, &err), -1);
  assert_int_equal(err->errnum, ETIMEDOUT);
  expect_error(err, "0 of 16 bytes");
  err = NULL;
  /* A reply with fds attached: they are discarded, not received. */
  size_t before = open_fds();
  int fds[3];
  pipe_fds(fds);
  struct exec_wire_reply in = make_reply(&test_protocol, EXEC_WIRE_EXITED, 1, 0);
  assert_int_equal(exec_wire_send_with_fds(sv[0], &in, sizeof(in), fds, 3), 0);
  close_all(fds, 3);
  assert_int_equal(exec_wire_read_reply(sv[1], &test_protocol, 1000, &r, &err), 1);
  assert_int_equal(r.a, 1);
  assert_int_equal(open_fds(), before);
  /* Part of a reply, then the end: the parser names it. Then the end before any byte. */
  assert_int_equal(write(sv[0], &in, 9), 9);
  close(sv[0]);
  assert_int_equal(exec_wire_read_reply(sv[1], &test_protocol, 1000, &r, &err), -1);
  expect_error(err, "9 bytes instead of 16");
  err = NULL;
  assert_int_equal(exec_wire_read_reply(sv[1], &test_protocol, 1000, &r, &err), 0);
  assert_null(err);
  /* Replying to a host that hung up fails without a SIGPIPE. */
  assert_int_equal(exec_wire_send_reply(sv[1], &test_protocol, EXEC_WIRE_RUNNING, 0, 0), -1);
  close(sv[1]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_roundtrip),
      cmocka_unit_test(test_encode_refusals),
      cmocka_unit_test(test_decode_refusals),
      cmocka_unit_test(test_request_every_truncation),
      cmocka_unit_test(test_header_check),
      cmocka_unit_test(test_timeout_ms),
      cmocka_unit_test(test_reply_parse),
      cmocka_unit_test(test_request_over_socket),
      cmocka_unit_test(test_request_refusals_over_socket),
      cmocka_unit_test(test_too_many_fds),
      cmocka_unit_test(test_reply_over_socket),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
