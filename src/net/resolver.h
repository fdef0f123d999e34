/* Name resolution off the proxy's loop: a few worker threads call getaddrinfo(3), so a slow
 * DNS server delays the names it is asked about and nobody else. Results come back through a
 * pipe the loop polls, one fixed-size record per lookup (under PIPE_BUF, so atomic). */
#ifndef CORDON_NET_RESOLVER_H
#define CORDON_NET_RESOLVER_H

#include <stdint.h>

#include "net/addr.h"

#define NET_RESOLVE_MAX 16 /* addresses kept per name, in the resolver's order */

struct net_resolution {
  uint32_t slot, generation; /* echoed from the request, to find (or miss) the connection */
  int error;                 /* a getaddrinfo EAI_* code, 0 on success */
  uint32_t count;
  struct net_addr addresses[NET_RESOLVE_MAX];
};

struct net_resolver;

/* 0, or -1 with errno. queue bounds the lookups waiting for a worker. */
int net_resolver_start(unsigned workers, unsigned queue, struct net_resolver **out);
/* Readable when a result is waiting. */
int net_resolver_fd(const struct net_resolver *resolver);
/* 0, or -1 when the queue is full (the caller refuses the request rather than wait). */
int net_resolver_submit(struct net_resolver *resolver, uint32_t slot, uint32_t generation,
                        const char *host);
/* 1 with a result, 0 when none is waiting. */
int net_resolver_take(struct net_resolver *resolver, struct net_resolution *out);
/* Stops and joins the workers (a lookup in progress finishes first). */
void net_resolver_stop(struct net_resolver *resolver);

#endif
