/* The proxy's decisions as event lines (docs/formats.md, "egress events"): one JSON object per
 * line, written with one write(2) to the session's events.jsonl (opened O_APPEND, so lines from
 * other writers never interleave inside one). A refused request is written when refused; an
 * allowed one when its connection closes, with the bytes each way. */
#ifndef CORDON_NET_EVENTS_H
#define CORDON_NET_EVENTS_H

#include <stdint.h>

struct net_event {
  const char *protocol; /* "connect", "http", "socks5", or NULL before the client said */
  const char *host;     /* NULL: not known */
  unsigned port;        /* 0: not known */
  const char *address;  /* the address connected to; NULL: none */
  const char *rule;     /* NULL: allowed; else the refusing rule (rules.h) */
  uint64_t bytes_out;   /* client to destination */
  uint64_t bytes_in;    /* destination to client */
  int64_t time_ms;      /* wall clock, milliseconds since the epoch */
};

/* The line, newline included (malloc'd), or NULL when out of memory. */
char *net_event_format(const struct net_event *event);
/* Formats and appends; a failed write is dropped (the proxy keeps serving). */
void net_event_write(int fd, const struct net_event *event);

#endif
