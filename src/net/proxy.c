/* The egress proxy's serving loop (proxy.h): one thread on epoll, a slot per connection, each
 * slot a small state machine:
 *
 *   [HANDOFF ->] HEAD (HTTP head or SOCKS5 greeting+request) -> RESOLVING -> CONNECTING ->
 *   RELAYING;  refused: reply, DRAINING (read and discard until EOF or 2 s) -> free
 *
 * HANDOFF (options.handoff): the slot holds a unix connection from the bridge until the client's
 * own TCP socket arrives on it (handoff.h); then the slot serves that socket. Such a socket's
 * open file is shared with the sandbox, which may clear its O_NONBLOCK: every recv and send
 * says MSG_DONTWAIT, and a watchdog signal every TICK_MS ends a splice that blocks anyway (the
 * connection is then closed), so one client cannot hold the loop.
 *
 * Names go to resolver threads; addresses (resolved, pinned or literal) are checked one by one
 * before each connect, and a blocked one is skipped, never tried. Every wait has a deadline,
 * the slots are a fixed array (a client beyond them is closed at once), and each direction of
 * a relayed connection is bounded by its pipe (relay.h). */
#include "net/proxy.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "net/events.h"
#include "net/handoff.h"
#include "net/relay.h"
#include "net/request.h"
#include "net/resolver.h"
#include "net/rules.h"

#define DEFAULT_MAX_CONNECTIONS 128u
#define DEFAULT_CONNECT_TIMEOUT_MS 10000
#define DEFAULT_IDLE_TIMEOUT_MS 300000
#define DEFAULT_HEADER_TIMEOUT_MS 10000
#define DEFAULT_BUFFER_BYTES (1024u * 1024u)
#define DRAIN_MS 2000
#define RESOLVER_WORKERS 4u
#define TICK_MS 200

/* epoll data: a slot's index, or one of these. */
#define TAG_LISTEN UINT64_MAX
#define TAG_STOP (UINT64_MAX - 1)
#define TAG_RESOLVER (UINT64_MAX - 2)
#define TAG_UPSTREAM (1ull << 32) /* or'ed with the slot: the upstream socket's events */

enum conn_state {
  CONN_FREE = 0,
  CONN_HEAD,
  CONN_RESOLVING,
  CONN_CONNECTING,
  CONN_RELAYING,
  CONN_DRAINING,
  CONN_HANDOFF,
};

enum conn_protocol { PROTO_UNKNOWN = 0, PROTO_CONNECT, PROTO_HTTP, PROTO_SOCKS5 };

struct conn {
  enum conn_state state;
  enum conn_protocol protocol;
  uint32_t generation;
  int client, upstream;
  uint32_t client_mask, upstream_mask; /* epoll interest now; UINT32_MAX: not registered */
  uint8_t *head;
  size_t head_length;
  bool greeted; /* SOCKS5: the greeting was answered */
  char host[NET_HOST_MAX + 3];
  uint16_t port;
  struct net_addr candidates[NET_RESOLVE_MAX];
  size_t candidate_count, candidate_next;
  bool attempted; /* a connect was tried (so failing is connect-failed, not blocked-range) */
  char blocked_rule[48];
  char address[NET_ADDR_TEXT];
  uint8_t *prefix; /* client bytes for upstream before the relay: rewritten head, leftovers */
  size_t prefix_length;
  int64_t deadline, last_activity;
  struct net_direction up, down; /* client->upstream, upstream->client */
  bool handed;                   /* client came by handoff: its open file is the sandbox's too */
};

struct proxy {
  const struct net_proxy_options *o;
  int epoll;
  struct conn *conns;
  unsigned max;
  struct net_resolver *resolver;
  int connect_timeout, idle_timeout, header_timeout;
  size_t buffer_bytes;
};

static int64_t now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static int64_t wall_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static const char *protocol_name(enum conn_protocol p) {
  return p == PROTO_CONNECT  ? "connect"
         : p == PROTO_HTTP   ? "http"
         : p == PROTO_SOCKS5 ? "socks5"
                             : NULL;
}

static void log_decision(struct proxy *p, struct conn *c, const char *rule) {
  struct net_event e = {
      .protocol = protocol_name(c->protocol),
      .host = c->host[0] ? c->host : NULL,
      .port = c->port,
      .address = c->address[0] ? c->address : NULL,
      .rule = rule,
      .bytes_out = c->up.bytes,
      .bytes_in = c->down.bytes,
      .time_ms = wall_ms(),
  };
  net_event_write(p->o->events_fd, &e);
}

/* Interest: EPOLL_CTL_ADD the first time, MOD when it changes; UINT32_MAX stays unregistered. */
static void watch(struct proxy *p, int fd, uint64_t tag, uint32_t *current, uint32_t mask) {
  if (fd < 0 || *current == mask || *current == UINT32_MAX - 1)
    return;
  struct epoll_event ev = {.events = mask, .data.u64 = tag};
  int op = *current == UINT32_MAX ? EPOLL_CTL_ADD : EPOLL_CTL_MOD;
  if (epoll_ctl(p->epoll, op, fd, &ev) == 0)
    *current = mask;
}

static void update_interest(struct proxy *p, struct conn *c, unsigned slot) {
  uint32_t client = 0, upstream = 0;
  switch (c->state) {
  case CONN_HANDOFF:
  case CONN_HEAD:
  case CONN_DRAINING: client = EPOLLIN; break;
  case CONN_CONNECTING: upstream = EPOLLOUT; break;
  case CONN_RELAYING:
    client = (net_direction_wants_read(&c->up) ? EPOLLIN : 0) |
             (net_direction_wants_write(&c->down) ? EPOLLOUT : 0);
    upstream = (net_direction_wants_read(&c->down) ? EPOLLIN : 0) |
               (net_direction_wants_write(&c->up) ? EPOLLOUT : 0);
    break;
  default: break;
  }
  watch(p, c->client, slot, &c->client_mask, client);
  watch(p, c->upstream, TAG_UPSTREAM | slot, &c->upstream_mask, upstream);
}

static void close_upstream(struct proxy *p, struct conn *c) {
  if (c->upstream < 0)
    return;
  if (c->upstream_mask != UINT32_MAX)
    epoll_ctl(p->epoll, EPOLL_CTL_DEL, c->upstream, NULL);
  close(c->upstream);
  c->upstream = -1;
  c->upstream_mask = UINT32_MAX;
}

static void free_conn(struct proxy *p, struct conn *c) {
  close_upstream(p, c);
  if (c->client >= 0) {
    /* Before close: an open file shared with the sandbox stays in the epoll set after our
     * close while the sandbox holds it, and its events would reach this slot's next owner. */
    if (c->client_mask != UINT32_MAX)
      epoll_ctl(p->epoll, EPOLL_CTL_DEL, c->client, NULL);
    if (c->handed)
      net_handoff_close(c->client);
    else
      close(c->client);
  }
  net_direction_close(&c->up);
  net_direction_close(&c->down);
  free(c->head);
  free(c->prefix);
  uint32_t generation = c->generation + 1;
  memset(c, 0, sizeof *c);
  c->generation = generation;
  c->client = c->upstream = -1;
  c->up.pipe[0] = c->up.pipe[1] = c->down.pipe[0] = c->down.pipe[1] = -1;
}

/* The end of an allowed connection: its event, with the bytes each way. */
static void finish(struct proxy *p, struct conn *c) {
  log_decision(p, c, NULL);
  free_conn(p, c);
}

static void send_small(int fd, const void *bytes, size_t length) {
  /* A reply of a few hundred bytes to a socket whose buffer is empty: one send suffices, and
   * a client that does not read it loses only its own reply. */
  ssize_t ignored = send(fd, bytes, length, MSG_NOSIGNAL | MSG_DONTWAIT);
  (void)ignored;
}

/* Refuses with the rule: the reply the protocol expects, the event, then drain and close. */
static void refuse(struct proxy *p, struct conn *c, unsigned slot, const char *rule,
                   int http_status, uint8_t socks_code) {
  log_decision(p, c, rule);
  close_upstream(p, c);
  if (c->protocol == PROTO_SOCKS5 && c->greeted) {
    uint8_t reply[10];
    net_socks5_reply(socks_code, reply);
    send_small(c->client, reply, sizeof reply);
  } else if (c->protocol == PROTO_CONNECT || c->protocol == PROTO_HTTP ||
             (c->protocol == PROTO_UNKNOWN && http_status)) {
    const char *status = http_status == 403   ? "403 Forbidden"
                         : http_status == 400 ? "400 Bad Request"
                         : http_status == 504 ? "504 Gateway Timeout"
                         : http_status == 408 ? "408 Request Timeout"
                                              : "502 Bad Gateway";
    char body[400], reply[700];
    snprintf(body, sizeof body, "cordon egress: refused %.260s:%u by rule %s\n",
             c->host[0] ? c->host : "?", c->port, rule);
    int n = snprintf(reply, sizeof reply,
                     "HTTP/1.1 %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
                     "X-Cordon-Egress-Rule: %s\r\nConnection: close\r\n\r\n%s",
                     status, strlen(body), rule, body);
    send_small(c->client, reply, (size_t)n);
  }
  shutdown(c->client, SHUT_WR);
  c->state = CONN_DRAINING;
  c->deadline = now_ms() + DRAIN_MS;
  update_interest(p, c, slot);
}

static void start_relay(struct proxy *p, struct conn *c, unsigned slot) {
  net_addr_format(&c->candidates[c->candidate_next - 1], c->address);
  int one = 1;
  setsockopt(c->upstream, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (net_direction_open(&c->up, c->client, c->upstream, p->buffer_bytes) < 0 ||
      net_direction_open(&c->down, c->upstream, c->client, p->buffer_bytes) < 0) {
    refuse(p, c, slot, NET_RULE_CONNECT_FAILED, 502, NET_SOCKS5_GENERAL_FAILURE);
    return;
  }
  if (c->prefix_length)
    net_direction_prepend(&c->up, steal_ptr(&c->prefix), c->prefix_length, true);
  static const char established[] = "HTTP/1.1 200 Connection established\r\n\r\n";
  uint8_t *reply = NULL;
  size_t reply_length = 0;
  if (c->protocol == PROTO_CONNECT) {
    reply_length = sizeof established - 1;
    reply = malloc(reply_length);
    if (reply)
      memcpy(reply, established, reply_length);
  } else if (c->protocol == PROTO_SOCKS5) {
    reply_length = 10;
    reply = malloc(reply_length);
    if (reply)
      net_socks5_reply(NET_SOCKS5_SUCCEEDED, reply);
  }
  if (reply_length && !reply) {
    refuse(p, c, slot, NET_RULE_CONNECT_FAILED, 502, NET_SOCKS5_GENERAL_FAILURE);
    return;
  }
  if (reply)
    net_direction_prepend(&c->down, reply, reply_length, false);
  c->state = CONN_RELAYING;
  c->last_activity = now_ms();
  update_interest(p, c, slot);
}

/* Tries the next allowed candidate; refuses when none is left. */
static void connect_next(struct proxy *p, struct conn *c, unsigned slot) {
  close_upstream(p, c);
  while (c->candidate_next < c->candidate_count) {
    const struct net_addr *a = &c->candidates[c->candidate_next++];
    if (!net_rules_check_address(p->o->rules, a, c->blocked_rule, sizeof c->blocked_rule))
      continue;
    struct sockaddr_storage storage;
    socklen_t length = net_addr_to_sockaddr(a, c->port, &storage);
    c->attempted = true;
    c->upstream = socket(storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->upstream < 0)
      continue;
    c->upstream_mask = UINT32_MAX;
    if (connect(c->upstream, (struct sockaddr *)&storage, length) == 0) {
      start_relay(p, c, slot);
      return;
    }
    if (errno == EINPROGRESS) {
      c->state = CONN_CONNECTING;
      c->deadline = now_ms() + p->connect_timeout;
      update_interest(p, c, slot);
      return;
    }
    close_upstream(p, c);
  }
  if (c->attempted)
    refuse(p, c, slot, NET_RULE_CONNECT_FAILED, 502, NET_SOCKS5_CONNECTION_REFUSED);
  else
    refuse(p, c, slot, c->blocked_rule[0] ? c->blocked_rule : NET_RULE_RESOLVE_FAILED, 403,
           NET_SOCKS5_NOT_ALLOWED);
}

static void connect_done(struct proxy *p, struct conn *c, unsigned slot) {
  int error = 0;
  socklen_t length = sizeof error;
  if (getsockopt(c->upstream, SOL_SOCKET, SO_ERROR, &error, &length) < 0)
    error = errno;
  if (error == 0)
    start_relay(p, c, slot);
  else
    connect_next(p, c, slot);
}

/* The head is whole: host, port and protocol are known. The first decision is on the name. */
static void decide(struct proxy *p, struct conn *c, unsigned slot) {
  struct net_target target;
  net_rules_check_target(p->o->rules, c->host, &target);
  if (target.kind == NET_TARGET_REFUSED) {
    refuse(p, c, slot, target.rule, 403, NET_SOCKS5_NOT_ALLOWED);
    return;
  }
  if (target.kind == NET_TARGET_ADDRESS) {
    c->candidates[0] = target.address;
    c->candidate_count = 1;
    connect_next(p, c, slot);
    return;
  }
  snprintf(c->host, sizeof c->host, "%s", target.host);
  c->candidate_count = net_rules_pinned(p->o->rules, c->host, c->candidates, NET_RESOLVE_MAX);
  if (c->candidate_count) {
    connect_next(p, c, slot);
    return;
  }
  if (net_resolver_submit(p->resolver, slot, c->generation, c->host) < 0) {
    refuse(p, c, slot, NET_RULE_RESOLVE_FAILED, 502, NET_SOCKS5_HOST_UNREACHABLE);
    return;
  }
  c->state = CONN_RESOLVING;
  c->deadline = now_ms() + p->connect_timeout;
  update_interest(p, c, slot);
}

static void resolved(struct proxy *p, const struct net_resolution *r) {
  if (r->slot >= p->max)
    return;
  struct conn *c = &p->conns[r->slot];
  if (c->state != CONN_RESOLVING || c->generation != r->generation)
    return; /* the connection went away (timed out) while its name was looked up */
  if (r->error) {
    refuse(p, c, r->slot, NET_RULE_RESOLVE_FAILED, 502, NET_SOCKS5_HOST_UNREACHABLE);
    return;
  }
  memcpy(c->candidates, r->addresses, sizeof c->candidates);
  c->candidate_count = r->count;
  connect_next(p, c, r->slot);
}

/* Keeps the bytes after the request for upstream (after a rewritten head, for plain HTTP). */
static int keep_prefix(struct conn *c, const uint8_t *head, size_t head_length, size_t consumed,
                       const char *forward, size_t forward_length) {
  size_t rest = head_length - consumed;
  c->prefix_length = forward_length + rest;
  if (c->prefix_length == 0)
    return 0;
  c->prefix = malloc(c->prefix_length);
  if (!c->prefix)
    return -1;
  if (forward_length)
    memcpy(c->prefix, forward, forward_length);
  memcpy(c->prefix + forward_length, head + consumed, rest);
  return 0;
}

static void parse_head_http(struct proxy *p, struct conn *c, unsigned slot) {
  struct net_http_request request;
  const char *why = NULL;
  enum net_parse r = net_http_parse(c->head, c->head_length, &request, &why);
  if (r == NET_PARSE_MORE)
    return;
  if (r == NET_PARSE_BAD) {
    refuse(p, c, slot, NET_RULE_BAD_REQUEST, 400, 0);
    return;
  }
  c->protocol = request.connect ? PROTO_CONNECT : PROTO_HTTP;
  snprintf(c->host, sizeof c->host, "%s", request.host);
  c->port = request.port;
  int kept = keep_prefix(c, c->head, c->head_length, request.consumed, request.forward,
                         request.forward_length);
  net_http_request_clear(&request);
  if (kept < 0) {
    refuse(p, c, slot, NET_RULE_BAD_REQUEST, 502, 0);
    return;
  }
  decide(p, c, slot);
}

static void parse_head_socks5(struct proxy *p, struct conn *c, unsigned slot) {
  const char *why = NULL;
  if (!c->greeted) {
    size_t consumed = 0;
    enum net_parse r = net_socks5_greeting(c->head, c->head_length, &consumed, &why);
    if (r == NET_PARSE_MORE)
      return;
    if (r == NET_PARSE_BAD) {
      static const uint8_t no_method[2] = {5, 0xff};
      send_small(c->client, no_method, sizeof no_method);
      refuse(p, c, slot, NET_RULE_BAD_REQUEST, 0, 0);
      return;
    }
    static const uint8_t no_auth[2] = {5, 0};
    send_small(c->client, no_auth, sizeof no_auth);
    c->greeted = true;
    memmove(c->head, c->head + consumed, c->head_length - consumed);
    c->head_length -= consumed;
  }
  struct net_socks5_request request;
  enum net_parse r = net_socks5_parse(c->head, c->head_length, &request, &why);
  if (r == NET_PARSE_MORE)
    return;
  if (r == NET_PARSE_BAD) {
    refuse(p, c, slot, NET_RULE_BAD_REQUEST, 0, request.refusal);
    return;
  }
  snprintf(c->host, sizeof c->host, "%s", request.host);
  c->port = request.port;
  if (keep_prefix(c, c->head, c->head_length, request.consumed, NULL, 0) < 0) {
    refuse(p, c, slot, NET_RULE_BAD_REQUEST, 0, NET_SOCKS5_GENERAL_FAILURE);
    return;
  }
  decide(p, c, slot);
}

static void read_head(struct proxy *p, struct conn *c, unsigned slot) {
  ssize_t n =
      recv(c->client, c->head + c->head_length, NET_HEAD_MAX - c->head_length, MSG_DONTWAIT);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
    free_conn(p, c); /* the client left before asking for anything: nothing was decided */
    return;
  }
  if (n < 0)
    return;
  c->head_length += (size_t)n;
  if (c->protocol == PROTO_UNKNOWN)
    c->protocol = c->head[0] == 5 ? PROTO_SOCKS5 : PROTO_CONNECT;
  if (c->protocol == PROTO_SOCKS5) {
    parse_head_socks5(p, c, slot);
  } else {
    /* Until the request line is read the HTTP kind is unknown; PROTO_CONNECT only means
     * "answer in HTTP". */
    parse_head_http(p, c, slot);
  }
  if (c->state == CONN_HEAD && c->head_length == NET_HEAD_MAX)
    refuse(p, c, slot, NET_RULE_BAD_REQUEST, 400, NET_SOCKS5_GENERAL_FAILURE);
}

static void drain_client(struct proxy *p, struct conn *c) {
  char discard[4096];
  for (;;) {
    ssize_t n = recv(c->client, discard, sizeof discard, MSG_DONTWAIT);
    if (n > 0)
      continue;
    if (n == 0 || (errno != EAGAIN && errno != EINTR))
      free_conn(p, c);
    return;
  }
}

static void relay(struct proxy *p, struct conn *c, unsigned slot, uint32_t events, bool upstream) {
  bool hangup = (events & (EPOLLHUP | EPOLLERR)) != 0;
  /* Only the directions this event can move: a splice that would only say EAGAIN is a
   * syscall per wake-up on the bulk path. */
  bool readable = (events & EPOLLIN) || hangup, writable = (events & EPOLLOUT) || hangup;
  bool up = upstream ? writable : readable, down = upstream ? readable : writable;
  int a = up ? net_direction_pump(&c->up) : 0, b = down ? net_direction_pump(&c->down) : 0;
  /* A splice the watchdog had to end: it blocked, on a socket only the sandbox can have made
   * blocking (it shares the open file; a non-blocking splice never sleeps). That connection
   * ends, whatever the flag says now. */
  bool blocked = c->up.interrupted || c->down.interrupted;
  c->up.interrupted = c->down.interrupted = false;
  if (a < 0 || b < 0 || blocked || (c->up.shut && c->down.shut)) {
    finish(p, c);
    return;
  }
  if (a > 0 || b > 0)
    c->last_activity = now_ms();
  if (hangup) {
    /* Hang-up on a socket: its peer closed and we shut our side, so neither direction has
     * more to do on it; level-triggered, it would fire for ever. */
    int fd = upstream ? c->upstream : c->client;
    uint32_t *mask = upstream ? &c->upstream_mask : &c->client_mask;
    if (*mask != UINT32_MAX)
      epoll_ctl(p->epoll, EPOLL_CTL_DEL, fd, NULL);
    *mask = UINT32_MAX - 1; /* removed: watch() never re-adds it */
  }
  update_interest(p, c, slot);
}

static void accept_clients(struct proxy *p, int listen_fd) {
  for (;;) {
    int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0)
      return;
    unsigned slot = 0;
    while (slot < p->max && p->conns[slot].state != CONN_FREE)
      slot++;
    if (slot == p->max) {
      /* Refused, not queued: a flood of connections ties up no more than the slots. */
      struct net_event e = {.rule = NET_RULE_TOO_MANY, .time_ms = wall_ms()};
      net_event_write(p->o->events_fd, &e);
      close(fd);
      continue;
    }
    struct conn *c = &p->conns[slot];
    c->head = malloc(NET_HEAD_MAX);
    if (!c->head) {
      close(fd);
      continue;
    }
    c->client = fd;
    c->client_mask = c->upstream_mask = UINT32_MAX;
    c->state = p->o->handoff ? CONN_HANDOFF : CONN_HEAD;
    c->deadline = now_ms() + p->header_timeout;
    update_interest(p, c, slot);
  }
}

/* The bridge's unix connection in the slot carries the client's socket: the slot takes it (the
 * head's deadline runs on), or the connection is refused and closed. */
static void take_handoff(struct proxy *p, struct conn *c, unsigned slot) {
  int fd;
  const char *why = NULL;
  int r = net_handoff_receive(c->client, &fd, &why);
  if (r == 0)
    return;
  if (r < 0) {
    if (why && why[0]) {
      struct net_event e = {.rule = NET_RULE_BAD_HANDOFF, .time_ms = wall_ms()};
      net_event_write(p->o->events_fd, &e);
    }
    free_conn(p, c);
    return;
  }
  if (c->client_mask != UINT32_MAX)
    epoll_ctl(p->epoll, EPOLL_CTL_DEL, c->client, NULL);
  close(c->client);
  c->client = fd;
  c->client_mask = UINT32_MAX;
  c->handed = true;
  c->state = CONN_HEAD;
  update_interest(p, c, slot);
}

static void on_event(struct proxy *p, uint64_t tag, uint32_t events) {
  bool upstream = (tag & TAG_UPSTREAM) != 0;
  unsigned slot = (unsigned)(tag & 0xffffffffu);
  if (slot >= p->max)
    return;
  struct conn *c = &p->conns[slot];
  bool hangup = (events & (EPOLLHUP | EPOLLERR)) != 0;
  switch (c->state) {
  case CONN_HANDOFF: take_handoff(p, c, slot); break;
  case CONN_HEAD: read_head(p, c, slot); break;
  case CONN_RESOLVING:
    if (hangup)
      free_conn(p, c);
    break;
  case CONN_CONNECTING:
    if (upstream)
      connect_done(p, c, slot);
    else if (hangup)
      free_conn(p, c);
    break;
  case CONN_RELAYING: relay(p, c, slot, events, upstream); break;
  case CONN_DRAINING: drain_client(p, c); break;
  case CONN_FREE: break;
  }
}

static void check_deadlines(struct proxy *p) {
  int64_t now = now_ms();
  for (unsigned slot = 0; slot < p->max; slot++) {
    struct conn *c = &p->conns[slot];
    switch (c->state) {
    case CONN_HANDOFF:
      if (now >= c->deadline)
        free_conn(p, c); /* a unix connection that never handed anything over */
      break;
    case CONN_HEAD:
      if (now >= c->deadline)
        refuse(p, c, slot, NET_RULE_TIMEOUT, 408, NET_SOCKS5_TTL_EXPIRED);
      break;
    case CONN_RESOLVING:
      if (now >= c->deadline)
        refuse(p, c, slot, NET_RULE_RESOLVE_FAILED, 504, NET_SOCKS5_HOST_UNREACHABLE);
      break;
    case CONN_CONNECTING:
      if (now >= c->deadline)
        connect_next(p, c, slot);
      break;
    case CONN_RELAYING:
      if (now - c->last_activity >= p->idle_timeout)
        finish(p, c);
      break;
    case CONN_DRAINING:
      if (now >= c->deadline)
        free_conn(p, c);
      break;
    case CONN_FREE: break;
    }
  }
}

static int add_watch(int epoll, int fd, uint64_t tag, struct cordon_error **err) {
  struct epoll_event ev = {.events = EPOLLIN, .data.u64 = tag};
  if (epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &ev) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "egress proxy: epoll");
  return 0;
}

/* Six descriptors a connection (two sockets, two pipes): ask for the hard limit, best effort. */
static void raise_fd_limit(unsigned connections) {
  struct rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) < 0)
    return;
  rlim_t want = (rlim_t)connections * 6 + 64;
  if (limit.rlim_cur >= want)
    return;
  limit.rlim_cur = limit.rlim_max < want ? limit.rlim_max : want;
  setrlimit(RLIMIT_NOFILE, &limit);
}

/* The watchdog (handoff): SIGALRM every TICK_MS at this thread only (the resolver's threads
 * never see it), with a handler installed without SA_RESTART, so that a call blocked on a
 * socket the sandbox made blocking returns EINTR. */
#ifndef sigev_notify_thread_id /* glibc before 2.41 names it only so */
#define sigev_notify_thread_id _sigev_un._tid
#endif

static void on_watchdog(int signal) {
  (void)signal;
}

static int watchdog_start(timer_t *timer) {
  struct sigaction action = {.sa_handler = on_watchdog};
  sigemptyset(&action.sa_mask);
  struct sigevent event = {.sigev_notify = SIGEV_THREAD_ID, .sigev_signo = SIGALRM};
  event.sigev_notify_thread_id = gettid();
  struct itimerspec every = {.it_interval = {0, TICK_MS * 1000000L},
                             .it_value = {0, TICK_MS * 1000000L}};
  sigset_t alarm;
  sigemptyset(&alarm);
  sigaddset(&alarm, SIGALRM);
  if (sigaction(SIGALRM, &action, NULL) < 0 || sigprocmask(SIG_UNBLOCK, &alarm, NULL) < 0 ||
      timer_create(CLOCK_MONOTONIC, &event, timer) < 0)
    return -1;
  if (timer_settime(*timer, 0, &every, NULL) < 0) {
    timer_delete(*timer);
    return -1;
  }
  return 0;
}

static bool stop_requested(int stop_fd) {
  struct pollfd pfd = {.fd = stop_fd, .events = POLLIN};
  return poll(&pfd, 1, 0) > 0;
}

int net_proxy_serve(const struct net_proxy_options *o, int listen_fd, int stop_fd,
                    struct cordon_error **err) {
  struct proxy p = {
      .o = o,
      .epoll = -1,
      .max = o->max_connections ? o->max_connections : DEFAULT_MAX_CONNECTIONS,
      .connect_timeout =
          o->connect_timeout_ms > 0 ? o->connect_timeout_ms : DEFAULT_CONNECT_TIMEOUT_MS,
      .idle_timeout = o->idle_timeout_ms > 0 ? o->idle_timeout_ms : DEFAULT_IDLE_TIMEOUT_MS,
      .header_timeout = o->header_timeout_ms > 0 ? o->header_timeout_ms : DEFAULT_HEADER_TIMEOUT_MS,
      .buffer_bytes = o->buffer_bytes ? o->buffer_bytes : DEFAULT_BUFFER_BYTES,
  };
  raise_fd_limit(p.max);
  int flags = fcntl(listen_fd, F_GETFL);
  if (flags < 0 || fcntl(listen_fd, F_SETFL, flags | O_NONBLOCK) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "egress proxy: listening socket");
  p.conns = calloc(p.max, sizeof *p.conns);
  if (!p.conns)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "egress proxy");
  for (unsigned i = 0; i < p.max; i++) {
    struct conn *c = &p.conns[i];
    c->client = c->upstream = -1;
    c->up.pipe[0] = c->up.pipe[1] = c->down.pipe[0] = c->down.pipe[1] = -1;
  }
  int r = 0;
  timer_t watchdog;
  bool watching = false;
  p.epoll = epoll_create1(EPOLL_CLOEXEC);
  if (p.epoll < 0) {
    r = cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "egress proxy: epoll");
    goto out;
  }
  if (net_resolver_start(RESOLVER_WORKERS, p.max, &p.resolver) < 0) {
    r = cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "egress proxy: resolver threads");
    goto out;
  }
  if (o->handoff && watchdog_start(&watchdog) < 0) {
    r = cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "egress proxy: watchdog timer");
    goto out;
  }
  watching = o->handoff;
  if ((r = add_watch(p.epoll, listen_fd, TAG_LISTEN, err)) < 0 ||
      (r = add_watch(p.epoll, stop_fd, TAG_STOP, err)) < 0 ||
      (r = add_watch(p.epoll, net_resolver_fd(p.resolver), TAG_RESOLVER, err)) < 0)
    goto out;
  for (bool stopping = false; !stopping;) {
    struct epoll_event events[64];
    int n = epoll_wait(p.epoll, events, 64, TICK_MS);
    if (n < 0 && errno != EINTR) {
      r = cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "egress proxy: epoll_wait");
      break;
    }
    for (int i = 0; i < n; i++) {
      uint64_t tag = events[i].data.u64;
      if (tag == TAG_STOP) {
        stopping = true;
      } else if (tag == TAG_LISTEN) {
        accept_clients(&p, listen_fd);
      } else if (tag == TAG_RESOLVER) {
        struct net_resolution result;
        while (net_resolver_take(p.resolver, &result) == 1)
          resolved(&p, &result);
      } else {
        on_event(&p, tag, events[i].events);
      }
    }
    check_deadlines(&p);
    /* The stop fd is watched like the rest; asked again only when idle, not a syscall per
     * wake-up on the bulk path. */
    if (!stopping && n == 0 && stop_requested(stop_fd))
      stopping = true;
  }
out:
  if (watching)
    timer_delete(watchdog);
  for (unsigned i = 0; i < p.max; i++)
    if (p.conns[i].state == CONN_RELAYING)
      finish(&p, &p.conns[i]);
    else
      free_conn(&p, &p.conns[i]);
  net_resolver_stop(p.resolver);
  if (p.epoll >= 0)
    close(p.epoll);
  free(p.conns);
  return r;
}

/* The port is NET_BRIDGE_PORT's (3128, asserted below). */
_Static_assert(NET_BRIDGE_PORT == 3128, "net_proxy_environment names port 3128");
const char *const net_proxy_environment[] = {
    "HTTP_PROXY=http://127.0.0.1:3128",
    "HTTPS_PROXY=http://127.0.0.1:3128",
    "ALL_PROXY=socks5h://127.0.0.1:3128",
    "http_proxy=http://127.0.0.1:3128",
    "https_proxy=http://127.0.0.1:3128",
    "all_proxy=socks5h://127.0.0.1:3128",
    "NO_PROXY=localhost,127.0.0.1",
    "no_proxy=localhost,127.0.0.1",
    NULL,
};
