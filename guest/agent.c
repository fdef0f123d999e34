/* cordon-guest's main: pid 1 of the guest. It prepares the guest (boot.c), then serves the
 * framed exec wire (backends/microvm/guest-wire.h) on its virtio-serial port, one exec at a
 * time (the host serialises: qemu's socket chardev takes one client at a time, and the host
 * opens one connection per exec).
 *
 * The port tells the agent when the host is there: while no host is connected, poll reports
 * POLLHUP at once and read returns 0, so an idle guest must not poll it (that would spin). The
 * agent then leaves the port out of its poll set and waits for SIGIO (the port is O_ASYNC: the
 * kernel signals a change of the host's connection) on a signalfd, with a slow fallback tick.
 * A host that hangs up during an exec (and stays away: see HOST_GONE_GRACE) has given it up:
 * the agent kills the command's tree.
 * Frames from the host are parsed as untrusted; a byte that cannot start a frame is skipped,
 * so a frame cut short by an earlier connection does not wedge the next one. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/reboot.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "guest/guest.h"

#define INBUF_MAX (GUEST_WIRE_MAX_REQUEST + sizeof(struct guest_wire_header))
/* virtio-serial delivers the host's connection events on a control queue apart from the data:
 * a new connection's first bytes may arrive before the close of the one before it. So a
 * hang-up counts only when the host stays away this long (seconds); until then the exec goes
 * on and the buffered bytes stay. */
#define HOST_GONE_GRACE 2.0
/* How often the memory watch (memory.c) looks while an exec runs, in seconds. */
#define MEMORY_WATCH_PERIOD 0.25

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct exec_state {
  bool active;
  uint32_t id;
  pid_t keeper;
  struct guest_exec_fds fds;
  unsigned char *pending; /* stdin not yet taken by the command's pipe */
  size_t pending_length, pending_offset;
  bool eof_after_pending;
};

struct agent {
  struct guest_config cfg;
  int port;
  bool host_connected;
  double gone_since; /* when the host was last seen going, 0 while it is there */
  unsigned char *in;
  size_t in_length, in_capacity;
  struct exec_state x;
  struct guest_keeper spare; /* the next exec's keeper, forked while idle */
};

/* The frame being sent (one exec at a time, one thread): output is read straight into its data. */
static unsigned char frame[sizeof(struct guest_wire_header) + GUEST_WIRE_MAX_DATA];
#define FRAME_DATA (frame + sizeof(struct guest_wire_header))

/* Write a whole frame to the port, or drop it when the host is gone (a frame for a host that
 * hung up has no reader; the next host tells stale frames by their exec id). Header and data
 * go in one write: each write is a buffer of its own on the virtio queue, delivered to the
 * host's socket on its own (a status record written in two parts came as two reads, 2 ms
 * apart under load). */
static void send_frame(struct agent *a, enum guest_wire_type type, uint32_t id, const void *data,
                       size_t length) {
  if (length > GUEST_WIRE_MAX_DATA)
    return;
  guest_wire_header_encode(type, id, (uint32_t)length, frame);
  if (length && data != FRAME_DATA)
    memmove(frame + sizeof(struct guest_wire_header), data, length);
  size_t total = sizeof(struct guest_wire_header) + length, done = 0;
  double hup_since = 0;
  while (done < total) {
    ssize_t w = write(a->port, frame + done, total - done);
    if (w > 0) {
      done += (size_t)w;
      continue;
    }
    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0 && errno != EAGAIN)
      return;
    struct pollfd p = {a->port, POLLOUT, 0};
    if (poll(&p, 1, 1000) < 0 && errno != EINTR)
      return;
    if (!(p.revents & POLLHUP) || (p.revents & POLLOUT)) {
      hup_since = 0;
      continue;
    }
    /* No host: the connection event may be stale (see host_gone); a host that stays away
     * this long is gone, and its frame with it. */
    double now = now_s();
    if (!hup_since)
      hup_since = now;
    if (now - hup_since > HOST_GONE_GRACE)
      return;
    usleep(20000);
  }
}

static void close_fd(int *fd) {
  if (*fd >= 0)
    close(*fd);
  *fd = -1;
}

/* Read what a command's stream has now and send it on. Returns false at EOF. */
static bool pump_output(struct agent *a, int *fd, enum guest_wire_type type) {
  for (int round = 0; round < 16 && *fd >= 0; round++) {
    /* Read into the frame's data: no copy on the way out. */
    ssize_t n = read(*fd, FRAME_DATA, GUEST_WIRE_MAX_DATA);
    if (n > 0) {
      send_frame(a, type, a->x.id, FRAME_DATA, (size_t)n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
      return true;
    close_fd(fd);
    return false;
  }
  return *fd >= 0;
}

static void exec_finish(struct agent *a) {
  struct exec_state *x = &a->x;
  struct exec_wire_reply r;
  ssize_t n = read(x->fds.status_r, &r, sizeof(r));
  /* The command has ended: what it wrote is in the pipes now. Drain it (processes it left
   * running keep the pipes open, so EOF may never come) and reply. */
  while (x->fds.stdout_r >= 0 && pump_output(a, &x->fds.stdout_r, GUEST_WIRE_STDOUT)) {
    struct pollfd p = {x->fds.stdout_r, POLLIN, 0};
    if (poll(&p, 1, 0) <= 0)
      break;
  }
  while (x->fds.stderr_r >= 0 && pump_output(a, &x->fds.stderr_r, GUEST_WIRE_STDERR)) {
    struct pollfd p = {x->fds.stderr_r, POLLIN, 0};
    if (poll(&p, 1, 0) <= 0)
      break;
  }
  /* The keeper died without a word (SIGKILL: the OOM killer, or a root command killing its
   * parent): the command's status is lost, and the host must say so, never report 0. */
  if (n != (ssize_t)sizeof(r))
    r = (struct exec_wire_reply){GUEST_WIRE_REPLY_MAGIC, EXEC_WIRE_FAILED, EXEC_WIRE_STAGE_LOST,
                                 EIO};
  send_frame(a, GUEST_WIRE_REPLY, x->id, &r, sizeof(r));
  close_fd(&x->fds.stdin_w);
  close_fd(&x->fds.stdout_r);
  close_fd(&x->fds.stderr_r);
  close_fd(&x->fds.status_r);
  free(x->pending);
  memset(x, 0, sizeof(*x));
}

static void exec_begin(struct agent *a, uint32_t id, const unsigned char *payload, size_t length) {
  struct exec_wire_header h;
  struct exec_wire_request req = {0};
  struct cordon_error *err = NULL;
  if (length < sizeof(h)) {
    guest_log("cordon-guest: short request");
    return;
  }
  memcpy(&h, payload, sizeof(h));
  if (h.length != length - sizeof(h) ||
      exec_wire_check_header(&guest_wire_exec_protocol, &h, &err) < 0 ||
      exec_wire_decode(&guest_wire_exec_protocol, &h, payload + sizeof(h), &req, &err) < 0) {
    guest_log("cordon-guest: %s", err ? err->message : "request length mismatch");
    cordon_error_free(err);
    struct exec_wire_reply r = {GUEST_WIRE_REPLY_MAGIC, EXEC_WIRE_FAILED, EXEC_WIRE_STAGE_SETUP,
                                EINVAL};
    send_frame(a, GUEST_WIRE_REPLY, id, &r, sizeof(r));
    return;
  }
  exec_wire_request_clear(&req);
  /* The spare keeper takes it; one that died meanwhile is replaced once. */
  pid_t keeper = -1;
  int e = 0;
  for (int attempt = 0; attempt < 2 && keeper < 0; attempt++) {
    if (a->spare.pid <= 0 && guest_keeper_prefork(&a->cfg, &a->spare) < 0) {
      e = errno;
      break;
    }
    pid_t pid = a->spare.pid;
    if (guest_keeper_start(&a->spare, payload, length, &a->x.fds) == 0)
      keeper = pid;
    else
      e = errno;
    a->spare.pid = 0;
  }
  if (keeper < 0) {
    struct exec_wire_reply r = {GUEST_WIRE_REPLY_MAGIC, EXEC_WIRE_FAILED, EXEC_WIRE_STAGE_SETUP, e};
    send_frame(a, GUEST_WIRE_REPLY, id, &r, sizeof(r));
    return;
  }
  a->x.active = true;
  a->x.id = id;
  a->x.keeper = keeper;
}

static void exec_stdin(struct agent *a, const unsigned char *data, size_t length) {
  struct exec_state *x = &a->x;
  if (x->fds.stdin_w < 0 || length == 0)
    return;
  unsigned char *copy = malloc(length);
  if (!copy)
    return;
  memcpy(copy, data, length);
  x->pending = copy;
  x->pending_length = length;
  x->pending_offset = 0;
}

/* Feed the pending stdin to the command; a command that stopped reading (EPIPE) gets none. */
static void exec_feed(struct exec_state *x) {
  while (x->pending && x->pending_offset < x->pending_length) {
    ssize_t w = write(x->fds.stdin_w, x->pending + x->pending_offset,
                      x->pending_length - x->pending_offset);
    if (w < 0 && errno == EAGAIN)
      return;
    if (w <= 0)
      break;
    x->pending_offset += (size_t)w;
  }
  free(x->pending);
  x->pending = NULL;
  x->pending_length = x->pending_offset = 0;
  if (x->eof_after_pending)
    close_fd(&x->fds.stdin_w);
}

static void handle_frame(struct agent *a, const struct guest_wire_header *h,
                         const unsigned char *payload) {
  struct exec_state *x = &a->x;
  bool mine = x->active && h->exec_id == x->id;
  switch (h->type) {
  case GUEST_WIRE_PING: send_frame(a, GUEST_WIRE_PONG, h->exec_id, NULL, 0); break;
  case GUEST_WIRE_REQUEST:
    if (mine) {
      guest_log("cordon-guest: exec %u requested again: ignored", x->id);
      break;
    }
    if (x->active) {
      /* The host serialises execs (a lock held for the whole exec): another exec's request
       * means the host of this one is gone, though its hang-up was not seen for good (the
       * next host came within HOST_GONE_GRACE). End it (its record, of its id, is dropped by
       * the new host), rather than ignore the new request until that host gives up. */
      guest_log("cordon-guest: exec %u ended: exec %u came", x->id, h->exec_id);
      kill(x->keeper, SIGUSR1);
      struct pollfd p = {x->fds.status_r, POLLIN, 0};
      if (poll(&p, 1, 5000) <= 0)
        fcntl(x->fds.status_r, F_SETFL, O_NONBLOCK); /* no record: reported as lost */
      exec_finish(a);
    }
    exec_begin(a, h->exec_id, payload, h->length);
    break;
  case GUEST_WIRE_STDIN:
    if (mine)
      exec_stdin(a, payload, h->length);
    break;
  case GUEST_WIRE_STDIN_EOF:
    if (mine && x->pending)
      x->eof_after_pending = true;
    else if (mine)
      close_fd(&x->fds.stdin_w);
    break;
  case GUEST_WIRE_KILL:
    if (mine)
      kill(x->keeper, SIGUSR1);
    break;
  default: break;
  }
}

/* Parse the frames the buffer holds; stops while stdin is pending (the command has not taken
 * the last data yet: back-pressure on the host). */
static void handle_input(struct agent *a) {
  size_t at = 0;
  while (at < a->in_length && !a->x.pending) {
    struct guest_wire_header h;
    struct cordon_error *err = NULL;
    int r = guest_wire_parse(GUEST_WIRE_TO_GUEST, a->in + at, a->in_length - at, &h, &err);
    if (r < 0) {
      cordon_error_free(err);
      at++; /* resynchronise on the next magic */
      continue;
    }
    if (r == 0)
      break;
    handle_frame(a, &h, a->in + at + sizeof(h));
    at += sizeof(h) + h.length;
  }
  memmove(a->in, a->in + at, a->in_length - at);
  a->in_length -= at;
}

static void host_gone(struct agent *a) {
  if (a->host_connected)
    a->gone_since = now_s();
  a->host_connected = false;
}

/* The host hung up for good (HOST_GONE_GRACE): it gave up the exec and any frame it cut. */
static void host_gone_for_good(struct agent *a) {
  a->gone_since = 0;
  a->in_length = 0;
  if (a->x.active)
    kill(a->x.keeper, SIGUSR1);
  if (a->x.pending) {
    a->x.eof_after_pending = true;
    free(a->x.pending);
    a->x.pending = NULL;
    close_fd(&a->x.fds.stdin_w);
  }
}

/* Read what the port has and handle the frames it completes: the bytes read, 0 when the host
 * is gone (and nothing waits), -1 when nothing was read. */
static ssize_t read_port(struct agent *a) {
  if (a->in_capacity - a->in_length < 65536 && a->in_capacity < INBUF_MAX) {
    size_t cap = a->in_capacity ? a->in_capacity * 2 : 131072;
    if (cap > INBUF_MAX)
      cap = INBUF_MAX;
    unsigned char *grown = realloc(a->in, cap);
    if (!grown)
      return -1;
    a->in = grown;
    a->in_capacity = cap;
  }
  if (a->in_length == a->in_capacity) {
    a->in_length = 0; /* a frame larger than any valid one: drop it */
    return -1;
  }
  ssize_t n = read(a->port, a->in + a->in_length, a->in_capacity - a->in_length);
  if (n == 0)
    host_gone(a);
  else if (n > 0) {
    a->in_length += (size_t)n;
    handle_input(a);
  }
  return n;
}

/* Is a host connected to the port now? No POLLHUP: yes. With POLLHUP, virtio-console reports
 * POLLIN too whether or not bytes wait (a read would not block: it returns 0), so POLLIN says
 * nothing there: only bytes read say a host wrote (a new connection's first bytes may come
 * before its open event). Taking POLLIN|POLLHUP for a host made the idle agent spin, polling
 * and reading 0 without end: its whole vCPU between execs, a busy host thread per idle VM. */
static bool host_there(struct agent *a) {
  struct pollfd q = {a->port, POLLIN, 0};
  if (poll(&q, 1, 0) < 0)
    return false;
  if (!(q.revents & POLLHUP))
    return true;
  if (!(q.revents & POLLIN))
    return false;
  return read_port(a) > 0;
}

/* Near the end of the guest's RAM, kill what the OOM killer would, before reclaim stalls the
 * guest (memory.c). */
static void memory_watch(void) {
  struct guest_meminfo m;
  if (guest_meminfo_read("/proc", &m) < 0 || !guest_memory_low(&m))
    return;
  long score = 0;
  pid_t pid = guest_oom_choose("/proc", &score);
  if (pid > 1 && kill(pid, SIGKILL) == 0)
    guest_log("cordon-guest: %lu of %lu KiB available: killed %d (oom_score %ld)", m.available_kib,
              m.total_kib, (int)pid, score);
}

static void serve(struct agent *a, int sigfd) {
  double watched = 0;
  /* A host that connected before the port was opened sends no SIGIO: look once now, or its
   * first PING would wait for the idle tick. */
  a->host_connected = host_there(a);
  guest_keeper_prefork(&a->cfg, &a->spare);
  for (;;) {
    struct exec_state *x = &a->x;
    struct pollfd p[6];
    int n = 0;
    p[n++] = (struct pollfd){sigfd, POLLIN, 0};
    int port_at = -1, out_at = -1, err_at = -1, st_at = -1, in_at = -1;
    if (a->host_connected && !x->pending)
      port_at = n, p[n++] = (struct pollfd){a->port, POLLIN, 0};
    if (x->active && x->fds.stdout_r >= 0)
      out_at = n, p[n++] = (struct pollfd){x->fds.stdout_r, POLLIN, 0};
    if (x->active && x->fds.stderr_r >= 0)
      err_at = n, p[n++] = (struct pollfd){x->fds.stderr_r, POLLIN, 0};
    if (x->active)
      st_at = n, p[n++] = (struct pollfd){x->fds.status_r, POLLIN, 0};
    if (x->pending)
      in_at = n, p[n++] = (struct pollfd){x->fds.stdin_w, POLLOUT, 0};
    int wait_ms = x->active ? (int)(MEMORY_WATCH_PERIOD * 1000) : a->host_connected ? -1 : 1000;
    if (poll(p, (nfds_t)n, wait_ms) < 0 && errno != EINTR)
      continue;
    if (x->active && now_s() - watched >= MEMORY_WATCH_PERIOD) {
      memory_watch();
      watched = now_s();
    }
    if (p[0].revents & POLLIN) {
      struct signalfd_siginfo si;
      while (read(sigfd, &si, sizeof(si)) == sizeof(si))
        ;
    }
    /* Orphans of the guest come to pid 1: reap them all (keepers included). */
    while (waitpid(-1, NULL, WNOHANG) > 0)
      ;
    if (in_at >= 0 && p[in_at].revents)
      exec_feed(x);
    if (out_at >= 0 && p[out_at].revents)
      pump_output(a, &x->fds.stdout_r, GUEST_WIRE_STDOUT);
    if (err_at >= 0 && p[err_at].revents)
      pump_output(a, &x->fds.stderr_r, GUEST_WIRE_STDERR);
    if (st_at >= 0 && p[st_at].revents)
      exec_finish(a);
    if (port_at >= 0 && (p[port_at].revents & POLLIN))
      read_port(a);
    else if (port_at >= 0 && (p[port_at].revents & (POLLHUP | POLLERR)))
      host_gone(a);
    if (!a->host_connected) {
      if (host_there(a)) {
        a->host_connected = true;
        a->gone_since = 0;
      } else if (a->gone_since && now_s() - a->gone_since > HOST_GONE_GRACE) {
        host_gone_for_good(a);
      }
    }
    if (!x->pending && a->in_length > 0 && a->host_connected)
      handle_input(a);
    /* Idle: the next exec's keeper now, not when its request comes. */
    if (!x->active && a->spare.pid <= 0)
      guest_keeper_prefork(&a->cfg, &a->spare);
  }
}

int main(void) {
  static struct agent a = {.port = -1, .spare = {0, -1, {-1, -1, -1, -1}}};
  if (getpid() != 1) {
    guest_log("cordon-guest: runs as pid 1 of a microvm guest only");
    return 2;
  }
  /* SIGUSR1 is the keepers' (inherited blocked); SIGIO and SIGCHLD come through the signalfd. */
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGIO);
  sigaddset(&mask, SIGCHLD);
  sigaddset(&mask, SIGUSR1);
  sigaddset(&mask, SIGPIPE);
  sigprocmask(SIG_BLOCK, &mask, NULL);
  guest_boot(&a.cfg);
  a.port = guest_open_port();
  sigdelset(&mask, SIGUSR1);
  sigdelset(&mask, SIGPIPE);
  int sigfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
  if (a.port < 0 || sigfd < 0) {
    guest_log("cordon-guest: cannot serve: powering off");
    sync();
    reboot(RB_POWER_OFF);
    return 1;
  }
  fcntl(a.port, F_SETOWN, getpid());
  fcntl(a.port, F_SETFL, O_NONBLOCK | O_ASYNC);
  /* The guest's uptime at this point is the kernel's share of a cold boot (the host measures
   * the whole): the console says it for whoever tunes the boot. */
  char up[64] = "?";
  int ufd = open("/proc/uptime", O_RDONLY | O_CLOEXEC);
  if (ufd >= 0) {
    ssize_t n = read(ufd, up, sizeof(up) - 1);
    up[n > 0 ? n : 0] = '\0';
    up[strcspn(up, " ")] = '\0';
    close(ufd);
  }
  guest_log("cordon-guest: ready, %s s after the kernel started", up);
  serve(&a, sigfd);
  return 0;
}
