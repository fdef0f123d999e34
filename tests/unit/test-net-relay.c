/* net/relay: a direction's pipe starts small, grows as bulk fills it, never past its bound,
 * and every byte arrives in order; a chatty direction keeps its small pipe. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "net/relay.h"

/* Two TCP-like stream pairs: writer -> [from ... to] -> reader. */
struct rig {
  int writer, from, to, reader;
};

static void rig_open(struct rig *r) {
  int a[2], b[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, a), 0);
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, b), 0);
  r->writer = a[0];
  r->from = a[1];
  r->to = b[0];
  r->reader = b[1];
}

static void rig_close(struct rig *r) {
  close(r->writer);
  close(r->from);
  close(r->to);
  close(r->reader);
}

/* Sends total bytes of a pattern through d and checks them at the reader, which reads only
 * once lag bytes are on their way (a slow reader backs the pipe up). */
static void move(struct rig *r, struct net_direction *d, size_t total, size_t chunk, size_t lag) {
  uint8_t *out = malloc(chunk), *in = malloc(1 << 16);
  size_t sent = 0, got = 0;
  int idle = 0;
  while (got < total && idle < 100000) {
    if (sent < total) {
      size_t n = total - sent < chunk ? total - sent : chunk;
      for (size_t i = 0; i < n; i++)
        out[i] = (uint8_t)((sent + i) * 7);
      ssize_t w = send(r->writer, out, n, MSG_NOSIGNAL);
      if (w > 0)
        sent += (size_t)w;
    }
    int moved = net_direction_pump(d);
    assert_true(moved >= 0);
    ssize_t n = sent - got >= lag || sent == total ? recv(r->reader, in, 1 << 16, 0) : -1;
    if (n > 0) {
      for (ssize_t i = 0; i < n; i++)
        assert_int_equal(in[i], (uint8_t)((got + (size_t)i) * 7));
      got += (size_t)n;
      idle = 0;
    } else {
      idle++;
    }
    assert_true(d->capacity <=
                (d->max_capacity > NET_DIRECTION_START ? d->max_capacity : NET_DIRECTION_START));
  }
  assert_int_equal(got, total);
  free(out);
  free(in);
}

static void test_grows_under_bulk(void **state) {
  (void)state;
  struct rig r;
  rig_open(&r);
  struct net_direction d;
  assert_int_equal(net_direction_open(&d, r.from, r.to, 1u << 20), 0);
  assert_int_equal(d.capacity, NET_DIRECTION_START);
  move(&r, &d, 8u << 20, 1u << 16, 1u << 20);
  assert_true(d.capacity > NET_DIRECTION_START);
  assert_true(d.capacity <= (1u << 20));
  assert_int_equal(d.bytes, 8u << 20);
  net_direction_close(&d);
  rig_close(&r);
}

static void test_chatty_stays_small(void **state) {
  (void)state;
  struct rig r;
  rig_open(&r);
  struct net_direction d;
  assert_int_equal(net_direction_open(&d, r.from, r.to, 1u << 20), 0);
  move(&r, &d, 4096, 100, 0); /* small writes, each read before the next: never full */
  assert_int_equal(d.capacity, NET_DIRECTION_START);
  net_direction_close(&d);
  rig_close(&r);
}

static void test_bound_below_start(void **state) {
  (void)state;
  struct rig r;
  rig_open(&r);
  struct net_direction d;
  assert_int_equal(net_direction_open(&d, r.from, r.to, 16384), 0);
  assert_true(d.capacity <= 16384);
  move(&r, &d, 1u << 20, 1u << 16, 1u << 18);
  assert_true(d.capacity <= 16384);
  net_direction_close(&d);
  rig_close(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_grows_under_bulk),
      cmocka_unit_test(test_chatty_stays_small),
      cmocka_unit_test(test_bound_below_start),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
