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
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "backends/ns/impl.h"
#include "backends/ns/proto.h"
#include "crypto/digest.h"

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

/* ---- the secret handshake ---------------------------------------------------------------- */

static struct crypto_hmac *keyed(uint8_t fill) {
  uint8_t secret[NS_AUTH_SECRET_LEN];
  memset(secret, fill, sizeof(secret));
  struct crypto_hmac *h = NULL;
  assert_int_equal(crypto_hmac_new(secret, sizeof(secret), &h, NULL), 0);
  return h;
}

static void test_auth_messages(void **state) {
  assert_memory_equal(&(uint32_t){NS_AUTH_HELLO_MAGIC}, "CNH1", 4);
  assert_memory_equal(&(uint32_t){NS_AUTH_CHALLENGE_MAGIC}, "CNC1", 4);
  unsigned char hello[NS_AUTH_HELLO_LEN] = {0};
  uint8_t nonce[NS_AUTH_NONCE_LEN], proof[NS_AUTH_PROOF_LEN];
  struct cordon_error *err = NULL;
  /* An exec request where a hello belongs (a client of before the handshake) is refused. */
  uint32_t request = NS_PROTO_REQUEST_MAGIC;
  memcpy(hello, &request, 4);
  assert_true(ns_auth_parse_hello(hello, sizeof(hello), nonce, &err) < 0);
  cordon_error_free(err);
  err = NULL;
  uint32_t magic = NS_AUTH_HELLO_MAGIC;
  memcpy(hello, &magic, 4);
  assert_int_equal(ns_auth_parse_hello(hello, sizeof(hello), nonce, NULL), 0);
  assert_true(ns_auth_parse_hello(hello, sizeof(hello) - 1, nonce, NULL) < 0);
  unsigned char challenge[NS_AUTH_CHALLENGE_LEN] = {0};
  assert_true(ns_auth_parse_challenge(challenge, sizeof(challenge), nonce, proof, NULL) < 0);
  magic = NS_AUTH_CHALLENGE_MAGIC;
  memcpy(challenge, &magic, 4);
  assert_int_equal(ns_auth_parse_challenge(challenge, sizeof(challenge), nonce, proof, NULL), 0);
  assert_true(ns_auth_parse_challenge(challenge, 16, nonce, proof, NULL) < 0);
  /* Proofs: bound to the role, the key and both nonces. */
  struct crypto_hmac *a = keyed(1), *b = keyed(2);
  uint8_t cn[NS_AUTH_NONCE_LEN] = {1}, sn[NS_AUTH_NONCE_LEN] = {2};
  uint8_t p1[NS_AUTH_PROOF_LEN], p2[NS_AUTH_PROOF_LEN];
  assert_int_equal(ns_auth_proof(a, 'S', cn, sn, p1, NULL), 0);
  assert_int_equal(ns_auth_proof(a, 'S', cn, sn, p2, NULL), 0);
  assert_memory_equal(p1, p2, sizeof(p1));
  assert_int_equal(ns_auth_proof(a, 'C', cn, sn, p2, NULL), 0);
  assert_memory_not_equal(p1, p2, sizeof(p1));
  assert_int_equal(ns_auth_proof(b, 'S', cn, sn, p2, NULL), 0);
  assert_memory_not_equal(p1, p2, sizeof(p1));
  assert_int_equal(ns_auth_proof(a, 'S', sn, cn, p2, NULL), 0);
  assert_memory_not_equal(p1, p2, sizeof(p1));
  crypto_hmac_free(a);
  crypto_hmac_free(b);
}

/* Run the holder's side in a child on one end of a socketpair: its exit status is 0 when the
 * client proved the secret. */
static pid_t serve_in_child(int fd, uint8_t fill) {
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    struct crypto_hmac *h = keyed(fill);
    _exit(ns_auth_serve(fd, h, 2000) == 0 ? 0 : 1);
  }
  return pid;
}

static int child_status(pid_t pid) {
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_auth_handshake(void **state) {
  struct cordon_error *err = NULL;
  /* Same secret: both sides agree. */
  int sp[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
  pid_t pid = serve_in_child(sp[1], 7);
  close(sp[1]);
  struct crypto_hmac *h = keyed(7);
  assert_int_equal(ns_auth_client(sp[0], h, 2000, &err), 0);
  assert_int_equal(child_status(pid), 0);
  close(sp[0]);
  crypto_hmac_free(h);

  /* A listener with another secret (planted): the client refuses it before sending its proof,
   * and the listener learns nothing it could answer with. */
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
  pid = serve_in_child(sp[1], 8);
  close(sp[1]);
  h = keyed(7);
  assert_true(ns_auth_client(sp[0], h, 2000, &err) < 0);
  assert_int_equal(err->kind, CORDON_ERR_DENIED);
  cordon_error_free(err);
  err = NULL;
  close(sp[0]);
  assert_int_equal(child_status(pid), 1);
  crypto_hmac_free(h);

  /* A client that sends an exec request straight away (no secret): the holder refuses. */
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
  pid = serve_in_child(sp[1], 7);
  close(sp[1]);
  unsigned char *buf = NULL;
  size_t len = 0;
  assert_int_equal(exec_wire_encode(&ns_protocol, "/", (const char *const[]){"true", NULL},
                                    (const char *const[]){NULL}, 0, &buf, &len, NULL),
                   0);
  assert_int_equal(write(sp[0], buf, len), (ssize_t)len);
  free(buf);
  shutdown(sp[0], SHUT_WR);
  assert_int_equal(child_status(pid), 1);
  close(sp[0]);

  /* A client with a wrong proof (it forwards the holder's own): refused. */
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
  pid = serve_in_child(sp[1], 7);
  close(sp[1]);
  unsigned char hello[NS_AUTH_HELLO_LEN] = {0}, challenge[NS_AUTH_CHALLENGE_LEN];
  uint32_t magic = NS_AUTH_HELLO_MAGIC;
  memcpy(hello, &magic, 4);
  assert_int_equal(write(sp[0], hello, sizeof(hello)), (ssize_t)sizeof(hello));
  assert_int_equal(read(sp[0], challenge, sizeof(challenge)), (ssize_t)sizeof(challenge));
  assert_int_equal(write(sp[0], challenge + 4 + NS_AUTH_NONCE_LEN, NS_AUTH_PROOF_LEN),
                   NS_AUTH_PROOF_LEN);
  assert_int_equal(child_status(pid), 1);
  close(sp[0]);
}

/* ---- untrusted state: the cgroup a session may name ------------------------------------ */

static void test_cgroup_dir_ok(void **state) {
  const char *id = "0123456789abcdef";
  assert_true(ns_cgroup_dir_ok("/sys/fs/cgroup/cordon-0123456789abcdef", id));
  assert_true(ns_cgroup_dir_ok("/sys/fs/cgroup/unified/user.slice/cordon-0123456789abcdef", id));
  assert_true(ns_cgroup_dir_ok("/sys/fs/cgroup/memory/cordon-0123456789abcdef", id));
  /* Another cgroup of the host, another session's, or a path out of the hierarchy. */
  assert_false(ns_cgroup_dir_ok("/sys/fs/cgroup/system.slice", id));
  assert_false(ns_cgroup_dir_ok("/sys/fs/cgroup/cordon-ffffffffffffffff", id));
  assert_false(ns_cgroup_dir_ok("/sys/fs/cgroup/cordon-0123456789abcdef/..", id));
  assert_false(ns_cgroup_dir_ok("/sys/fs/cgroup/../../tmp/cordon-0123456789abcdef", id));
  assert_false(ns_cgroup_dir_ok("/sys/fs/cgroup/./cordon-0123456789abcdef", id));
  assert_false(ns_cgroup_dir_ok("/sys/fs/cgroup//cordon-0123456789abcdef", id));
  assert_false(ns_cgroup_dir_ok("/sys/fs/cgroup/cordon-0123456789abcdef/", id));
  assert_false(ns_cgroup_dir_ok("/tmp/cordon-0123456789abcdef", id));
  assert_false(ns_cgroup_dir_ok("/sys/fs/cgroup/cordon-0123456789abcdefx", id));
  assert_false(ns_cgroup_dir_ok("/sys/fs/cgroup/", id));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_request),       cmocka_unit_test(test_replies),
      cmocka_unit_test(test_auth_messages), cmocka_unit_test(test_auth_handshake),
      cmocka_unit_test(test_cgroup_dir_ok),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
