/* Egress class `restricted`: a proxy outside the sandbox and a bridge inside it.
 *
 * The sandbox's network namespace has only loopback. Its 127.0.0.1:NET_BRIDGE_PORT reaches
 * the proxy, which cordon runs on the host side for exactly as long as the session: on ns the
 * proxy serves that listening socket itself; on docker a bridge inside accepts and hands each
 * client's socket over the proxy's unix socket (net/handoff.h). Either way the proxy reads the
 * client's own socket and relays it: one relay a byte. The proxy speaks HTTP CONNECT,
 * plain-HTTP forwarding and SOCKS5 (remote name resolution), resolves names itself, and checks the
 * resolved address (never the name alone) against the rules before it connects: loopback, private,
 * link-local, CGNAT, unique-local, multicast and broadcast stay blocked, even for an allowed name,
 * unless an allow_cidrs range opens them. Every decision is one line in the session's event log.
 *
 * Pure parts (rules, address classes, request parsing) sit apart from the serving loop so they
 * are tested without a network; the serving loop is one process, confined before it serves. */
#ifndef CORDON_NET_PROXY_H
#define CORDON_NET_PROXY_H

#include <stdbool.h>
#include <stddef.h>

#include <cordon/backend.h>
#include <cordon/error.h>

/* The port the bridge listens on inside the sandbox, and the proxy variables set for the
 * command: HTTP_PROXY, HTTPS_PROXY, ALL_PROXY (socks5h://) and their lower-case twins, and
 * NO_PROXY=localhost,127.0.0.1. */
#define NET_BRIDGE_PORT 3128

/* Parsed, validated rules (allowlist, opened ranges, pinned names). */
struct net_rules;

/* Validate and parse every entry; the first bad one is a one-line error naming it (EINVAL).
 * rules may be NULL (nothing allowed). */
int net_rules_parse(const struct cordon_egress_rules *rules, struct net_rules **out,
                    struct cordon_error **err);
void net_rules_free(struct net_rules *rules);

/* The environment the command gets under `restricted` (KEY=VALUE, NULL-terminated, static). */
extern const char *const net_proxy_environment[];

struct net_proxy_options {
  const struct net_rules *rules;
  int events_fd;            /* the session's events.jsonl, opened O_APPEND; -1: none */
  unsigned max_connections; /* 0: the default bound */
  int connect_timeout_ms;   /* 0: default */
  int idle_timeout_ms;      /* a connection with no byte either way this long is closed */
  size_t buffer_bytes;      /* per direction per connection; 0: default */
  int header_timeout_ms;    /* a client that has not sent a whole request head by then is
                               refused (rule "timeout"); 0: default (10 s) */
  bool handoff;             /* listen_fd is a unix socket whose every client hands over one
                               client's TCP socket (net/handoff.h) instead of speaking itself;
                               anything else it sends is refused (rule "bad-handoff");
                               the calling thread then gets SIGALRM every 200 ms while it
                               serves (a no-op handler, installed without SA_RESTART: the
                               watchdog of proxy.c) */
};

/* Serve proxy requests arriving on listen_fd (a listening unix stream socket) until stop_fd
 * becomes readable or hangs up (the session ended). Runs in the calling process, which the
 * caller has made the proxy's own (forked, confined). Bounded connections, timeouts and
 * buffers: a client that stalls or floods it delays nobody else. */
int net_proxy_serve(const struct net_proxy_options *o, int listen_fd, int stop_fd,
                    struct cordon_error **err);

/* Inside the sandbox's network namespace: accept on listen_fd (TCP, 127.0.0.1:NET_BRIDGE_PORT)
 * and hand each accepted socket to the proxy (a proxy serving with `handoff`) over a fresh
 * connection to its unix socket, which connect_proxy opens (it returns a connected fd or -1
 * with errno); the bridge keeps no byte of it. Until stop_fd becomes readable or hangs up. */
int net_bridge_serve(int listen_fd, int (*connect_proxy)(void *arg), void *arg, int stop_fd,
                     struct cordon_error **err);

/* Confines the calling process (the proxy's own, before net_proxy_serve): no new privileges,
 * and a seccomp filter refusing (EPERM) what a proxy never needs: exec, ptrace and other
 * processes' memory, mount and namespace calls, module and kexec loading, bpf, keyrings,
 * perf, userfaultfd, open_by_handle_at, reboot and clock changes. Files stay readable:
 * getaddrinfo reads /etc/hosts, /etc/resolv.conf and /etc/nsswitch.conf (and may load NSS
 * modules); limiting the file system is the caller's (a mount namespace). */
int net_proxy_confine(struct cordon_error **err);

#endif
