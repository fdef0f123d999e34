/* Splice relay of one direction (relay.h). */
#include "net/relay.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Resizes the pipe to want (best effort: the kernel rounds up, and refuses past
 * /proc/sys/fs/pipe-max-size or a user's pipe-user-pages-*): the capacity in effect. */
static void resize(struct net_direction *d, size_t want) {
  int size = fcntl(d->pipe[1], F_SETPIPE_SZ, (int)want);
  if (size < 0)
    size = fcntl(d->pipe[1], F_GETPIPE_SZ);
  if (size > 0)
    d->capacity = (size_t)size;
}

int net_direction_open(struct net_direction *d, int from, int to, size_t capacity) {
  memset(d, 0, sizeof *d);
  d->from = from;
  d->to = to;
  d->pipe[0] = d->pipe[1] = -1;
  if (pipe2(d->pipe, O_NONBLOCK | O_CLOEXEC) < 0)
    return -1;
  d->capacity = 65536;
  d->max_capacity = capacity;
  resize(d, capacity < NET_DIRECTION_START ? capacity : NET_DIRECTION_START);
  return 0;
}

void net_direction_close(struct net_direction *d) {
  for (int i = 0; i < 2; i++)
    if (d->pipe[i] >= 0)
      close(d->pipe[i]);
  d->pipe[0] = d->pipe[1] = -1;
  free(d->pending);
  d->pending = NULL;
}

void net_direction_prepend(struct net_direction *d, uint8_t *bytes, size_t length, bool counted) {
  free(d->pending);
  d->pending = bytes;
  d->pending_length = length;
  d->pending_at = 0;
  d->pending_counted = counted;
}

static bool would_block(void) {
  return errno == EAGAIN || errno == EWOULDBLOCK;
}

/* Pending bytes first, then the pipe; -1 on error, else whether anything moved. */
static int drain(struct net_direction *d) {
  int moved = 0;
  while (d->pending && d->pending_at < d->pending_length) {
    ssize_t n = send(d->to, d->pending + d->pending_at, d->pending_length - d->pending_at,
                     MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0)
      return errno == EINTR ? 0 : would_block() ? moved : -1;
    d->pending_at += (size_t)n;
    if (d->pending_counted)
      d->bytes += (uint64_t)n;
    moved = 1;
  }
  if (d->pending) {
    free(d->pending);
    d->pending = NULL;
  }
  while (d->in_pipe > 0) {
    ssize_t n = splice(d->pipe[0], NULL, d->to, NULL, d->in_pipe,
                       SPLICE_F_MOVE | SPLICE_F_NONBLOCK | SPLICE_F_MORE);
    if (n < 0 && errno == EINTR)
      d->interrupted = true;
    if (n < 0)
      return errno == EINTR ? moved : would_block() ? moved : -1;
    d->in_pipe -= (size_t)n;
    d->bytes += (uint64_t)n;
    moved = 1;
  }
  return moved;
}

int net_direction_pump(struct net_direction *d) {
  if (d->shut)
    return 0;
  int moved = drain(d);
  if (moved < 0)
    return -1;
  while (!d->eof && d->in_pipe < d->capacity) {
    ssize_t n = splice(d->from, NULL, d->pipe[1], NULL, d->capacity - d->in_pipe,
                       SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (n < 0) {
      if (errno == EINTR) {
        d->interrupted = true; /* not again: it may block again (relay.h) */
        break;
      }
      if (would_block())
        break;
      return -1;
    }
    if (n == 0) {
      d->eof = true;
      break;
    }
    d->in_pipe += (size_t)n;
    moved = 1;
    /* A full pipe is bulk: a bigger one moves more a splice and a wake-up (half the CPU a
     * byte at 1 MiB against 64 KiB on loopback, bench/egress). */
    if (d->in_pipe >= d->capacity && d->capacity < d->max_capacity)
      resize(d, d->capacity * 4 < d->max_capacity ? d->capacity * 4 : d->max_capacity);
    int more = drain(d);
    if (more < 0)
      return -1;
    if (!more && d->in_pipe >= d->capacity)
      break;
  }
  if (d->eof && d->in_pipe == 0 && !d->pending && !d->shut) {
    /* The peer may already be gone; the direction is done either way. */
    shutdown(d->to, SHUT_WR);
    d->shut = true;
    moved = 1;
  }
  return moved;
}

bool net_direction_wants_read(const struct net_direction *d) {
  return !d->shut && !d->eof && d->in_pipe < d->capacity;
}

bool net_direction_wants_write(const struct net_direction *d) {
  return !d->shut && (d->pending || d->in_pipe > 0);
}
