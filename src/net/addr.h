/* Address classes of the egress proxy: which ranges stay blocked even for an allowed name, the
 * strict IP-literal reader, and --allow-cidr ranges. Pure: no sockets, no resolver.
 *
 * An IPv6 address that embeds an IPv4 one (::ffff:a.b.c.d mapped, ::a.b.c.d compatible,
 * 64:ff9b::/96 NAT64, 2002::/16 6to4) is classed by the IPv4 address it carries, so no
 * spelling of 127.0.0.1 or 169.254.169.254 lands outside its class. */
#ifndef CORDON_NET_ADDR_H
#define CORDON_NET_ADDR_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#define NET_ADDR_TEXT 64 /* room for any address net_addr_format writes */

struct net_addr {
  int family;        /* AF_INET or AF_INET6 */
  uint8_t bytes[16]; /* network order; an IPv4 address uses the first 4 */
};

/* NET_ADDR_PUBLIC is the only class the proxy connects to without an --allow-cidr range. */
enum net_addr_class {
  NET_ADDR_PUBLIC = 0,
  NET_ADDR_LOOPBACK,     /* 127/8, ::1 */
  NET_ADDR_PRIVATE,      /* RFC 1918 */
  NET_ADDR_LINK_LOCAL,   /* 169.254/16 (cloud metadata), fe80::/10 */
  NET_ADDR_CGNAT,        /* 100.64/10 */
  NET_ADDR_UNIQUE_LOCAL, /* fc00::/7 (fd00:ec2::254 included), fec0::/10 site-local */
  NET_ADDR_MULTICAST,    /* 224/4, ff00::/8 */
  NET_ADDR_BROADCAST,    /* 255.255.255.255 */
  NET_ADDR_UNSPECIFIED,  /* 0.0.0.0/8 ("this network"), :: */
  NET_ADDR_RESERVED,     /* 240/4, and IPv6 forms that carry no usable address */
};

enum net_addr_class net_addr_classify(const struct net_addr *address);
/* "public", "loopback", "private", "link-local", "cgnat", "unique-local", "multicast",
 * "broadcast", "unspecified", "reserved". */
const char *net_addr_class_name(enum net_addr_class class);

/* How a target host string reads as an address. */
enum net_literal {
  NET_LITERAL_NONE = 0,     /* a name: resolve it */
  NET_LITERAL_ADDRESS,      /* a canonical dotted quad, or IPv6 (brackets optional) */
  NET_LITERAL_NONCANONICAL, /* a number the resolver would read as IPv4 (2130706433, 0177.0.0.1,
                               0x7f.1, 127.1, a trailing dot): refused outright */
};
enum net_literal net_addr_parse_literal(const char *host, struct net_addr *out);

/* Writes the usual text form (inet_ntop) into text[NET_ADDR_TEXT]. */
void net_addr_format(const struct net_addr *address, char *text);
/* To a sockaddr for connect(2): an IPv4-mapped IPv6 address becomes plain IPv4. Returns the
 * length used in storage. */
socklen_t net_addr_to_sockaddr(const struct net_addr *address, uint16_t port,
                               struct sockaddr_storage *storage);
/* From a resolver result; false for a family other than AF_INET/AF_INET6. */
bool net_addr_from_sockaddr(const struct sockaddr *sa, struct net_addr *out);
/* The IPv4 address an IPv6 one carries (mapped, compatible, NAT64, 6to4); false when none. */
bool net_addr_embedded_ipv4(const struct net_addr *address, struct net_addr *out);

struct net_cidr {
  struct net_addr base; /* host bits cleared */
  unsigned prefix;
};

/* "10.1.0.0/16", "fd00::/8", a bare address (a /32 or /128). Host bits set past the prefix
 * are refused (a typo is likelier than intent); 0 on success, -1 when malformed. */
int net_cidr_parse(const char *text, struct net_cidr *out);
/* Whether the range holds the address; an IPv6 address that embeds an IPv4 one is also
 * checked, by that IPv4 address, against IPv4 ranges. */
bool net_cidr_contains(const struct net_cidr *range, const struct net_addr *address);

#endif
