/* The bridge inside the sandbox (net_bridge_serve, proxy.h): each TCP connection accepted on
 * 127.0.0.1 is paired with a fresh connection to the proxy's unix socket and relayed both ways
 * (relay.h: splice through bounded pipes, EOF passed on as a half-close). It parses nothing:
 * the proxy outside decides. Bounded: a connection beyond BRIDGE_MAX_PAIRS is closed at once. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/proxy.h"
#include "net/relay.h"

#define BRIDGE_MAX_PAIRS 256u
#define BRIDGE_BUFFER_BYTES (1024u * 1024u)
#define TAG_LISTEN UINT64_MAX
#define TAG_STOP (UINT64_MAX - 1)

struct pair {
  bool used;
  int client, proxy;
  struct net_direction up, down;    /* client->proxy, proxy->client */
  uint32_t client_mask, proxy_mask; /* epoll interest; UINT32_MAX: not (or no longer) watched */
};

static void pair_free(int epoll, struct pair *p) {
  if (!p->used)
    return;
  epoll_ctl(epoll, EPOLL_CTL_DEL, p->client, NULL);
  epoll_ctl(epoll, EPOLL_CTL_DEL, p->proxy, NULL);
  close(p->client);
  close(p->proxy);
  net_direction_close(&p->up);
  net_direction_close(&p->down);
  memset(p, 0, sizeof *p);
}

static void pair_watch(int epoll, int fd, uint64_t tag, uint32_t *current, uint32_t mask) {
  if (*current == mask || *current == UINT32_MAX)
    return;
  struct epoll_event ev = {.events = mask, .data.u64 = tag};
  if (epoll_ctl(epoll, EPOLL_CTL_MOD, fd, &ev) == 0)
    *current = mask;
}

static void pair_update(int epoll, struct pair *p, unsigned index) {
  uint32_t client = (net_direction_wants_read(&p->up) ? EPOLLIN : 0) |
                    (net_direction_wants_write(&p->down) ? EPOLLOUT : 0);
  uint32_t proxy = (net_direction_wants_read(&p->down) ? EPOLLIN : 0) |
                   (net_direction_wants_write(&p->up) ? EPOLLOUT : 0);
  pair_watch(epoll, p->client, (uint64_t)index << 1, &p->client_mask, client);
  pair_watch(epoll, p->proxy, (uint64_t)index << 1 | 1, &p->proxy_mask, proxy);
}

static void pair_open(int epoll, struct pair *pairs, int client, int (*connect_proxy)(void *arg),
                      void *arg) {
  unsigned index = 0;
  while (index < BRIDGE_MAX_PAIRS && pairs[index].used)
    index++;
  int proxy = index < BRIDGE_MAX_PAIRS ? connect_proxy(arg) : -1;
  if (proxy < 0) {
    close(client);
    return;
  }
  struct pair *p = &pairs[index];
  p->used = true;
  p->client = client;
  p->proxy = proxy;
  int flags = fcntl(proxy, F_GETFL);
  struct epoll_event a = {.events = 0, .data.u64 = (uint64_t)index << 1};
  struct epoll_event b = {.events = 0, .data.u64 = (uint64_t)index << 1 | 1};
  if (flags < 0 || fcntl(proxy, F_SETFL, flags | O_NONBLOCK) < 0 ||
      net_direction_open(&p->up, client, proxy, BRIDGE_BUFFER_BYTES) < 0 ||
      net_direction_open(&p->down, proxy, client, BRIDGE_BUFFER_BYTES) < 0 ||
      epoll_ctl(epoll, EPOLL_CTL_ADD, client, &a) < 0 ||
      epoll_ctl(epoll, EPOLL_CTL_ADD, proxy, &b) < 0) {
    pair_free(epoll, p);
    return;
  }
  pair_update(epoll, p, index);
}

static void pair_event(int epoll, struct pair *p, unsigned index, bool proxy_side,
                       uint32_t events) {
  /* Only the directions this event can move (see relay() in proxy.c). */
  bool hangup = (events & (EPOLLHUP | EPOLLERR)) != 0;
  bool readable = (events & EPOLLIN) || hangup, writable = (events & EPOLLOUT) || hangup;
  bool up = proxy_side ? writable : readable, down = proxy_side ? readable : writable;
  int a = up ? net_direction_pump(&p->up) : 0, b = down ? net_direction_pump(&p->down) : 0;
  if (a < 0 || b < 0 || (p->up.shut && p->down.shut)) {
    pair_free(epoll, p);
    return;
  }
  if (hangup) {
    /* Both ways done on that socket (see relay() in proxy.c): stop watching it. */
    int fd = proxy_side ? p->proxy : p->client;
    uint32_t *mask = proxy_side ? &p->proxy_mask : &p->client_mask;
    epoll_ctl(epoll, EPOLL_CTL_DEL, fd, NULL);
    *mask = UINT32_MAX;
  }
  pair_update(epoll, p, index);
}

int net_bridge_serve(int listen_fd, int (*connect_proxy)(void *arg), void *arg, int stop_fd,
                     struct cordon_error **err) {
  int flags = fcntl(listen_fd, F_GETFL);
  if (flags < 0 || fcntl(listen_fd, F_SETFL, flags | O_NONBLOCK) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "egress bridge: listening socket");
  struct pair *pairs = calloc(BRIDGE_MAX_PAIRS, sizeof *pairs);
  int epoll = epoll_create1(EPOLL_CLOEXEC);
  struct epoll_event listen_ev = {.events = EPOLLIN, .data.u64 = TAG_LISTEN};
  struct epoll_event stop_ev = {.events = EPOLLIN, .data.u64 = TAG_STOP};
  int r = 0;
  if (!pairs || epoll < 0 || epoll_ctl(epoll, EPOLL_CTL_ADD, listen_fd, &listen_ev) < 0 ||
      epoll_ctl(epoll, EPOLL_CTL_ADD, stop_fd, &stop_ev) < 0) {
    r = cordon_error_set(err, CORDON_ERR_SYSTEM, pairs ? errno : ENOMEM, "egress bridge");
    goto out;
  }
  for (bool stopping = false; !stopping;) {
    struct epoll_event events[64];
    int n = epoll_wait(epoll, events, 64, -1);
    if (n < 0 && errno != EINTR) {
      r = cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "egress bridge: epoll_wait");
      break;
    }
    for (int i = 0; i < n; i++) {
      uint64_t tag = events[i].data.u64;
      if (tag == TAG_STOP) {
        stopping = true;
      } else if (tag == TAG_LISTEN) {
        int client;
        while ((client = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0)
          pair_open(epoll, pairs, client, connect_proxy, arg);
      } else {
        unsigned index = (unsigned)(tag >> 1);
        if (index < BRIDGE_MAX_PAIRS && pairs[index].used)
          pair_event(epoll, &pairs[index], index, tag & 1, events[i].events);
      }
    }
  }
out:
  for (unsigned i = 0; pairs && i < BRIDGE_MAX_PAIRS; i++)
    pair_free(epoll, &pairs[i]);
  free(pairs);
  if (epoll >= 0)
    close(epoll);
  return r;
}
