/* The ns holder's exec protocol: the shared exec request wire format (exec/wire.h) over a unix
 * stream socket in the session's state directory, with the holder's own magic numbers.
 *
 *   client -> holder  request (the timeout is 0: the client's runner keeps time and sends 'K')
 *   holder -> client  reply 'R' (running) or 'F' (could not start: setup or chdir, errno)
 *   client -> holder  optional byte 'K': kill the command's process tree now
 *   holder -> client  reply 'X' (ended: exit code, signal), then the connection closes
 *
 * A closed connection also kills the tree: an exec never outlives its client.
 *
 * Before the request, both ends prove that they hold the session's secret (32 random bytes in
 * the session's runtime directory, protocol/rundir.h, which no sandbox sees), without sending it:
 *
 *   client -> holder  hello: magic "CNH1", client nonce (32 bytes)
 *   holder -> client  challenge: magic "CNC1", server nonce (32), server proof (32)
 *   client -> holder  client proof (32)
 *
 * proof = HMAC-SHA256(secret, NS_AUTH_CONTEXT || role || client nonce || server nonce), role
 * 'S' for the holder and 'C' for the client. The client checks the holder's proof before it
 * sends anything of the command (argv, environment, stdio); the holder checks the client's in
 * constant time before it reads a request. A listener planted by someone who can reach the
 * socket's path but not the secret fails the first check; a client without it, the second. */
#ifndef CORDON_NS_PROTO_H
#define CORDON_NS_PROTO_H

#include "exec/wire.h"

#define NS_PROTO_REQUEST_MAGIC 0x314e4443u /* "CDN1" little-endian */
#define NS_PROTO_REPLY_MAGIC 0x314e5243u   /* "CRN1" little-endian */

/* Why a command could not start: the reply 'F' carries it, and the one-shot sandbox
 * (holder.c) uses the same codes. */
enum ns_fail_stage {
  NS_STAGE_SETUP = EXEC_WIRE_STAGE_SETUP, /* the holder could not prepare the process */
  NS_STAGE_CHDIR = EXEC_WIRE_STAGE_CHDIR, /* the working directory is not usable */
};

extern const struct exec_wire_protocol ns_protocol;

#define NS_AUTH_SECRET_LEN 32
#define NS_AUTH_NONCE_LEN 32
#define NS_AUTH_PROOF_LEN 32
#define NS_AUTH_HELLO_MAGIC 0x31484e43u     /* "CNH1" little-endian */
#define NS_AUTH_CHALLENGE_MAGIC 0x31434e43u /* "CNC1" little-endian */
#define NS_AUTH_CONTEXT "cordon ns holder auth v1"
#define NS_AUTH_HELLO_LEN (4 + NS_AUTH_NONCE_LEN)
#define NS_AUTH_CHALLENGE_LEN (4 + NS_AUTH_NONCE_LEN + NS_AUTH_PROOF_LEN)
/* How long either end waits for the other's next handshake message. */
#define NS_AUTH_TIMEOUT_MS 10000

struct crypto_hmac;

/* Pure: the proof of `role` ('S' holder, 'C' client) for these nonces, with h keyed by the
 * session's secret. */
int ns_auth_proof(struct crypto_hmac *h, char role, const uint8_t client_nonce[NS_AUTH_NONCE_LEN],
                  const uint8_t server_nonce[NS_AUTH_NONCE_LEN], uint8_t out[NS_AUTH_PROOF_LEN],
                  struct cordon_error **err);

/* Pure parsers of the two fixed-size messages: magic and length, or a one-line error. */
int ns_auth_parse_hello(const unsigned char *bytes, size_t length,
                        uint8_t client_nonce[NS_AUTH_NONCE_LEN], struct cordon_error **err);
int ns_auth_parse_challenge(const unsigned char *bytes, size_t length,
                            uint8_t server_nonce[NS_AUTH_NONCE_LEN],
                            uint8_t server_proof[NS_AUTH_PROOF_LEN], struct cordon_error **err);

/* The holder's side on a freshly accepted connection: 0 when the client proved the secret, -1
 * otherwise (the caller closes the connection). It runs in the command process, under the
 * sandbox's seccomp filter: read, write, poll and getrandom only. */
int ns_auth_serve(int conn, struct crypto_hmac *h, int timeout_ms);

/* The client's side, right after connect: 0 when the holder proved the secret; else a one-line
 * error and nothing of the command was sent. */
int ns_auth_client(int conn, struct crypto_hmac *h, int timeout_ms, struct cordon_error **err);

#endif
