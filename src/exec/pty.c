/* The pty relay (see pty.h): one thread polls the user's input, the master and a wake pipe;
 * the wake pipe carries 'W' (copy the window size) and 'Q' (stop). Input that the master cannot
 * take yet waits in a small buffer, and meanwhile no more input is read, so the relay never
 * blocks on a command that does not read while its output must keep flowing. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "base/fs.h"
#include "exec/pty.h"

#define RELAY_CHUNK 4096
/* What the command's terminal reads as end of input when the user's input ends (VEOF, ^D). */
#define END_OF_INPUT '\004'

struct exec_pty {
  int master, slave;
  int in_fd, out_fd, size_fd;
  int wake[2]; /* [1] written by exec_pty_resize/finish, [0] polled by the relay */
  pthread_t thread;
  bool started, finished;
  bool raw; /* in_fd's terminal is in raw mode; saved holds its settings */
  struct termios saved;
  unsigned char pending[RELAY_CHUNK]; /* input read but not yet taken by the master */
  size_t pending_at, pending_length;
  bool input_ended; /* in_fd at EOF (or gone): ^D sent, no more polling it */
};

static void copy_window_size(const struct exec_pty *p) {
  struct winsize ws;
  if (p->size_fd >= 0 && ioctl(p->size_fd, TIOCGWINSZ, &ws) == 0)
    ioctl(p->master, TIOCSWINSZ, &ws); /* the kernel sends SIGWINCH to the command's group */
}

int exec_pty_open(int in_fd, int out_fd, int size_fd, struct exec_pty **out,
                  struct cordon_error **err) {
  struct exec_pty *p = calloc(1, sizeof(*p));
  if (!p)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "terminal");
  *p = (struct exec_pty){.master = -1,
                         .slave = -1,
                         .in_fd = in_fd,
                         .out_fd = out_fd,
                         .size_fd = size_fd,
                         .wake = {-1, -1}};
  p->master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (p->master < 0 || unlockpt(p->master) < 0) {
    int e = errno;
    exec_pty_free(p);
    return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, e, "cannot open a pseudo-terminal");
  }
  /* The peer by the master itself, not by a path under /dev/pts that could be swapped. */
  p->slave = ioctl(p->master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (p->slave < 0 || pipe2(p->wake, O_CLOEXEC | O_NONBLOCK) < 0) {
    int e = errno;
    exec_pty_free(p);
    return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, e, "cannot open a pseudo-terminal");
  }
  /* The master never blocks the relay: it polls instead. */
  int flags = fcntl(p->master, F_GETFL);
  if (flags >= 0)
    fcntl(p->master, F_SETFL, flags | O_NONBLOCK);
  copy_window_size(p);
  *out = p;
  return 0;
}

int exec_pty_slave(const struct exec_pty *p) {
  return p->slave;
}

/* Relay the master's output until it would block: returns 1, or 0 once no more can come (every
 * slave closed and the buffer empty: EIO) or our reader is gone. */
static int relay_output(struct exec_pty *p) {
  unsigned char buf[RELAY_CHUNK];
  for (;;) {
    ssize_t n = read(p->master, buf, sizeof(buf));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && errno == EAGAIN)
      return 1;
    if (n <= 0)
      return 0;
    if (fs_write_all(p->out_fd, buf, (size_t)n) < 0)
      return 0; /* our reader is gone: the command still runs, its output is dropped */
  }
}

/* After the command ended. The line discipline moves what the slave wrote to the master's side
 * asynchronously (a kernel work item), so an empty read right away proves nothing: with our
 * own slave closed, the master reads EIO once everything arrived and nobody holds the slave.
 * Something that escaped the command's end may still hold it: then we stop after a quiet
 * while, or at the latest after DRAIN_LIMIT_MS. */
#define DRAIN_QUIET_MS 200
#define DRAIN_LIMIT_MS 2000
static void drain_output(struct exec_pty *p) {
  fs_close_reset(&p->slave);
  for (int waited = 0; waited < DRAIN_LIMIT_MS; waited += DRAIN_QUIET_MS / 4) {
    struct pollfd pfd = {.fd = p->master, .events = POLLIN};
    int ready = poll(&pfd, 1, DRAIN_QUIET_MS);
    if (ready < 0 && errno == EINTR)
      continue;
    if (ready <= 0 || relay_output(p) == 0)
      return;
  }
}

static void relay_input(struct exec_pty *p) {
  if (p->pending_length == 0) {
    ssize_t n;
    do
      n = read(p->in_fd, p->pending, sizeof(p->pending));
    while (n < 0 && errno == EINTR);
    if (n <= 0) {
      p->input_ended = true;
      p->pending[0] = END_OF_INPUT;
      n = 1;
    }
    p->pending_at = 0;
    p->pending_length = (size_t)n;
  }
  ssize_t w = write(p->master, p->pending + p->pending_at, p->pending_length);
  if (w > 0) {
    p->pending_at += (size_t)w;
    p->pending_length -= (size_t)w;
  } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
    p->pending_length = 0;
    p->input_ended = true;
  }
}

static void *relay_main(void *arg) {
  struct exec_pty *p = arg;
  for (;;) {
    struct pollfd pfds[3] = {
        {.fd = p->wake[0], .events = POLLIN},
        {.fd = p->master, .events = POLLIN | (p->pending_length ? POLLOUT : 0)},
        {.fd = p->in_fd >= 0 && !p->input_ended && !p->pending_length ? p->in_fd : -1,
         .events = POLLIN},
    };
    if (poll(pfds, 3, -1) < 0) {
      if (errno == EINTR)
        continue;
      return NULL;
    }
    if (pfds[0].revents) {
      char c = 0;
      bool quit = false;
      while (read(p->wake[0], &c, 1) == 1)
        if (c == 'Q')
          quit = true;
        else
          copy_window_size(p);
      if (quit)
        return NULL;
    }
    if (pfds[1].revents & (POLLIN | POLLHUP | POLLERR))
      (void)relay_output(p);
    if ((pfds[1].revents & POLLOUT) || (pfds[2].revents && !p->pending_length))
      relay_input(p);
    /* Everything that held the slave is gone (we keep one, so this is not expected). */
    if ((pfds[1].revents & (POLLHUP | POLLERR)) && !(pfds[1].revents & POLLIN))
      return NULL;
  }
}

int exec_pty_start(struct exec_pty *p, struct cordon_error **err) {
  if (p->in_fd >= 0 && tcgetattr(p->in_fd, &p->saved) == 0) {
    struct termios raw = p->saved;
    cfmakeraw(&raw);
    if (tcsetattr(p->in_fd, TCSANOW, &raw) == 0)
      p->raw = true;
  }
  /* Signals stay with the caller's threads: the relay only polls. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int r = pthread_create(&p->thread, NULL, relay_main, p);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (r != 0) {
    if (p->raw)
      tcsetattr(p->in_fd, TCSAFLUSH, &p->saved);
    p->raw = false;
    return cordon_error_set(err, CORDON_ERR_SYSTEM, r, "cannot start the terminal relay");
  }
  p->started = true;
  return 0;
}

void exec_pty_resize(struct exec_pty *p) {
  char c = 'W';
  if (p && p->wake[1] >= 0)
    (void)!write(p->wake[1], &c, 1);
}

void exec_pty_finish(struct exec_pty *p) {
  if (!p || p->finished)
    return;
  p->finished = true;
  if (p->started) {
    char c = 'Q';
    while (write(p->wake[1], &c, 1) < 0 && errno == EINTR)
      ;
    pthread_join(p->thread, NULL);
    drain_output(p);
  }
  if (p->raw)
    tcsetattr(p->in_fd, TCSADRAIN, &p->saved);
  p->raw = false;
}

void exec_pty_free(struct exec_pty *p) {
  if (!p)
    return;
  exec_pty_finish(p);
  fs_close_reset(&p->slave);
  fs_close_reset(&p->master);
  fs_close_reset(&p->wake[0]);
  fs_close_reset(&p->wake[1]);
  free(p);
}
