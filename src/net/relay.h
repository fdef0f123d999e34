/* One direction of a relayed connection (the proxy's; tests/unit/test-net-relay.c): bytes move from
 * one socket to the other through a pipe with splice(2), so they never cross user space, and
 * the pipe's size is the direction's buffer bound: when it is full the reader stops reading
 * (backpressure), so a flooding peer costs a bounded amount of memory. A pipe starts small
 * (NET_DIRECTION_START) and grows, fourfold at a time up to the bound, each time it fills: a
 * bulk transfer gets a big pipe (fewer splices and wake-ups a byte), a chatty connection keeps
 * a small one, so many of them stay within a user's pipe-user-pages-soft. An EOF is passed on as
 * shutdown(SHUT_WR) once the pipe has drained (half-close). A few bytes of our own (a reply
 * line, a rewritten request head) go out first from `pending`. */
#ifndef CORDON_NET_RELAY_H
#define CORDON_NET_RELAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A pipe's first size. */
#define NET_DIRECTION_START (64u * 1024u)

struct net_direction {
  int from, to; /* sockets, not owned */
  int pipe[2];  /* owned */
  size_t capacity;
  size_t in_pipe;
  uint8_t *pending; /* owned, malloc'd */
  size_t pending_length, pending_at;
  bool pending_counted; /* whether pending is the peer's data (counted) or ours */
  bool eof;             /* `from` reached end of file */
  bool shut;            /* `to` was shut down for writing: this direction is done */
  uint64_t bytes;       /* bytes delivered to `to` */
  size_t max_capacity;  /* the bound the pipe may grow to */
  bool interrupted;     /* a splice returned EINTR: it had blocked (a socket whose O_NONBLOCK
                           someone else cleared) until a signal ended it */
};

/* Opens the pipe, at most capacity bytes (rounded up by the kernel) once grown. 0, or -1 with
 * errno. */
int net_direction_open(struct net_direction *d, int from, int to, size_t capacity);
void net_direction_close(struct net_direction *d);
/* Takes ownership of bytes (malloc'd) to send before anything relayed. */
void net_direction_prepend(struct net_direction *d, uint8_t *bytes, size_t length, bool counted);
/* Moves what can move without blocking. 1 when a byte moved, 0 when none, -1 on a socket error
 * (the connection is dead). */
int net_direction_pump(struct net_direction *d);
bool net_direction_wants_read(const struct net_direction *d);
bool net_direction_wants_write(const struct net_direction *d);

#endif
