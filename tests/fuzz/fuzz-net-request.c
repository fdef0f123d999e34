/* libFuzzer target for the egress proxy's parsers of untrusted input (src/net/): what a
 * sandboxed client sends (HTTP heads, SOCKS5 greetings and requests) and the target names and
 * rule strings that reach the address and domain rules. Invariants checked beyond "no crash":
 *   - a parsed head never claims more bytes than it was given, and a rewritten plain-HTTP
 *     head starts with the method and ends with the blank line;
 *   - a refused target names a rule, an allowed literal is inside the opened range;
 *   - no literal the parser accepts as canonical classifies as public when it is loopback. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/request.h"
#include "net/rules.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_http(const uint8_t *data, size_t size) {
  struct net_http_request r;
  const char *why = NULL;
  if (net_http_parse(data, size, &r, &why) != NET_PARSE_DONE)
    return;
  if (r.consumed > size || r.port == 0 || !r.host[0])
    abort();
  if (r.forward &&
      (r.forward_length < 4 || memcmp(r.forward + r.forward_length - 4, "\r\n\r\n", 4) != 0))
    abort();
  net_http_request_clear(&r);
}

static void check_socks5(const uint8_t *data, size_t size) {
  size_t consumed = 0;
  const char *why = NULL;
  if (net_socks5_greeting(data, size, &consumed, &why) != NET_PARSE_DONE)
    return;
  if (consumed > size)
    abort();
  struct net_socks5_request r;
  if (net_socks5_parse(data + consumed, size - consumed, &r, &why) == NET_PARSE_DONE &&
      (r.consumed > size - consumed || r.port == 0))
    abort();
}

static void check_target(const char *text, const struct net_rules *rules) {
  struct net_target t;
  net_rules_check_target(rules, text, &t);
  if (t.kind == NET_TARGET_REFUSED && !t.rule[0])
    abort();
  if (t.kind == NET_TARGET_ADDRESS && net_addr_classify(&t.address) != NET_ADDR_LOOPBACK)
    abort(); /* the rules below open 127.0.0.0/8 only */
  struct net_domain_pattern pattern;
  struct net_pin pin;
  struct net_cidr cidr;
  const char *why;
  if (net_domain_pattern_parse(text, &pattern, &why) == 0 && pattern.subdomains &&
      !strchr(pattern.name, '.'))
    abort();
  (void)net_pin_parse(text, &pin, &why);
  (void)net_cidr_parse(text, &cidr);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  check_http(data, size);
  check_socks5(data, size);
  char *text = malloc(size + 1);
  if (!text)
    return 0;
  memcpy(text, data, size);
  text[size] = 0;
  static struct net_rules *rules;
  if (!rules) {
    static const char *const domains[] = {"example.com", "*.pkg.example", NULL};
    static const char *const cidrs[] = {"127.0.0.0/8", NULL};
    struct cordon_egress_rules r = {domains, cidrs, NULL};
    struct cordon_error *err = NULL;
    if (net_rules_parse(&r, &rules, &err) < 0)
      abort();
  }
  check_target(text, rules);
  free(text);
  return 0;
}
