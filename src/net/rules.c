/* Parsing the egress rules and the pure decisions over them (rules.h). */
#include "net/rules.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/fs.h"

static inline void net_rules_freep(struct net_rules **r) {
  net_rules_free(*r);
}

int net_name_normalise(const char *name, char *out, const char **why) {
  size_t n = strlen(name);
  if (n && name[n - 1] == '.')
    n--;
  if (n == 0) {
    *why = "empty name";
    return -1;
  }
  if (n > NET_NAME_MAX) {
    *why = "name longer than 253 bytes";
    return -1;
  }
  size_t label = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)name[i];
    if (c == '.') {
      if (label == 0) {
        *why = "empty label";
        return -1;
      }
      label = 0;
    } else if (isalnum(c) || c == '-' || c == '_') {
      if (++label > 63) {
        *why = "label longer than 63 bytes";
        return -1;
      }
    } else {
      *why = "a byte other than letters, digits, '-', '_' and '.'";
      return -1;
    }
    out[i] = (char)tolower(c);
  }
  if (label == 0) {
    *why = "empty label";
    return -1;
  }
  out[n] = 0;
  return 0;
}

int net_domain_pattern_parse(const char *text, struct net_domain_pattern *out, const char **why) {
  memset(out, 0, sizeof *out);
  const char *name = text;
  if (text[0] == '*') {
    if (text[1] != '.') {
      *why = "a wildcard must be a whole first label, as in *.example.com";
      return -1;
    }
    out->subdomains = true;
    name = text + 2;
  }
  if (strchr(name, '*')) {
    *why = "a wildcard only as the first label";
    return -1;
  }
  struct net_addr ignored;
  if (net_addr_parse_literal(name, &ignored) != NET_LITERAL_NONE) {
    *why = "an IP address (open a range with --allow-cidr instead)";
    return -1;
  }
  if (net_name_normalise(name, out->name, why) < 0)
    return -1;
  if (out->subdomains && !strchr(out->name, '.')) {
    *why = "a wildcard over a whole top-level domain";
    return -1;
  }
  return 0;
}

bool net_domain_pattern_matches(const struct net_domain_pattern *pattern, const char *host) {
  if (!pattern->subdomains)
    return strcmp(pattern->name, host) == 0;
  size_t n = strlen(host), m = strlen(pattern->name);
  return n > m + 1 && host[n - m - 1] == '.' && strcmp(host + n - m, pattern->name) == 0;
}

int net_pin_parse(const char *text, struct net_pin *out, const char **why) {
  memset(out, 0, sizeof *out);
  const char *colon = strchr(text, ':');
  if (!colon || colon == text) {
    *why = "not NAME:ADDR";
    return -1;
  }
  char name[NET_NAME_MAX + 2];
  size_t length = (size_t)(colon - text);
  if (length >= sizeof name) {
    *why = "name longer than 253 bytes";
    return -1;
  }
  memcpy(name, text, length);
  name[length] = 0;
  struct net_addr ignored;
  if (net_addr_parse_literal(name, &ignored) != NET_LITERAL_NONE) {
    *why = "the name is an address";
    return -1;
  }
  if (net_name_normalise(name, out->name, why) < 0)
    return -1;
  const char *address = colon + 1;
  /* IPv6 goes in brackets (as in curl's --resolve), so a bare one is a likely mistake. */
  if (address[0] != '[' && strchr(address, ':')) {
    *why = "an IPv6 address goes in brackets, as in NAME:[::1]";
    return -1;
  }
  if (net_addr_parse_literal(address, &out->address) != NET_LITERAL_ADDRESS) {
    *why = "ADDR is not an IPv4 dotted quad or a bracketed IPv6 address";
    return -1;
  }
  return 0;
}

static size_t strv_length(const char *const *v) {
  size_t n = 0;
  while (v && v[n])
    n++;
  return n;
}

static int refuse(struct cordon_error **err, const char *flag, const char *text, const char *why) {
  return cordon_error_set(err, CORDON_ERR_USAGE, 0, "%s %s: %s", flag, text, why);
}

int net_rules_parse(const struct cordon_egress_rules *rules, struct net_rules **out,
                    struct cordon_error **err) {
  *out = NULL;
  struct net_rules *parsed = calloc(1, sizeof *parsed);
  if (!parsed)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "egress rules");
  size_t domains = rules ? strv_length(rules->allow_domains) : 0;
  size_t cidrs = rules ? strv_length(rules->allow_cidrs) : 0;
  size_t pins = rules ? strv_length(rules->resolve) : 0;
  parsed->domains = calloc(domains + 1, sizeof *parsed->domains);
  parsed->cidrs = calloc(cidrs + 1, sizeof *parsed->cidrs);
  parsed->pins = calloc(pins + 1, sizeof *parsed->pins);
  if (!parsed->domains || !parsed->cidrs || !parsed->pins) {
    net_rules_free(parsed);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "egress rules");
  }
  const char *why = NULL;
  for (size_t i = 0; i < domains; i++, parsed->domain_count++)
    if (net_domain_pattern_parse(rules->allow_domains[i], &parsed->domains[i], &why) < 0) {
      net_rules_free(parsed);
      return refuse(err, "--allow-domain", rules->allow_domains[i], why);
    }
  for (size_t i = 0; i < cidrs; i++, parsed->cidr_count++)
    if (net_cidr_parse(rules->allow_cidrs[i], &parsed->cidrs[i]) < 0) {
      net_rules_free(parsed);
      return refuse(err, "--allow-cidr", rules->allow_cidrs[i],
                    "not an address range (ADDR/PREFIX with no host bits set past PREFIX)");
    }
  for (size_t i = 0; i < pins; i++, parsed->pin_count++)
    if (net_pin_parse(rules->resolve[i], &parsed->pins[i], &why) < 0) {
      net_rules_free(parsed);
      return refuse(err, "--resolve", rules->resolve[i], why);
    }
  *out = parsed;
  return 0;
}

void net_rules_free(struct net_rules *rules) {
  if (!rules)
    return;
  free(rules->domains);
  free(rules->cidrs);
  free(rules->pins);
  free(rules);
}

/* ---- the daemon's copy ---------------------------------------------------------------------- */

struct rules_header {
  uint64_t domain_count, cidr_count, pin_count;
};

/* Far beyond any command line, and small enough that the arrays' sizes cannot overflow. */
#define RULES_MAX_ENTRIES (1u << 20)

int net_rules_save(const struct net_rules *rules, int fd, struct cordon_error **err) {
  struct rules_header h = {0, 0, 0};
  if (rules)
    h = (struct rules_header){rules->domain_count, rules->cidr_count, rules->pin_count};
  if (fs_write_all(fd, &h, sizeof h) < 0 ||
      (h.domain_count &&
       fs_write_all(fd, rules->domains, h.domain_count * sizeof *rules->domains) < 0) ||
      (h.cidr_count && fs_write_all(fd, rules->cidrs, h.cidr_count * sizeof *rules->cidrs) < 0) ||
      (h.pin_count && fs_write_all(fd, rules->pins, h.pin_count * sizeof *rules->pins) < 0))
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno ? errno : EIO,
                            "cannot hand the egress proxy its rules");
  return 0;
}

/* count entries of size bytes each at *offset, into a fresh array of count + 1 zeroed ones. */
static void *load_array(int fd, off_t *offset, uint64_t count, size_t size) {
  void *array = calloc(count + 1, size);
  if (!array)
    return NULL;
  size_t want = count * size;
  if (want && fs_pread_all(fd, array, want, (uint64_t)*offset) < 0) {
    free(array);
    return NULL;
  }
  *offset += (off_t)want;
  return array;
}

static bool terminated(const char *name, size_t size) {
  return memchr(name, 0, size) != NULL;
}

static bool family_known(const struct net_addr *a) {
  return a->family == AF_INET || a->family == AF_INET6;
}

int net_rules_load(int fd, struct net_rules **out, struct cordon_error **err) {
  *out = NULL;
  struct rules_header h;
  struct stat st;
  if (fs_pread_all(fd, &h, sizeof h, 0) < 0 || fstat(fd, &st) < 0 ||
      h.domain_count > RULES_MAX_ENTRIES || h.cidr_count > RULES_MAX_ENTRIES ||
      h.pin_count > RULES_MAX_ENTRIES)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                            "the egress rules handed over are malformed");
  uint64_t size = sizeof h + h.domain_count * sizeof(struct net_domain_pattern) +
                  h.cidr_count * sizeof(struct net_cidr) + h.pin_count * sizeof(struct net_pin);
  _cleanup_(net_rules_freep) struct net_rules *r = calloc(1, sizeof *r);
  if (!r || (uint64_t)st.st_size != size)
    return cordon_error_set(err, CORDON_ERR_INVALID, r ? 0 : ENOMEM,
                            "the egress rules handed over are malformed");
  off_t offset = sizeof h;
  r->domains = load_array(fd, &offset, h.domain_count, sizeof *r->domains);
  r->cidrs = load_array(fd, &offset, h.cidr_count, sizeof *r->cidrs);
  r->pins = load_array(fd, &offset, h.pin_count, sizeof *r->pins);
  if (!r->domains || !r->cidrs || !r->pins)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno ? errno : EIO, "egress rules");
  r->domain_count = h.domain_count;
  r->cidr_count = h.cidr_count;
  r->pin_count = h.pin_count;
  bool sound = true;
  for (size_t i = 0; i < r->domain_count; i++)
    sound &= terminated(r->domains[i].name, sizeof r->domains[i].name);
  for (size_t i = 0; i < r->cidr_count; i++)
    sound &= family_known(&r->cidrs[i].base) &&
             r->cidrs[i].prefix <= (r->cidrs[i].base.family == AF_INET ? 32u : 128u);
  for (size_t i = 0; i < r->pin_count; i++)
    sound &=
        terminated(r->pins[i].name, sizeof r->pins[i].name) && family_known(&r->pins[i].address);
  if (!sound)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                            "the egress rules handed over are malformed");
  *out = steal_ptr(&r);
  return 0;
}

static bool inside_allowed_range(const struct net_rules *rules, const struct net_addr *address) {
  for (size_t i = 0; rules && i < rules->cidr_count; i++)
    if (net_cidr_contains(&rules->cidrs[i], address))
      return true;
  return false;
}

void net_rules_check_target(const struct net_rules *rules, const char *host,
                            struct net_target *out) {
  memset(out, 0, sizeof *out);
  snprintf(out->host, sizeof out->host, "%s", host);
  switch (net_addr_parse_literal(host, &out->address)) {
  case NET_LITERAL_NONCANONICAL:
    snprintf(out->rule, sizeof out->rule, "%s", NET_RULE_NONCANONICAL);
    return;
  case NET_LITERAL_ADDRESS:
    /* A literal is refused by the rule that it is a literal, unless a range opens it: a
     * blocked class inside an opened range is what --allow-cidr means. */
    if (inside_allowed_range(rules, &out->address))
      out->kind = NET_TARGET_ADDRESS;
    else
      snprintf(out->rule, sizeof out->rule, "%s", NET_RULE_IP_LITERAL);
    return;
  case NET_LITERAL_NONE: break;
  }
  const char *why;
  if (net_name_normalise(host, out->host, &why) < 0) {
    snprintf(out->host, sizeof out->host, "%s", host);
    snprintf(out->rule, sizeof out->rule, "%s", NET_RULE_BAD_TARGET);
    return;
  }
  for (size_t i = 0; rules && i < rules->domain_count; i++)
    if (net_domain_pattern_matches(&rules->domains[i], out->host)) {
      out->kind = NET_TARGET_NAME;
      return;
    }
  snprintf(out->rule, sizeof out->rule, "%s", NET_RULE_NOT_ALLOWLISTED);
}

bool net_rules_check_address(const struct net_rules *rules, const struct net_addr *address,
                             char *rule, size_t rule_size) {
  enum net_addr_class class = net_addr_classify(address);
  if (class == NET_ADDR_PUBLIC || inside_allowed_range(rules, address))
    return true;
  snprintf(rule, rule_size, "%s:%s", NET_RULE_BLOCKED_RANGE, net_addr_class_name(class));
  return false;
}

size_t net_rules_pinned(const struct net_rules *rules, const char *host, struct net_addr *out,
                        size_t max) {
  size_t n = 0;
  for (size_t i = 0; rules && i < rules->pin_count && n < max; i++)
    if (strcmp(rules->pins[i].name, host) == 0)
      out[n++] = rules->pins[i].address;
  return n;
}
