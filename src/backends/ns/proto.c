/* The ns holder's exec protocol (see proto.h): no 'T' (the holder keeps no time of its own)
 * and no engine to lack a seccomp profile. Fields in the order of exec_wire_protocol; the
 * tests check the magics' bytes. Also the secret handshake that precedes every request. */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include "base/fs.h"
#include <sys/socket.h>
#include <time.h>

#include "backends/ns/proto.h"
#include "crypto/digest.h"

const struct exec_wire_protocol ns_protocol = {NS_PROTO_REQUEST_MAGIC, NS_PROTO_REPLY_MAGIC, "RFXE",
                                               EXEC_WIRE_STAGE_CHDIR, "the sandbox holder"};

int ns_auth_proof(struct crypto_hmac *h, char role, const uint8_t client_nonce[NS_AUTH_NONCE_LEN],
                  const uint8_t server_nonce[NS_AUTH_NONCE_LEN], uint8_t out[NS_AUTH_PROOF_LEN],
                  struct cordon_error **err) {
  const struct crypto_part parts[] = {
      {NS_AUTH_CONTEXT, sizeof(NS_AUTH_CONTEXT) - 1},
      {&role, 1},
      {client_nonce, NS_AUTH_NONCE_LEN},
      {server_nonce, NS_AUTH_NONCE_LEN},
  };
  return crypto_hmac_parts(h, parts, 4, out, err);
}

static uint32_t get_u32(const unsigned char *p) {
  uint32_t v;
  memcpy(&v, p, sizeof(v));
  return v;
}

int ns_auth_parse_hello(const unsigned char *bytes, size_t length,
                        uint8_t client_nonce[NS_AUTH_NONCE_LEN], struct cordon_error **err) {
  if (length != NS_AUTH_HELLO_LEN || get_u32(bytes) != NS_AUTH_HELLO_MAGIC)
    return cordon_error_set(err, CORDON_ERR_DENIED, EPROTO,
                            "the sandbox holder's client did not say hello");
  memcpy(client_nonce, bytes + 4, NS_AUTH_NONCE_LEN);
  return 0;
}

int ns_auth_parse_challenge(const unsigned char *bytes, size_t length,
                            uint8_t server_nonce[NS_AUTH_NONCE_LEN],
                            uint8_t server_proof[NS_AUTH_PROOF_LEN], struct cordon_error **err) {
  if (length != NS_AUTH_CHALLENGE_LEN || get_u32(bytes) != NS_AUTH_CHALLENGE_MAGIC)
    return cordon_error_set(err, CORDON_ERR_DENIED, EPROTO,
                            "the session socket did not answer as the sandbox holder");
  memcpy(server_nonce, bytes + 4, NS_AUTH_NONCE_LEN);
  memcpy(server_proof, bytes + 4 + NS_AUTH_NONCE_LEN, NS_AUTH_PROOF_LEN);
  return 0;
}

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Read exactly length bytes within timeout_ms; the number read (short on EOF, timeout or
 * error). Without a control buffer: fds sent along are discarded by the kernel. */
static size_t read_exact(int fd, unsigned char *buf, size_t length, int timeout_ms) {
  long long deadline = now_ms() + timeout_ms;
  size_t got = 0;
  while (got < length) {
    long long left = deadline - now_ms();
    if (left <= 0)
      break;
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    int ready = poll(&pfd, 1, (int)left);
    if (ready < 0 && errno == EINTR)
      continue;
    if (ready <= 0)
      break;
    ssize_t n = recv(fd, buf + got, length - got, MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (n <= 0)
      break;
    got += (size_t)n;
  }
  return got;
}

static int write_exact(int fd, const unsigned char *buf, size_t length) {
  size_t done = 0;
  while (done < length) {
    ssize_t n = send(fd, buf + done, length - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return -1;
    done += (size_t)n;
  }
  return 0;
}

int ns_auth_serve(int conn, struct crypto_hmac *h, int timeout_ms) {
  unsigned char hello[NS_AUTH_HELLO_LEN];
  uint8_t client_nonce[NS_AUTH_NONCE_LEN];
  if (!h || read_exact(conn, hello, sizeof(hello), timeout_ms) != sizeof(hello) ||
      ns_auth_parse_hello(hello, sizeof(hello), client_nonce, NULL) < 0)
    return -1;
  unsigned char challenge[NS_AUTH_CHALLENGE_LEN];
  uint32_t magic = NS_AUTH_CHALLENGE_MAGIC;
  memcpy(challenge, &magic, 4);
  uint8_t *server_nonce = challenge + 4;
  if (fs_random_bytes(server_nonce, NS_AUTH_NONCE_LEN) < 0 ||
      ns_auth_proof(h, 'S', client_nonce, server_nonce, challenge + 4 + NS_AUTH_NONCE_LEN, NULL) <
          0 ||
      write_exact(conn, challenge, sizeof(challenge)) < 0)
    return -1;
  uint8_t expected[NS_AUTH_PROOF_LEN], got[NS_AUTH_PROOF_LEN];
  if (ns_auth_proof(h, 'C', client_nonce, server_nonce, expected, NULL) < 0 ||
      read_exact(conn, got, sizeof(got), timeout_ms) != sizeof(got))
    return -1;
  return crypto_equal(expected, got, sizeof(got)) ? 0 : -1;
}

int ns_auth_client(int conn, struct crypto_hmac *h, int timeout_ms, struct cordon_error **err) {
  unsigned char hello[NS_AUTH_HELLO_LEN];
  uint32_t magic = NS_AUTH_HELLO_MAGIC;
  memcpy(hello, &magic, 4);
  uint8_t *client_nonce = hello + 4;
  if (fs_random_bytes(client_nonce, NS_AUTH_NONCE_LEN) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "getrandom");
  if (write_exact(conn, hello, sizeof(hello)) < 0)
    return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, errno,
                            "the sandbox holder hung up before its handshake");
  unsigned char challenge[NS_AUTH_CHALLENGE_LEN];
  size_t n = read_exact(conn, challenge, sizeof(challenge), timeout_ms);
  uint8_t server_nonce[NS_AUTH_NONCE_LEN], server_proof[NS_AUTH_PROOF_LEN];
  if (ns_auth_parse_challenge(challenge, n, server_nonce, server_proof, err) < 0)
    return -1;
  uint8_t expected[NS_AUTH_PROOF_LEN];
  if (ns_auth_proof(h, 'S', client_nonce, server_nonce, expected, err) < 0)
    return -1;
  if (!crypto_equal(expected, server_proof, sizeof(expected)))
    return cordon_error_set(err, CORDON_ERR_DENIED, EACCES,
                            "the session socket does not hold the session's secret: refused "
                            "(not the sandbox holder)");
  uint8_t proof[NS_AUTH_PROOF_LEN];
  if (ns_auth_proof(h, 'C', client_nonce, server_nonce, proof, err) < 0)
    return -1;
  if (write_exact(conn, proof, sizeof(proof)) < 0)
    return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, errno,
                            "the sandbox holder hung up during its handshake");
  return 0;
}
