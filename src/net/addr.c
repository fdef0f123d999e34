/* Address classes, strict literals and --allow-cidr ranges (addr.h). Pure. */
#include "net/addr.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static enum net_addr_class classify_ipv4(const uint8_t *b) {
  if (b[0] == 0)
    return NET_ADDR_UNSPECIFIED;
  if (b[0] == 127)
    return NET_ADDR_LOOPBACK;
  if (b[0] == 10 || (b[0] == 172 && (b[1] & 0xf0) == 16) || (b[0] == 192 && b[1] == 168))
    return NET_ADDR_PRIVATE;
  if (b[0] == 169 && b[1] == 254)
    return NET_ADDR_LINK_LOCAL;
  if (b[0] == 100 && (b[1] & 0xc0) == 64)
    return NET_ADDR_CGNAT;
  if ((b[0] & 0xf0) == 224)
    return NET_ADDR_MULTICAST;
  if (b[0] == 255 && b[1] == 255 && b[2] == 255 && b[3] == 255)
    return NET_ADDR_BROADCAST;
  if ((b[0] & 0xf0) == 240)
    return NET_ADDR_RESERVED;
  return NET_ADDR_PUBLIC;
}

static bool all_zero(const uint8_t *b, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (b[i])
      return false;
  return true;
}

bool net_addr_embedded_ipv4(const struct net_addr *address, struct net_addr *out) {
  if (address->family != AF_INET6)
    return false;
  const uint8_t *b = address->bytes;
  static const uint8_t nat64[12] = {0x00, 0x64, 0xff, 0x9b};
  size_t at;
  if (all_zero(b, 10) && b[10] == 0xff && b[11] == 0xff)
    at = 12; /* ::ffff:a.b.c.d, mapped */
  else if (all_zero(b, 12) && !all_zero(b + 12, 3))
    at = 12; /* ::a.b.c.d, compatible (not :: or ::1, which have three zero bytes first) */
  else if (memcmp(b, nat64, 12) == 0)
    at = 12; /* 64:ff9b::a.b.c.d, NAT64 well-known prefix */
  else if (b[0] == 0x20 && b[1] == 0x02)
    at = 2; /* 2002:aabb:ccdd::, 6to4 */
  else
    return false;
  out->family = AF_INET;
  memset(out->bytes, 0, sizeof out->bytes);
  memcpy(out->bytes, b + at, 4);
  return true;
}

enum net_addr_class net_addr_classify(const struct net_addr *address) {
  const uint8_t *b = address->bytes;
  if (address->family == AF_INET)
    return classify_ipv4(b);
  if (address->family != AF_INET6)
    return NET_ADDR_RESERVED;
  struct net_addr v4;
  if (net_addr_embedded_ipv4(address, &v4))
    return classify_ipv4(v4.bytes);
  if (all_zero(b, 16))
    return NET_ADDR_UNSPECIFIED;
  if (all_zero(b, 15) && b[15] == 1)
    return NET_ADDR_LOOPBACK;
  if (b[0] == 0xff)
    return NET_ADDR_MULTICAST;
  if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80)
    return NET_ADDR_LINK_LOCAL;
  if ((b[0] == 0xfe && (b[1] & 0xc0) == 0xc0) || (b[0] & 0xfe) == 0xfc)
    return NET_ADDR_UNIQUE_LOCAL;
  /* 64:ff9b:1::/48 (local-use NAT64, translation not fixed), 2001:0::/32 (Teredo, whose client
   * address is obfuscated) and ::/8 beyond the forms above carry addresses we cannot class. */
  if (b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b)
    return NET_ADDR_RESERVED;
  if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0)
    return NET_ADDR_RESERVED;
  if (b[0] == 0)
    return NET_ADDR_RESERVED;
  return NET_ADDR_PUBLIC;
}

const char *net_addr_class_name(enum net_addr_class class) {
  static const char *const names[] = {
      [NET_ADDR_PUBLIC] = "public",
      [NET_ADDR_LOOPBACK] = "loopback",
      [NET_ADDR_PRIVATE] = "private",
      [NET_ADDR_LINK_LOCAL] = "link-local",
      [NET_ADDR_CGNAT] = "cgnat",
      [NET_ADDR_UNIQUE_LOCAL] = "unique-local",
      [NET_ADDR_MULTICAST] = "multicast",
      [NET_ADDR_BROADCAST] = "broadcast",
      [NET_ADDR_UNSPECIFIED] = "unspecified",
      [NET_ADDR_RESERVED] = "reserved",
  };
  return (unsigned)class < sizeof names / sizeof names[0] ? names[class] : "reserved";
}

/* A canonical dotted quad: four decimal parts 0..255, no leading zeros, nothing else. */
static bool parse_dotted_quad(const char *text, uint8_t *out) {
  const char *p = text;
  for (int part = 0; part < 4; part++) {
    if (!isdigit((unsigned char)*p))
      return false;
    unsigned value = 0, digits = 0;
    const char *start = p;
    while (isdigit((unsigned char)*p) && digits < 4) {
      value = value * 10 + (unsigned)(*p - '0');
      p++;
      digits++;
    }
    if (digits > 3 || value > 255 || (digits > 1 && *start == '0'))
      return false;
    out[part] = (uint8_t)value;
    if (part < 3 && *p++ != '.')
      return false;
  }
  return *p == 0;
}

/* Whether the resolver would take the name as a number: its last label (after one trailing
 * dot) is all decimal digits or 0x-hex. No top-level domain is numeric, so nothing real is
 * lost by refusing these. */
static bool looks_numeric(const char *host) {
  size_t n = strlen(host);
  if (n && host[n - 1] == '.')
    n--;
  size_t start = n;
  while (start > 0 && host[start - 1] != '.')
    start--;
  if (start == n)
    return false;
  const char *label = host + start;
  size_t length = n - start;
  size_t i = 0;
  bool hex = length > 2 && label[0] == '0' && (label[1] == 'x' || label[1] == 'X');
  if (hex)
    i = 2;
  else if (length == 2 && label[0] == '0' && (label[1] == 'x' || label[1] == 'X'))
    return true; /* "0x" alone: inet_aton reads it as 0 */
  for (; i < length; i++)
    if (hex ? !isxdigit((unsigned char)label[i]) : !isdigit((unsigned char)label[i]))
      return false;
  return true;
}

enum net_literal net_addr_parse_literal(const char *host, struct net_addr *out) {
  memset(out, 0, sizeof *out);
  size_t n = strlen(host);
  if (n && (host[0] == '[' || strchr(host, ':'))) {
    char inner[64];
    const char *text = host;
    if (host[0] == '[') {
      if (n < 3 || host[n - 1] != ']' || n - 2 >= sizeof inner)
        return NET_LITERAL_NONCANONICAL;
      memcpy(inner, host + 1, n - 2);
      inner[n - 2] = 0;
      text = inner;
    }
    /* No zone ids (fe80::1%eth0): inet_pton refuses them, and so do we. */
    if (inet_pton(AF_INET6, text, out->bytes) != 1)
      return NET_LITERAL_NONCANONICAL;
    out->family = AF_INET6;
    return NET_LITERAL_ADDRESS;
  }
  if (parse_dotted_quad(host, out->bytes)) {
    out->family = AF_INET;
    return NET_LITERAL_ADDRESS;
  }
  memset(out, 0, sizeof *out);
  return looks_numeric(host) ? NET_LITERAL_NONCANONICAL : NET_LITERAL_NONE;
}

void net_addr_format(const struct net_addr *address, char *text) {
  if (!inet_ntop(address->family == AF_INET ? AF_INET : AF_INET6, address->bytes, text,
                 NET_ADDR_TEXT))
    snprintf(text, NET_ADDR_TEXT, "?");
}

socklen_t net_addr_to_sockaddr(const struct net_addr *address, uint16_t port,
                               struct sockaddr_storage *storage) {
  memset(storage, 0, sizeof *storage);
  const uint8_t *b = address->bytes;
  bool mapped = address->family == AF_INET6 && all_zero(b, 10) && b[10] == 0xff && b[11] == 0xff;
  if (address->family == AF_INET || mapped) {
    struct sockaddr_in *in = (struct sockaddr_in *)storage;
    in->sin_family = AF_INET;
    in->sin_port = htons(port);
    memcpy(&in->sin_addr, mapped ? b + 12 : b, 4);
    return sizeof *in;
  }
  struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)storage;
  in6->sin6_family = AF_INET6;
  in6->sin6_port = htons(port);
  memcpy(&in6->sin6_addr, b, 16);
  return sizeof *in6;
}

bool net_addr_from_sockaddr(const struct sockaddr *sa, struct net_addr *out) {
  memset(out, 0, sizeof *out);
  if (sa->sa_family == AF_INET) {
    out->family = AF_INET;
    memcpy(out->bytes, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    return true;
  }
  if (sa->sa_family == AF_INET6) {
    out->family = AF_INET6;
    memcpy(out->bytes, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
    return true;
  }
  return false;
}

int net_cidr_parse(const char *text, struct net_cidr *out) {
  memset(out, 0, sizeof *out);
  char address[64];
  const char *slash = strchr(text, '/');
  size_t length = slash ? (size_t)(slash - text) : strlen(text);
  if (length == 0 || length >= sizeof address)
    return -1;
  memcpy(address, text, length);
  address[length] = 0;
  if (net_addr_parse_literal(address, &out->base) != NET_LITERAL_ADDRESS || address[0] == '[')
    return -1;
  unsigned bits = out->base.family == AF_INET ? 32 : 128;
  out->prefix = bits;
  if (slash) {
    const char *p = slash + 1;
    if (!isdigit((unsigned char)*p) || (p[0] == '0' && p[1]))
      return -1;
    char *end;
    unsigned long prefix = strtoul(p, &end, 10);
    if (*end || prefix > bits)
      return -1;
    out->prefix = (unsigned)prefix;
  }
  for (unsigned bit = out->prefix; bit < bits; bit++)
    if (out->base.bytes[bit / 8] & (0x80u >> (bit % 8)))
      return -1;
  return 0;
}

static bool prefix_equal(const uint8_t *a, const uint8_t *b, unsigned prefix) {
  unsigned whole = prefix / 8;
  if (memcmp(a, b, whole) != 0)
    return false;
  unsigned rest = prefix % 8;
  if (rest == 0)
    return true;
  uint8_t mask = (uint8_t)(0xffu << (8 - rest));
  return (a[whole] & mask) == (b[whole] & mask);
}

bool net_cidr_contains(const struct net_cidr *range, const struct net_addr *address) {
  if (range->base.family == address->family)
    return prefix_equal(range->base.bytes, address->bytes, range->prefix);
  struct net_addr v4;
  if (range->base.family == AF_INET && net_addr_embedded_ipv4(address, &v4))
    return prefix_equal(range->base.bytes, v4.bytes, range->prefix);
  return false;
}
