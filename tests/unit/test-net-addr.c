/* Address classes of the egress proxy (src/net/addr.c): every blocked range, its IPv6 forms,
 * odd spellings of literals, and --allow-cidr ranges. Pure: no address is ever dialled. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "net/addr.h"

static enum net_addr_class class_of(const char *text) {
  struct net_addr a;
  assert_int_equal(net_addr_parse_literal(text, &a), NET_LITERAL_ADDRESS);
  return net_addr_classify(&a);
}

static void test_ipv4_classes(void **state) {
  (void)state;
  assert_int_equal(class_of("127.0.0.1"), NET_ADDR_LOOPBACK);
  assert_int_equal(class_of("127.255.255.254"), NET_ADDR_LOOPBACK);
  assert_int_equal(class_of("10.0.0.1"), NET_ADDR_PRIVATE);
  assert_int_equal(class_of("172.16.0.1"), NET_ADDR_PRIVATE);
  assert_int_equal(class_of("172.31.255.255"), NET_ADDR_PRIVATE);
  assert_int_equal(class_of("172.32.0.1"), NET_ADDR_PUBLIC);
  assert_int_equal(class_of("172.15.255.255"), NET_ADDR_PUBLIC);
  assert_int_equal(class_of("192.168.1.1"), NET_ADDR_PRIVATE);
  assert_int_equal(class_of("169.254.169.254"), NET_ADDR_LINK_LOCAL);
  assert_int_equal(class_of("169.254.0.1"), NET_ADDR_LINK_LOCAL);
  assert_int_equal(class_of("100.64.0.1"), NET_ADDR_CGNAT);
  assert_int_equal(class_of("100.127.255.255"), NET_ADDR_CGNAT);
  assert_int_equal(class_of("100.128.0.1"), NET_ADDR_PUBLIC);
  assert_int_equal(class_of("100.63.255.255"), NET_ADDR_PUBLIC);
  assert_int_equal(class_of("224.0.0.1"), NET_ADDR_MULTICAST);
  assert_int_equal(class_of("239.255.255.250"), NET_ADDR_MULTICAST);
  assert_int_equal(class_of("255.255.255.255"), NET_ADDR_BROADCAST);
  assert_int_equal(class_of("240.0.0.1"), NET_ADDR_RESERVED);
  assert_int_equal(class_of("0.0.0.0"), NET_ADDR_UNSPECIFIED);
  assert_int_equal(class_of("0.1.2.3"), NET_ADDR_UNSPECIFIED);
  assert_int_equal(class_of("8.8.8.8"), NET_ADDR_PUBLIC);
  assert_int_equal(class_of("93.184.216.34"), NET_ADDR_PUBLIC);
}

static void test_ipv6_classes(void **state) {
  (void)state;
  assert_int_equal(class_of("::1"), NET_ADDR_LOOPBACK);
  assert_int_equal(class_of("[::1]"), NET_ADDR_LOOPBACK);
  assert_int_equal(class_of("::"), NET_ADDR_UNSPECIFIED);
  assert_int_equal(class_of("fe80::1"), NET_ADDR_LINK_LOCAL);
  assert_int_equal(class_of("febf::1"), NET_ADDR_LINK_LOCAL);
  assert_int_equal(class_of("fd00:ec2::254"), NET_ADDR_UNIQUE_LOCAL);
  assert_int_equal(class_of("fc00::1"), NET_ADDR_UNIQUE_LOCAL);
  assert_int_equal(class_of("fec0::1"), NET_ADDR_UNIQUE_LOCAL);
  assert_int_equal(class_of("ff02::1"), NET_ADDR_MULTICAST);
  assert_int_equal(class_of("2001:db8::1"), NET_ADDR_PUBLIC);
  assert_int_equal(class_of("2606:4700::1111"), NET_ADDR_PUBLIC);
  assert_int_equal(class_of("2001:0:4136:e378::1"), NET_ADDR_RESERVED); /* Teredo */
  assert_int_equal(class_of("64:ff9b:1::1"), NET_ADDR_RESERVED);
}

/* Every IPv6 form that carries an IPv4 address is classed by that address. */
static void test_embedded_ipv4(void **state) {
  (void)state;
  assert_int_equal(class_of("::ffff:127.0.0.1"), NET_ADDR_LOOPBACK);
  assert_int_equal(class_of("::ffff:7f00:1"), NET_ADDR_LOOPBACK);
  assert_int_equal(class_of("::ffff:169.254.169.254"), NET_ADDR_LINK_LOCAL);
  assert_int_equal(class_of("::ffff:10.1.2.3"), NET_ADDR_PRIVATE);
  assert_int_equal(class_of("::ffff:100.64.1.1"), NET_ADDR_CGNAT);
  assert_int_equal(class_of("::ffff:224.0.0.1"), NET_ADDR_MULTICAST);
  assert_int_equal(class_of("::ffff:255.255.255.255"), NET_ADDR_BROADCAST);
  assert_int_equal(class_of("::ffff:0.0.0.0"), NET_ADDR_UNSPECIFIED);
  assert_int_equal(class_of("::ffff:8.8.8.8"), NET_ADDR_PUBLIC);
  assert_int_equal(class_of("::127.0.0.1"), NET_ADDR_LOOPBACK);
  assert_int_equal(class_of("::169.254.169.254"), NET_ADDR_LINK_LOCAL);
  assert_int_equal(class_of("64:ff9b::7f00:1"), NET_ADDR_LOOPBACK);
  assert_int_equal(class_of("64:ff9b::a9fe:a9fe"), NET_ADDR_LINK_LOCAL);
  assert_int_equal(class_of("2002:7f00:1::"), NET_ADDR_LOOPBACK);
  assert_int_equal(class_of("2002:c0a8:101::1"), NET_ADDR_PRIVATE);
  assert_int_equal(class_of("2002:808:808::1"), NET_ADDR_PUBLIC);
}

static void test_odd_spellings_refused(void **state) {
  (void)state;
  struct net_addr a;
  const char *odd[] = {
      "2130706433",   "0177.0.0.1",    "0x7f.1",       "127.1",        "0x7f000001",
      "127.0.0.1.",   "127.000.0.1",   "017700000001", "127.0.1",      "0",
      "0x",           "169.254.43518", "1.2.3.4.5",    "example.0x10", "256.1.1.1",
      "fe80::1%eth0", "[::1",          "::1]",         "1::2::3",      "[]"};
  for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
    if (net_addr_parse_literal(odd[i], &a) != NET_LITERAL_NONCANONICAL)
      fail_msg("%s was not refused as a non-canonical literal", odd[i]);
  }
  const char *names[] = {"example.com", "a1.example",      "1password.com", "x.0a",
                         "localhost",   "123.example.com", "0x.example"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (net_addr_parse_literal(names[i], &a) != NET_LITERAL_NONE)
      fail_msg("%s was taken for a literal", names[i]);
}

static void test_cidr(void **state) {
  (void)state;
  struct net_cidr range;
  struct net_addr a;
  assert_int_equal(net_cidr_parse("127.0.0.0/8", &range), 0);
  assert_int_equal(net_addr_parse_literal("127.0.0.2", &a), NET_LITERAL_ADDRESS);
  assert_true(net_cidr_contains(&range, &a));
  assert_int_equal(net_addr_parse_literal("::ffff:127.0.0.1", &a), NET_LITERAL_ADDRESS);
  assert_true(net_cidr_contains(&range, &a)); /* the mapped form is in the IPv4 range */
  assert_int_equal(net_addr_parse_literal("128.0.0.1", &a), NET_LITERAL_ADDRESS);
  assert_false(net_cidr_contains(&range, &a));
  assert_int_equal(net_cidr_parse("fd00::/8", &range), 0);
  assert_int_equal(net_addr_parse_literal("fd00:ec2::254", &a), NET_LITERAL_ADDRESS);
  assert_true(net_cidr_contains(&range, &a));
  assert_int_equal(net_addr_parse_literal("fc00::1", &a), NET_LITERAL_ADDRESS);
  assert_false(net_cidr_contains(&range, &a));
  assert_int_equal(net_cidr_parse("10.1.0.0/17", &range), 0);
  assert_int_equal(net_addr_parse_literal("10.1.127.255", &a), NET_LITERAL_ADDRESS);
  assert_true(net_cidr_contains(&range, &a));
  assert_int_equal(net_addr_parse_literal("10.1.128.0", &a), NET_LITERAL_ADDRESS);
  assert_false(net_cidr_contains(&range, &a));
  assert_int_equal(net_cidr_parse("192.0.2.7", &range), 0);
  assert_int_equal(range.prefix, 32);
  assert_int_equal(net_cidr_parse("0.0.0.0/0", &range), 0);
  assert_int_equal(net_cidr_parse("::/0", &range), 0);
  const char *bad[] = {"10.1.0.1/16",  "10.0.0.0/33", "::/129",    "10.0.0.0/",     "/8", "10/8",
                       "0x0a.0.0.0/8", "10.0.0.0/08", "[::1]/128", "example.com/8", ""};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    if (net_cidr_parse(bad[i], &range) == 0)
      fail_msg("--allow-cidr %s was accepted", bad[i]);
}

static void test_sockaddr_round_trip(void **state) {
  (void)state;
  struct net_addr a, back;
  struct sockaddr_storage storage;
  char text[NET_ADDR_TEXT];
  assert_int_equal(net_addr_parse_literal("::ffff:127.0.0.2", &a), NET_LITERAL_ADDRESS);
  net_addr_to_sockaddr(&a, 443, &storage);
  assert_int_equal(storage.ss_family, AF_INET); /* mapped becomes plain IPv4 to connect */
  assert_true(net_addr_from_sockaddr((struct sockaddr *)&storage, &back));
  net_addr_format(&back, text);
  assert_string_equal(text, "127.0.0.2");
  assert_int_equal(net_addr_parse_literal("2001:db8::1", &a), NET_LITERAL_ADDRESS);
  net_addr_to_sockaddr(&a, 80, &storage);
  assert_int_equal(storage.ss_family, AF_INET6);
  assert_string_equal(net_addr_class_name(NET_ADDR_LINK_LOCAL), "link-local");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ipv4_classes),  cmocka_unit_test(test_ipv6_classes),
      cmocka_unit_test(test_embedded_ipv4), cmocka_unit_test(test_odd_spellings_refused),
      cmocka_unit_test(test_cidr),          cmocka_unit_test(test_sockaddr_round_trip),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
