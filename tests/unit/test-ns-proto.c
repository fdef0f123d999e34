/* Unit tests of the ns holder's use of the exec request wire format (src/backends/ns/proto.c):
 * its magic numbers, the replies it sends and the ones it cannot. The format itself is tested
 * once, in test-exec-wire.c. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backends/ns/proto.h"

static void test_request(void **state) {
  const char *argv[] = {"ls", "-l", NULL};
  const char *envp[] = {"PATH=/usr/bin", NULL};
  unsigned char *buf = NULL;
  size_t len = 0;
  struct cordon_error *err = NULL;
  assert_int_equal(exec_wire_encode(&ns_protocol, "/workspace", argv, envp, 0, &buf, &len, &err),
                   0);
  assert_memory_equal(buf, "CDN1", 4); /* docs/formats.md */
  struct exec_wire_header h;
  memcpy(&h, buf, sizeof(h));
  struct exec_wire_request req;
  assert_int_equal(exec_wire_decode(&ns_protocol, &h, buf + sizeof(h), &req, &err), 0);
  assert_string_equal(req.argv[1], "-l");
  exec_wire_request_clear(&req);
  free(buf);
}

static int parse(uint32_t type, int32_t a, int32_t b) {
  struct exec_wire_reply in = {.magic = NS_PROTO_REPLY_MAGIC, .type = type, .a = a, .b = b}, out;
  struct cordon_error *err = NULL;
  int r = exec_wire_reply_parse(&ns_protocol, (unsigned char *)&in, sizeof(in), &out, &err);
  cordon_error_free(err);
  return r;
}

static void test_replies(void **state) {
  assert_memory_equal(&(uint32_t){NS_PROTO_REPLY_MAGIC}, "CRN1", 4);
  assert_int_equal(parse(EXEC_WIRE_RUNNING, 0, 0), 0);
  assert_int_equal(parse(EXEC_WIRE_EXITED, 130, 2), 0);
  assert_int_equal(parse(EXEC_WIRE_FAILED, NS_STAGE_SETUP, EPROTO), 0);
  assert_int_equal(parse(EXEC_WIRE_FAILED, NS_STAGE_CHDIR, ENOENT), 0);
  /* The holder has no timeout of its own and no engine: neither 'T' nor stage 3. */
  assert_true(parse(EXEC_WIRE_TIMED_OUT, 0, 0) < 0);
  assert_true(parse(EXEC_WIRE_FAILED, EXEC_WIRE_STAGE_NO_SECCOMP, 0) < 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_request),
      cmocka_unit_test(test_replies),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
