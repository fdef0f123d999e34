/* The egress rules (src/net/rules.c): domain patterns, --resolve pins, --allow-cidr, and the
 * two decisions (on the target as named, on each resolved address), and the event line. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sys/mman.h>
#include <unistd.h>

#include "net/events.h"
#include "net/rules.h"

static bool pattern_matches(const char *pattern, const char *host) {
  struct net_domain_pattern p;
  const char *why = NULL;
  assert_int_equal(net_domain_pattern_parse(pattern, &p, &why), 0);
  char normal[NET_NAME_MAX + 1];
  if (net_name_normalise(host, normal, &why) < 0)
    return false;
  return net_domain_pattern_matches(&p, normal);
}

static void test_domain_patterns(void **state) {
  (void)state;
  assert_true(pattern_matches("example.com", "example.com"));
  assert_true(pattern_matches("example.com", "EXAMPLE.com."));
  assert_true(pattern_matches("Example.COM.", "example.com"));
  assert_false(pattern_matches("example.com", "www.example.com"));
  assert_false(pattern_matches("example.com", "example.com.evil.net"));
  assert_false(pattern_matches("example.com", "badexample.com"));
  assert_true(pattern_matches("*.example.com", "www.example.com"));
  assert_true(pattern_matches("*.example.com", "a.b.EXAMPLE.com."));
  assert_false(pattern_matches("*.example.com", "example.com")); /* never the apex */
  assert_false(pattern_matches("*.example.com", "badexample.com"));
  assert_false(pattern_matches("*.example.com", ".example.com"));
  assert_true(pattern_matches("*.co.uk", "bbc.co.uk"));
  assert_true(pattern_matches("xn--bcher-kva.example", "XN--BCHER-KVA.example"));
  const char *bad[] = {"*",
                       "*.",
                       "*.com",
                       "**.example.com",
                       "w*.example.com",
                       "a.*.example.com",
                       "*example.com",
                       "",
                       ".",
                       "a..b",
                       ".example.com",
                       "exa mple.com",
                       "ex/ample.com",
                       "127.0.0.1",
                       "::1",
                       "2130706433",
                       "bücher.example"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    struct net_domain_pattern p;
    const char *why = NULL;
    if (net_domain_pattern_parse(bad[i], &p, &why) == 0)
      fail_msg("--allow-domain '%s' was accepted", bad[i]);
    assert_non_null(why);
  }
  char long_label[80];
  memset(long_label, 'a', 64);
  strcpy(long_label + 64, ".com");
  struct net_domain_pattern p;
  const char *why;
  assert_int_equal(net_domain_pattern_parse(long_label, &p, &why), -1);
}

static void test_pins(void **state) {
  (void)state;
  struct net_pin pin;
  const char *why;
  char text[NET_ADDR_TEXT];
  assert_int_equal(net_pin_parse("Api.Example.com:127.0.0.2", &pin, &why), 0);
  assert_string_equal(pin.name, "api.example.com");
  net_addr_format(&pin.address, text);
  assert_string_equal(text, "127.0.0.2");
  assert_int_equal(net_pin_parse("v6.example:[::ffff:127.0.0.1]", &pin, &why), 0);
  assert_int_equal(pin.address.family, AF_INET6);
  const char *bad[] = {"example.com",
                       ":1.2.3.4",
                       "example.com:",
                       "example.com:::1",
                       "example.com:0177.0.0.1",
                       "example.com:127.1",
                       "1.2.3.4:1.2.3.4",
                       "exa mple:1.2.3.4",
                       "example.com:[::1"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    if (net_pin_parse(bad[i], &pin, &why) == 0)
      fail_msg("--resolve '%s' was accepted", bad[i]);
}

static struct net_rules *rules_of(const char *const *domains, const char *const *cidrs,
                                  const char *const *pins) {
  struct cordon_egress_rules r = {domains, cidrs, pins};
  struct net_rules *out = NULL;
  struct cordon_error *err = NULL;
  assert_int_equal(net_rules_parse(&r, &out, &err), 0);
  return out;
}

static void test_parse_errors_name_the_entry(void **state) {
  (void)state;
  const char *domains[] = {"ok.example", "*.com", NULL};
  struct cordon_egress_rules r = {domains, NULL, NULL};
  struct net_rules *out = NULL;
  struct cordon_error *err = NULL;
  assert_true(net_rules_parse(&r, &out, &err) < 0);
  assert_null(out);
  assert_non_null(strstr(err->message, "--allow-domain *.com"));
  cordon_error_free(err);
  err = NULL;
  const char *cidrs[] = {"10.0.0.1/8", NULL};
  struct cordon_egress_rules r2 = {NULL, cidrs, NULL};
  assert_true(net_rules_parse(&r2, &out, &err) < 0);
  assert_non_null(strstr(err->message, "--allow-cidr 10.0.0.1/8"));
  cordon_error_free(err);
  err = NULL;
  const char *pins[] = {"x.example:nope", NULL};
  struct cordon_egress_rules r3 = {NULL, NULL, pins};
  assert_true(net_rules_parse(&r3, &out, &err) < 0);
  assert_non_null(strstr(err->message, "--resolve x.example:nope"));
  cordon_error_free(err);
  /* NULL rules: a valid, empty rule set. */
  err = NULL;
  assert_int_equal(net_rules_parse(NULL, &out, &err), 0);
  struct net_target t;
  net_rules_check_target(out, "example.com", &t);
  assert_int_equal(t.kind, NET_TARGET_REFUSED);
  net_rules_free(out);
}

static void test_decisions(void **state) {
  (void)state;
  const char *domains[] = {"api.example.com", "*.pkg.example", NULL};
  const char *cidrs[] = {"127.0.0.0/8", NULL};
  const char *pins[] = {"api.example.com:127.0.0.2", "api.example.com:10.0.0.1", NULL};
  struct net_rules *open = rules_of(domains, cidrs, pins);
  struct net_rules *closed = rules_of(domains, NULL, pins);
  struct net_target t;
  net_rules_check_target(closed, "API.example.com.", &t);
  assert_int_equal(t.kind, NET_TARGET_NAME);
  assert_string_equal(t.host, "api.example.com");
  net_rules_check_target(closed, "other.example.com", &t);
  assert_int_equal(t.kind, NET_TARGET_REFUSED);
  assert_string_equal(t.rule, "not-allowlisted");
  net_rules_check_target(closed, "pkg.example", &t);
  assert_string_equal(t.rule, "not-allowlisted");
  net_rules_check_target(closed, "a.pkg.example", &t);
  assert_int_equal(t.kind, NET_TARGET_NAME);
  net_rules_check_target(closed, "127.0.0.1", &t);
  assert_string_equal(t.rule, "ip-literal");
  net_rules_check_target(closed, "8.8.8.8", &t);
  assert_string_equal(t.rule, "ip-literal"); /* public, but a literal all the same */
  net_rules_check_target(open, "127.0.0.1", &t);
  assert_int_equal(t.kind, NET_TARGET_ADDRESS);
  net_rules_check_target(open, "[::ffff:127.0.0.1]", &t);
  assert_int_equal(t.kind, NET_TARGET_ADDRESS);
  net_rules_check_target(open, "2130706433", &t);
  assert_string_equal(t.rule, "non-canonical-literal");
  net_rules_check_target(open, "0x7f.1", &t);
  assert_string_equal(t.rule, "non-canonical-literal");
  net_rules_check_target(open, "bad_name!", &t);
  assert_string_equal(t.rule, "bad-target");

  struct net_addr pinned[4];
  assert_int_equal(net_rules_pinned(closed, "api.example.com", pinned, 4), 2);
  assert_int_equal(net_rules_pinned(closed, "a.pkg.example", pinned, 4), 0);
  char rule[48];
  struct net_addr a;
  net_addr_parse_literal("127.0.0.2", &a);
  assert_false(net_rules_check_address(closed, &a, rule, sizeof rule));
  assert_string_equal(rule, "blocked-range:loopback");
  assert_true(net_rules_check_address(open, &a, rule, sizeof rule));
  net_addr_parse_literal("::ffff:127.0.0.1", &a);
  assert_false(net_rules_check_address(closed, &a, rule, sizeof rule));
  assert_string_equal(rule, "blocked-range:loopback");
  assert_true(net_rules_check_address(open, &a, rule, sizeof rule));
  net_addr_parse_literal("169.254.169.254", &a);
  assert_false(net_rules_check_address(open, &a, rule, sizeof rule));
  assert_string_equal(rule, "blocked-range:link-local");
  net_addr_parse_literal("fd00:ec2::254", &a);
  assert_false(net_rules_check_address(open, &a, rule, sizeof rule));
  assert_string_equal(rule, "blocked-range:unique-local");
  net_addr_parse_literal("93.184.216.34", &a);
  assert_true(net_rules_check_address(closed, &a, rule, sizeof rule));
  net_rules_free(open);
  net_rules_free(closed);
}

static void test_event_line(void **state) {
  (void)state;
  struct net_event e = {.protocol = "connect",
                        .host = "api.example.com",
                        .port = 443,
                        .address = "127.0.0.2",
                        .rule = NULL,
                        .bytes_out = 10,
                        .bytes_in = 20,
                        .time_ms = 1700000000123};
  char *line = net_event_format(&e);
  assert_string_equal(line, "{\"time\":\"2023-11-14T22:13:20.123Z\",\"kind\":\"egress\","
                            "\"protocol\":\"connect\",\"host\":\"api.example.com\",\"port\":443,"
                            "\"address\":\"127.0.0.2\",\"decision\":\"allowed\",\"rule\":null,"
                            "\"bytes_out\":10,\"bytes_in\":20}\n");
  free(line);
  struct net_event refused = {.protocol = "socks5",
                              .host = "bad\x01\xffname",
                              .port = 80,
                              .rule = "not-allowlisted",
                              .time_ms = 0};
  line = net_event_format(&refused);
  assert_non_null(strstr(line, "\"host\":\"bad??name\""));
  assert_non_null(strstr(line, "\"address\":null,\"decision\":\"refused\","
                               "\"rule\":\"not-allowlisted\""));
  free(line);
}

/* The daemon's copy (net_rules_save, net_rules_load): the same decisions after the round trip;
 * a copy cut short, padded, with a count past its bytes or a name without its NUL is refused. */
static int saved_rules(const struct net_rules *rules) {
  int fd = memfd_create("test-rules", MFD_CLOEXEC);
  assert_true(fd >= 0);
  struct cordon_error *err = NULL;
  assert_int_equal(net_rules_save(rules, fd, &err), 0);
  return fd;
}

static void assert_load_refused(int fd) {
  struct net_rules *loaded = (struct net_rules *)1;
  struct cordon_error *err = NULL;
  assert_int_equal(net_rules_load(fd, &loaded, &err), -1);
  assert_null(loaded);
  assert_non_null(strstr(err->message, "malformed"));
  cordon_error_free(err);
}

static void test_rules_round_trip(void **state) {
  (void)state;
  const char *domains[] = {"example.com", "*.api.test", NULL};
  const char *cidrs[] = {"10.1.0.0/16", "fd00::/8", NULL};
  const char *pins[] = {"pinned.test:127.0.0.2", "six.test:[::1]", NULL};
  struct cordon_egress_rules text = {
      .allow_domains = domains, .allow_cidrs = cidrs, .resolve = pins};
  struct net_rules *rules = NULL, *loaded = NULL;
  struct cordon_error *err = NULL;
  assert_int_equal(net_rules_parse(&text, &rules, &err), 0);
  int fd = saved_rules(rules);
  assert_int_equal(net_rules_load(fd, &loaded, &err), 0);
  assert_int_equal(loaded->domain_count, 2);
  assert_int_equal(loaded->cidr_count, 2);
  assert_int_equal(loaded->pin_count, 2);
  const char *hosts[] = {"example.com", "x.api.test", "api.test",
                         "other.test",  "10.1.2.3",   "10.2.0.1"};
  for (size_t i = 0; i < sizeof hosts / sizeof *hosts; i++) {
    struct net_target a, b;
    net_rules_check_target(rules, hosts[i], &a);
    net_rules_check_target(loaded, hosts[i], &b);
    assert_int_equal(a.kind, b.kind);
    assert_string_equal(a.rule, b.rule);
  }
  struct net_addr pinned[4];
  assert_int_equal(net_rules_pinned(loaded, "six.test", pinned, 4), 1);
  assert_int_equal(pinned[0].family, AF_INET6);
  net_rules_free(loaded);

  /* Cut short, then padded by a byte. */
  off_t size = lseek(fd, 0, SEEK_END);
  assert_int_equal(ftruncate(fd, size - 1), 0);
  assert_load_refused(fd);
  assert_int_equal(ftruncate(fd, size + 1), 0);
  assert_load_refused(fd);
  assert_int_equal(ftruncate(fd, size), 0);
  /* A name with no NUL in its whole field. */
  size_t field = sizeof rules->domains[0].name;
  char *fill = malloc(field);
  memset(fill, 'a', field);
  assert_int_equal(
      pwrite(fd, fill, field, 3 * sizeof(uint64_t) + offsetof(struct net_domain_pattern, name)),
      (ssize_t)field);
  free(fill);
  assert_load_refused(fd);
  close(fd);
  /* A count past the bytes there, and a count too large to allocate. */
  fd = saved_rules(rules);
  uint64_t count = 3;
  assert_int_equal(pwrite(fd, &count, sizeof count, 0), (ssize_t)sizeof count);
  assert_load_refused(fd);
  count = UINT64_MAX / 2;
  assert_int_equal(pwrite(fd, &count, sizeof count, 0), (ssize_t)sizeof count);
  assert_load_refused(fd);
  close(fd);
  /* No rules at all: nothing allowed, as with NULL. */
  fd = saved_rules(NULL);
  assert_int_equal(net_rules_load(fd, &loaded, &err), 0);
  assert_int_equal(loaded->domain_count + loaded->cidr_count + loaded->pin_count, 0);
  net_rules_free(loaded);
  close(fd);
  net_rules_free(rules);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_domain_patterns),
      cmocka_unit_test(test_pins),
      cmocka_unit_test(test_parse_errors_name_the_entry),
      cmocka_unit_test(test_decisions),
      cmocka_unit_test(test_event_line),
      cmocka_unit_test(test_rules_round_trip),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
