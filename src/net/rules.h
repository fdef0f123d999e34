/* The rules of egress class `restricted` once parsed (struct net_rules, proxy.h): the domain
 * allowlist, the --allow-cidr ranges and the --resolve pins, and the pure decisions the proxy
 * makes with them. No sockets here; the proxy asks, then acts.
 *
 * Domain patterns: "example.com" matches that name only; "*.example.com" matches every name
 * below it and never the apex. Case-insensitive (ASCII only: IDNA names are compared as the
 * punycode the client sends), one trailing dot ignored. Refused at parse: "*" alone, a wildcard
 * over a single label ("*.com": it would open a whole top-level domain), a wildcard anywhere but
 * the first label, an IP address (that is what --allow-cidr is for), empty labels, labels over
 * 63 bytes, names over 253, and bytes other than letters, digits, '-' and '_'. */
#ifndef CORDON_NET_RULES_H
#define CORDON_NET_RULES_H

#include <stdbool.h>
#include <stddef.h>

#include "net/addr.h"
#include "net/proxy.h"

#define NET_NAME_MAX 253

struct net_domain_pattern {
  bool subdomains; /* "*.NAME" */
  char name[NET_NAME_MAX + 1];
};

struct net_pin {
  char name[NET_NAME_MAX + 1];
  struct net_addr address;
};

struct net_rules {
  struct net_domain_pattern *domains;
  size_t domain_count;
  struct net_cidr *cidrs;
  size_t cidr_count;
  struct net_pin *pins;
  size_t pin_count;
};

/* Lower-cases name into out[NET_NAME_MAX + 1], drops one trailing dot, checks the syntax
 * above; 0, or -1 with *why set to a static phrase. */
int net_name_normalise(const char *name, char *out, const char **why);
int net_domain_pattern_parse(const char *text, struct net_domain_pattern *out, const char **why);
/* host: already normalised. */
bool net_domain_pattern_matches(const struct net_domain_pattern *pattern, const char *host);
/* "NAME:ADDR", ADDR an IPv4 dotted quad or an IPv6 address in brackets ("[::1]"), as curl's
 * --resolve spells it without the port. */
int net_pin_parse(const char *text, struct net_pin *out, const char **why);

/* The parsed rules as bytes, for the egress daemon (net/daemon.c), which is the same build
 * exec'd afresh: three counts, then the three arrays as they lie in memory. save writes them
 * at fd's offset; load reads them from offset 0 of fd (a memfd), checks every count against
 * the bytes there and every name for its NUL, and allocates *out. 0, or -1 with err set. */
int net_rules_save(const struct net_rules *rules, int fd, struct cordon_error **err);
int net_rules_load(int fd, struct net_rules **out, struct cordon_error **err);

/* The rule names that refusals carry (events, the 403 reason line, docs/formats.md). */
#define NET_RULE_BAD_TARGET "bad-target"
#define NET_RULE_NONCANONICAL "non-canonical-literal"
#define NET_RULE_IP_LITERAL "ip-literal"
#define NET_RULE_NOT_ALLOWLISTED "not-allowlisted"
#define NET_RULE_BLOCKED_RANGE "blocked-range" /* written "blocked-range:CLASS" */
#define NET_RULE_RESOLVE_FAILED "resolve-failed"
#define NET_RULE_CONNECT_FAILED "connect-failed"
#define NET_RULE_BAD_REQUEST "bad-request"
#define NET_RULE_TOO_MANY "too-many-connections"
#define NET_RULE_TIMEOUT "timeout"
#define NET_RULE_BAD_HANDOFF "bad-handoff" /* not one connected TCP socket (handoff.h) */

enum net_target_kind {
  NET_TARGET_REFUSED = 0,
  NET_TARGET_NAME,    /* an allowed name: resolve it (pins first), then check each address */
  NET_TARGET_ADDRESS, /* an IP literal inside an --allow-cidr range: connect to it */
};

struct net_target {
  enum net_target_kind kind;
  char host[NET_NAME_MAX + 1]; /* normalised name, or the literal as given */
  struct net_addr address;     /* NET_TARGET_ADDRESS */
  char rule[48];               /* NET_TARGET_REFUSED: the rule, e.g. "ip-literal" */
};

/* The first decision, on the target as the client named it. rules may be NULL. */
void net_rules_check_target(const struct net_rules *rules, const char *host,
                            struct net_target *out);
/* The second, on each resolved address: true when the proxy may connect to it; else rule gets
 * "blocked-range:CLASS". */
bool net_rules_check_address(const struct net_rules *rules, const struct net_addr *address,
                             char *rule, size_t rule_size);
/* The pinned addresses of a normalised name, in the order given; returns how many (up to max). */
size_t net_rules_pinned(const struct net_rules *rules, const char *host, struct net_addr *out,
                        size_t max);

#endif
