/* The egress proxy's request parsers (src/net/request.c): HTTP CONNECT and absolute-form
 * heads, fed whole and byte by byte, their bounds, and SOCKS5 greeting and request. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "net/request.h"

static enum net_parse http(const char *text, struct net_http_request *out) {
  const char *why = NULL;
  return net_http_parse((const uint8_t *)text, strlen(text), out, &why);
}

static void test_connect(void **state) {
  (void)state;
  struct net_http_request r;
  const char *head = "CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n"
                     "User-Agent: curl\r\n\r\nTLS-BYTES";
  /* Every prefix short of the blank line asks for more; none is decided early. */
  size_t whole = strstr(head, "\r\n\r\n") + 4 - head;
  for (size_t n = 0; n < whole; n++) {
    const char *why;
    assert_int_equal(net_http_parse((const uint8_t *)head, n, &r, &why), NET_PARSE_MORE);
  }
  assert_int_equal(http(head, &r), NET_PARSE_DONE);
  assert_true(r.connect);
  assert_string_equal(r.host, "api.example.com");
  assert_int_equal(r.port, 443);
  assert_int_equal(r.consumed, whole);
  assert_null(r.forward);
  assert_int_equal(http("CONNECT [::1]:8443 HTTP/1.1\r\n\r\n", &r), NET_PARSE_DONE);
  assert_string_equal(r.host, "[::1]");
  assert_int_equal(r.port, 8443);
  assert_int_equal(http("CONNECT a.example:443 HTTP/1.0\n\n", &r), NET_PARSE_DONE);
  const char *bad[] = {"CONNECT a.example HTTP/1.1\r\n\r\n",
                       "CONNECT a.example:0 HTTP/1.1\r\n\r\n",
                       "CONNECT a.example:65536 HTTP/1.1\r\n\r\n",
                       "CONNECT :443 HTTP/1.1\r\n\r\n",
                       "CONNECT a.example:443 HTTP/2\r\n\r\n",
                       "CONNECT user@a.example:443 HTTP/1.1\r\n\r\n",
                       "CONNECT a.example:443 HTTP/1.1\r\nBad Header\r\n\r\n",
                       "CONNECT a.example:443 HTTP/1.1\r\n folded\r\n\r\n",
                       "CONNECT [::1:443 HTTP/1.1\r\n\r\n",
                       "CONNECT a.example:4x3 HTTP/1.1\r\n\r\n",
                       "GET https://a.example/ HTTP/1.1\r\n\r\n",
                       "GET /x HTTP/1.1\r\n\r\n",
                       " CONNECT a:1 HTTP/1.1\r\n\r\n"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    if (http(bad[i], &r) != NET_PARSE_BAD)
      fail_msg("accepted: %s", bad[i]);
}

static void test_forward_rewrites_the_head(void **state) {
  (void)state;
  struct net_http_request r;
  assert_int_equal(http("GET http://Files.example:8080/a/b?q=1 HTTP/1.1\r\n"
                        "Host: evil.example\r\nProxy-Authorization: Basic eA==\r\n"
                        "Proxy-Connection: keep-alive\r\nAccept: */*\r\nConnection: keep-alive\r\n"
                        "Keep-Alive: 5\r\n\r\nBODY",
                        &r),
                   NET_PARSE_DONE);
  assert_false(r.connect);
  assert_string_equal(r.host, "Files.example");
  assert_int_equal(r.port, 8080);
  char *forward = strndup(r.forward, r.forward_length);
  assert_string_equal(forward, "GET /a/b?q=1 HTTP/1.1\r\nAccept: */*\r\n"
                               "Host: Files.example:8080\r\nConnection: close\r\n\r\n");
  free(forward);
  net_http_request_clear(&r);
  assert_int_equal(http("POST HTTP://a.example HTTP/1.0\r\n\r\n", &r), NET_PARSE_DONE);
  assert_int_equal(r.port, 80);
  forward = strndup(r.forward, r.forward_length);
  assert_string_equal(forward, "POST / HTTP/1.1\r\nHost: a.example\r\nConnection: close\r\n\r\n");
  free(forward);
  net_http_request_clear(&r);
  assert_int_equal(http("GET http://a.example?x HTTP/1.1\r\n\r\n", &r), NET_PARSE_DONE);
  assert_true(memcmp(r.forward, "GET /?x HTTP/1.1\r\n", 18) == 0);
  net_http_request_clear(&r);
}

/* A head of bare-LF lines grows by a CR a line when rewritten: the shortest lines, at the
 * bound, fit (ASan watches the rewrite). */
static void test_forward_of_bare_lf_lines(void **state) {
  (void)state;
  char *head = malloc(NET_HEAD_MAX);
  size_t at = (size_t)sprintf(head, "GET http://a.example/ HTTP/1.1\n");
  while (at + 4 < NET_HEAD_MAX)
    at += (size_t)sprintf(head + at, "a:\n");
  head[at++] = '\n';
  struct net_http_request r;
  const char *why = NULL;
  assert_int_equal(net_http_parse((const uint8_t *)head, at, &r, &why), NET_PARSE_DONE);
  assert_true(r.forward_length > at);
  assert_true(memcmp(r.forward + r.forward_length - 4, "\r\n\r\n", 4) == 0);
  net_http_request_clear(&r);
  free(head);
}

static void test_head_bound(void **state) {
  (void)state;
  size_t size = NET_HEAD_MAX + 100;
  char *big = malloc(size + 1);
  strcpy(big, "CONNECT a.example:443 HTTP/1.1\r\n");
  size_t at = strlen(big);
  while (at + 20 < size)
    at += (size_t)sprintf(big + at, "X-Filler: %08zu\r\n", at);
  big[at] = 0;
  struct net_http_request r;
  const char *why = NULL;
  /* Short of the bound: more; at the bound without the blank line: refused. */
  assert_int_equal(net_http_parse((const uint8_t *)big, NET_HEAD_MAX - 1, &r, &why),
                   NET_PARSE_MORE);
  assert_int_equal(net_http_parse((const uint8_t *)big, NET_HEAD_MAX, &r, &why), NET_PARSE_BAD);
  assert_non_null(strstr(why, "16 KiB"));
  free(big);
}

static void test_socks5(void **state) {
  (void)state;
  size_t consumed = 0;
  const char *why = NULL;
  const uint8_t greeting[] = {5, 2, 2, 0};
  assert_int_equal(net_socks5_greeting(greeting, 3, &consumed, &why), NET_PARSE_MORE);
  assert_int_equal(net_socks5_greeting(greeting, 4, &consumed, &why), NET_PARSE_DONE);
  assert_int_equal(consumed, 4);
  const uint8_t password_only[] = {5, 1, 2};
  assert_int_equal(net_socks5_greeting(password_only, 3, &consumed, &why), NET_PARSE_BAD);
  const uint8_t socks4[] = {4, 1, 0, 80};
  assert_int_equal(net_socks5_greeting(socks4, 4, &consumed, &why), NET_PARSE_BAD);

  struct net_socks5_request r;
  uint8_t name[] = {5,   1,   0,   3,   11,  'a', 'p', 'i',  '.',
                    'e', 'x', 'a', 'm', 'p', 'l', 'e', 0x01, 0xbb};
  for (size_t n = 0; n < sizeof name; n++)
    assert_int_equal(net_socks5_parse(name, n, &r, &why), NET_PARSE_MORE);
  assert_int_equal(net_socks5_parse(name, sizeof name, &r, &why), NET_PARSE_DONE);
  assert_string_equal(r.host, "api.example");
  assert_int_equal(r.port, 443);
  assert_int_equal(r.consumed, sizeof name);
  const uint8_t v4[] = {5, 1, 0, 1, 127, 0, 0, 1, 0, 80};
  assert_int_equal(net_socks5_parse(v4, sizeof v4, &r, &why), NET_PARSE_DONE);
  assert_string_equal(r.host, "127.0.0.1");
  const uint8_t v6[] = {5, 1, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1, 0, 80};
  assert_int_equal(net_socks5_parse(v6, sizeof v6, &r, &why), NET_PARSE_DONE);
  assert_string_equal(r.host, "::ffff:127.0.0.1");
  const uint8_t bind[] = {5, 2, 0, 1, 1, 2, 3, 4, 0, 80};
  assert_int_equal(net_socks5_parse(bind, sizeof bind, &r, &why), NET_PARSE_BAD);
  assert_int_equal(r.refusal, NET_SOCKS5_COMMAND_UNSUPPORTED);
  const uint8_t atyp[] = {5, 1, 0, 9, 1, 2, 3, 4, 0, 80};
  assert_int_equal(net_socks5_parse(atyp, sizeof atyp, &r, &why), NET_PARSE_BAD);
  assert_int_equal(r.refusal, NET_SOCKS5_ADDRESS_UNSUPPORTED);
  const uint8_t nul[] = {5, 1, 0, 3, 3, 'a', 0, 'b', 0, 80};
  assert_int_equal(net_socks5_parse(nul, sizeof nul, &r, &why), NET_PARSE_BAD);
  const uint8_t empty[] = {5, 1, 0, 3, 0, 0, 80};
  assert_int_equal(net_socks5_parse(empty, sizeof empty, &r, &why), NET_PARSE_BAD);
  const uint8_t port0[] = {5, 1, 0, 1, 1, 2, 3, 4, 0, 0};
  assert_int_equal(net_socks5_parse(port0, sizeof port0, &r, &why), NET_PARSE_BAD);
  uint8_t reply[10];
  net_socks5_reply(NET_SOCKS5_NOT_ALLOWED, reply);
  const uint8_t expected[10] = {5, 2, 0, 1, 0, 0, 0, 0, 0, 0};
  assert_memory_equal(reply, expected, 10);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_connect),
      cmocka_unit_test(test_forward_rewrites_the_head),
      cmocka_unit_test(test_forward_of_bare_lf_lines),
      cmocka_unit_test(test_head_bound),
      cmocka_unit_test(test_socks5),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
