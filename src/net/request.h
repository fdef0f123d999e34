/* The proxy's request parsers: the head of an HTTP CONNECT or absolute-form request, and the
 * SOCKS5 greeting and request. Each is a pure function fed the bytes received so far, so a
 * fuzzer drives it the way a client does; none keeps a pointer into the input.
 *
 * Plain HTTP: the head is rewritten to origin-form ("GET /path HTTP/1.1"), Proxy-* and the
 * hop-by-hop Connection and Keep-Alive headers are dropped, Host is set from the URI, and
 * "Connection: close" is added: one request per connection to the origin, because the
 * allowlist decides per connection and a second request on the same connection could name
 * another host. Only http:// targets; https goes through CONNECT. */
#ifndef CORDON_NET_REQUEST_H
#define CORDON_NET_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NET_HEAD_MAX 16384u /* request line and headers, through the blank line */
#define NET_HOST_MAX 255u   /* a SOCKS5 name's bound; names beyond 253 are refused later */

enum net_parse {
  NET_PARSE_BAD = -1,
  NET_PARSE_MORE = 0,
  NET_PARSE_DONE = 1,
};

struct net_http_request {
  bool connect;                /* CONNECT host:port; else absolute-form forwarding */
  char host[NET_HOST_MAX + 3]; /* as in the request ("[::1]" keeps its brackets) */
  uint16_t port;
  size_t consumed; /* bytes of input the head took; the rest is body or tunnel */
  char *forward;   /* plain HTTP: the rewritten head (malloc'd), else NULL */
  size_t forward_length;
};

/* NET_PARSE_MORE until the blank line arrives; NET_PARSE_BAD with *why (static) for a head
 * over NET_HEAD_MAX or anything malformed. Clear out with net_http_request_clear. */
enum net_parse net_http_parse(const uint8_t *data, size_t length, struct net_http_request *out,
                              const char **why);
void net_http_request_clear(struct net_http_request *request);

/* SOCKS5 (RFC 1928), "no authentication" only. The greeting: DONE when it offers method 0
 * (reply 05 00), BAD when it does not (reply 05 FF) or is not SOCKS5. */
enum net_parse net_socks5_greeting(const uint8_t *data, size_t length, size_t *consumed,
                                   const char **why);

#define NET_SOCKS5_SUCCEEDED 0x00
#define NET_SOCKS5_GENERAL_FAILURE 0x01
#define NET_SOCKS5_NOT_ALLOWED 0x02
#define NET_SOCKS5_HOST_UNREACHABLE 0x04
#define NET_SOCKS5_CONNECTION_REFUSED 0x05
#define NET_SOCKS5_TTL_EXPIRED 0x06
#define NET_SOCKS5_COMMAND_UNSUPPORTED 0x07
#define NET_SOCKS5_ADDRESS_UNSUPPORTED 0x08

struct net_socks5_request {
  char host[NET_HOST_MAX + 1]; /* a name as sent (remote resolution), or an address's text */
  uint16_t port;
  size_t consumed;
  uint8_t refusal; /* on BAD: the reply code to send */
};

enum net_parse net_socks5_parse(const uint8_t *data, size_t length, struct net_socks5_request *out,
                                const char **why);
/* The 10-byte reply (bound address 0.0.0.0:0) with the given code. */
void net_socks5_reply(uint8_t code, uint8_t out[10]);

#endif
