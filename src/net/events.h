/* The proxy's decisions as event lines (docs/formats.md, "egress events"): one JSON object per
 * line, written with one write(2) to the session's events.jsonl (opened O_APPEND, so lines from
 * other writers never interleave inside one). A refused request is written when refused; an
 * allowed one when its connection closes, with the bytes each way. */
#ifndef CORDON_NET_EVENTS_H
#define CORDON_NET_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
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

/* A session's decisions summed by kind (decision and rule), for the project's event log when
 * the session ends (obs/events.h, verb "egress"). Kinds past NET_SUMMARY_MAX, and rules that are
 * not a short printable word, are summed under rule "other". */
#define NET_SUMMARY_MAX 32
#define NET_SUMMARY_RULE_MAX 48

struct net_summary_kind {
  bool refused;
  char rule[NET_SUMMARY_RULE_MAX]; /* "" when allowed */
  uint64_t count, bytes_out, bytes_in;
};

struct net_summary {
  struct net_summary_kind kinds[NET_SUMMARY_MAX];
  size_t count;
};

/* Adds one line of a session's egress log (without its newline): 1 when it was a decision, 0
 * when it was another line (an egress.error, a torn line). Pure. */
int net_summary_add_line(struct net_summary *summary, const char *line, size_t length);

/* The line, newline included (malloc'd), or NULL when out of memory. */
char *net_event_format(const struct net_event *event);
/* Formats and appends; a failed write is dropped (the proxy keeps serving). */
void net_event_write(int fd, const struct net_event *event);

#endif
