/* The pipe relay (see pipe-relay.h): one thread polls the caller's input, the program's stdin
 * (when input waits for it), its stdout and stderr, and a wake pipe that carries 'F' (the
 * program has ended: drain and stop). Our ends of the pipes are non-blocking; the caller's fds
 * are used as they are. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "base/fs.h"
#include "exec/pipe-relay.h"

#define RELAY_CHUNK 4096
/* After the program ended: stop once its output has been quiet this long, or at the latest
 * after DRAIN_LIMIT_MS (something that outlived it may hold its pipes). */
#define DRAIN_QUIET_MS 200
#define DRAIN_LIMIT_MS 2000

enum { TO_IN, FROM_OUT, FROM_ERR };

struct exec_pipe_relay {
  int in_fd, out_fd, err_fd; /* the caller's (never closed here) */
  int ours[3];               /* our ends: stdin's write end, stdout's and stderr's read ends */
  int theirs[3];             /* the program's ends */
  int wake[2];               /* [1] written by finish, [0] polled by the relay */
  /* A seekable input (a file): a copy of the program's end of its stdin pipe, which says how
   * much it left unread there when it ends; -1 otherwise. While it is open the pipe always has
   * a reader, so a program that closes its stdin early costs at most a pipeful read ahead,
   * all of it given back (give_back_input), instead of an EPIPE. */
  int in_probe;
  pthread_t thread;
  bool started, finished;
  unsigned char pending[RELAY_CHUNK]; /* input read but not yet taken by the program */
  size_t pending_at, pending_length;
  bool input_ended;
};

int exec_pipe_relay_open(int in_fd, int out_fd, int err_fd, struct exec_pipe_relay **out,
                         struct cordon_error **err) {
  struct exec_pipe_relay *r = calloc(1, sizeof(*r));
  if (!r)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "stdio pipes");
  *r = (struct exec_pipe_relay){.in_fd = in_fd,
                                .out_fd = out_fd,
                                .err_fd = err_fd,
                                .ours = {-1, -1, -1},
                                .theirs = {-1, -1, -1},
                                .wake = {-1, -1},
                                .in_probe = -1};
  int p[2], e = 0;
  for (int i = 0; i < 3 && !e; i++) {
    if (pipe2(p, O_CLOEXEC) < 0) {
      e = errno;
      break;
    }
    /* Above 0-2 (which the caller may have closed), so the child's dup2 onto 0-2 cannot
     * clobber one end with another. */
    for (int k = 0; k < 2 && !e; k++)
      if (p[k] < 3) {
        int moved = fcntl(p[k], F_DUPFD_CLOEXEC, 3);
        if (moved < 0)
          e = errno;
        close(p[k]);
        p[k] = moved;
      }
    /* stdin: the program reads p[0]; stdout and stderr: it writes p[1]. */
    r->theirs[i] = i == TO_IN ? p[0] : p[1];
    r->ours[i] = i == TO_IN ? p[1] : p[0];
    if (fs_set_nonblocking(r->ours[i]) < 0)
      e = errno;
  }
  if (!e && pipe2(r->wake, O_CLOEXEC | O_NONBLOCK) < 0)
    e = errno;
  if (e) {
    exec_pipe_relay_free(r);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "cannot create the stdio pipes");
  }
  if (in_fd < 0) {
    r->input_ended = true; /* the program reads end of input at once */
    fs_close_reset(&r->ours[TO_IN]);
  } else if (lseek(in_fd, 0, SEEK_CUR) >= 0) {
    r->in_probe = fcntl(r->theirs[TO_IN], F_DUPFD_CLOEXEC, 3); /* -1: input as a pipe's */
  }
  *out = r;
  return 0;
}

void exec_pipe_relay_child_fds(const struct exec_pipe_relay *r, int fds[3]) {
  for (int i = 0; i < 3; i++)
    fds[i] = r->theirs[i];
}

static void end_input(struct exec_pipe_relay *r) {
  r->input_ended = true;
  r->pending_length = 0;
  fs_close_reset(&r->ours[TO_IN]); /* the program reads end of input */
}

/* The program has ended. What was read from a seekable input but never taken by the program
 * (in our buffer, or still in its pipe) goes back: the input's offset moves back over it, as
 * head(1) does, so whoever reads the caller's input next (the rest of a shell loop over a
 * file) finds it there. Input from a pipe or a terminal cannot be given back. */
static void give_back_input(struct exec_pipe_relay *r) {
  if (r->in_probe < 0)
    return;
  int queued = 0;
  if (ioctl(r->in_probe, FIONREAD, &queued) < 0 || queued < 0)
    queued = 0;
  off_t unread = (off_t)r->pending_length + queued;
  if (unread > 0)
    (void)!lseek(r->in_fd, -unread, SEEK_CUR);
  fs_close_reset(&r->in_probe);
}

static void relay_input(struct exec_pipe_relay *r) {
  if (r->pending_length == 0) {
    ssize_t n;
    do
      n = read(r->in_fd, r->pending, sizeof(r->pending));
    while (n < 0 && errno == EINTR);
    if (n < 0 && errno == EAGAIN)
      return;
    if (n <= 0) {
      end_input(r);
      return;
    }
    r->pending_at = 0;
    r->pending_length = (size_t)n;
  }
  ssize_t w = write(r->ours[TO_IN], r->pending + r->pending_at, r->pending_length);
  if (w > 0) {
    r->pending_at += (size_t)w;
    r->pending_length -= (size_t)w;
  } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
    end_input(r); /* the program closed its stdin (EPIPE; SIGPIPE is blocked here) */
  }
}

/* Copy what one output pipe holds to its caller's fd until it would block; at its end (or an
 * error) close it. A caller's fd that fails is dropped: the output is read and discarded. */
static void relay_output(struct exec_pipe_relay *r, int which) {
  int *to = which == FROM_OUT ? &r->out_fd : &r->err_fd;
  unsigned char buf[RELAY_CHUNK];
  for (;;) {
    ssize_t n = read(r->ours[which], buf, sizeof(buf));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && errno == EAGAIN)
      return;
    if (n <= 0) {
      fs_close_reset(&r->ours[which]);
      return;
    }
    if (*to >= 0 && fs_write_all(*to, buf, (size_t)n) < 0)
      *to = -1;
  }
}

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void *relay_main(void *arg) {
  struct exec_pipe_relay *r = arg;
  bool draining = false;
  long long deadline = 0;
  for (;;) {
    if (draining && r->ours[FROM_OUT] < 0 && r->ours[FROM_ERR] < 0)
      return NULL;
    bool want_input = !draining && !r->input_ended && r->pending_length == 0;
    struct pollfd pfds[5] = {
        {.fd = r->wake[0], .events = POLLIN},
        {.fd = want_input ? r->in_fd : -1, .events = POLLIN},
        {.fd = !draining && r->pending_length ? r->ours[TO_IN] : -1, .events = POLLOUT},
        {.fd = r->ours[FROM_OUT], .events = POLLIN},
        {.fd = r->ours[FROM_ERR], .events = POLLIN},
    };
    int timeout = -1;
    if (draining) {
      long long left = deadline - now_ms();
      if (left <= 0)
        return NULL;
      timeout = left < DRAIN_QUIET_MS ? (int)left : DRAIN_QUIET_MS;
    }
    int ready = poll(pfds, 5, timeout);
    if (ready < 0 && errno == EINTR)
      continue;
    if (ready < 0 || (ready == 0 && draining))
      return NULL;
    if (pfds[0].revents) {
      char c;
      while (read(r->wake[0], &c, 1) == 1)
        if (c == 'F' && !draining) {
          draining = true;
          deadline = now_ms() + DRAIN_LIMIT_MS;
          give_back_input(r);
          end_input(r);
        }
    }
    if (pfds[1].revents && !draining)
      relay_input(r);
    if (pfds[2].revents && !draining && r->ours[TO_IN] >= 0)
      relay_input(r);
    for (int i = FROM_OUT; i <= FROM_ERR; i++)
      if (pfds[i + 2].revents && r->ours[i] >= 0)
        relay_output(r, i);
  }
}

int exec_pipe_relay_start(struct exec_pipe_relay *r, struct cordon_error **err) {
  for (int i = 0; i < 3; i++)
    fs_close_reset(&r->theirs[i]);
  /* Signals stay with the caller's threads: the relay only polls, and a write to a program
   * that closed its stdin fails with EPIPE here instead of raising SIGPIPE. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int e = pthread_create(&r->thread, NULL, relay_main, r);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (e != 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "cannot start the stdio relay");
  r->started = true;
  return 0;
}

void exec_pipe_relay_finish(struct exec_pipe_relay *r) {
  if (!r || r->finished)
    return;
  r->finished = true;
  if (r->started) {
    char c = 'F';
    while (write(r->wake[1], &c, 1) < 0 && errno == EINTR)
      ;
    pthread_join(r->thread, NULL);
  }
}

void exec_pipe_relay_free(struct exec_pipe_relay *r) {
  if (!r)
    return;
  exec_pipe_relay_finish(r);
  for (int i = 0; i < 3; i++) {
    fs_close_reset(&r->ours[i]);
    fs_close_reset(&r->theirs[i]);
  }
  fs_close_reset(&r->wake[0]);
  fs_close_reset(&r->wake[1]);
  fs_close_reset(&r->in_probe);
  free(r);
}
