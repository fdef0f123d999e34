/* The exec request wire format (see wire.h): the pure encoder and parsers first, then the thin
 * socket layer both ends use. */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "exec/wire.h"

/* ---- pure ---------------------------------------------------------------------------------- */

static size_t vector_length(const char *const *v) {
  size_t n = 0;
  while (v && v[n])
    n++;
  return n;
}

static unsigned char *append_string(unsigned char *p, const char *s) {
  size_t n = strlen(s) + 1;
  memcpy(p, s, n);
  return p + n;
}

int exec_wire_encode(const struct exec_wire_protocol *p, const char *cwd, const char *const *argv,
                     const char *const *envp, uint32_t timeout_ms, unsigned char **out,
                     size_t *out_length, struct cordon_error **err) {
  size_t argc = vector_length(argv), envc = vector_length(envp);
  if (!cwd || cwd[0] != '/' || argc == 0 || !argv[0][0])
    return cordon_error_set(err, CORDON_ERR_USAGE, EINVAL,
                            "exec request without an absolute cwd or a program");
  if (argc + envc + 1 > EXEC_WIRE_MAX_STRINGS)
    return cordon_error_set(err, CORDON_ERR_USAGE, E2BIG, "exec request has too many strings");
  /* Stop counting once over the bound: the sum of unbounded lengths never matters. */
  size_t payload = strlen(cwd) + 1;
  for (size_t i = 0; i < argc && payload <= EXEC_WIRE_MAX_PAYLOAD; i++)
    payload += strlen(argv[i]) + 1;
  for (size_t i = 0; i < envc && payload <= EXEC_WIRE_MAX_PAYLOAD; i++)
    payload += strlen(envp[i]) + 1;
  if (payload > EXEC_WIRE_MAX_PAYLOAD)
    return cordon_error_set(err, CORDON_ERR_USAGE, E2BIG,
                            "exec request (argv and environment) is larger than %u bytes",
                            EXEC_WIRE_MAX_PAYLOAD);
  struct exec_wire_header h = {
      .magic = p->request_magic,
      .length = (uint32_t)payload,
      .argc = (uint32_t)argc,
      .envc = (uint32_t)envc,
      .timeout_ms = timeout_ms,
  };
  unsigned char *buf = malloc(sizeof(h) + payload);
  if (!buf)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "exec request");
  memcpy(buf, &h, sizeof(h));
  unsigned char *q = append_string(buf + sizeof(h), cwd);
  for (size_t i = 0; i < argc; i++)
    q = append_string(q, argv[i]);
  for (size_t i = 0; i < envc; i++)
    q = append_string(q, envp[i]);
  *out = buf;
  *out_length = sizeof(h) + payload;
  return 0;
}

int exec_wire_check_header(const struct exec_wire_protocol *p, const struct exec_wire_header *h,
                           struct cordon_error **err) {
  if (h->magic != p->request_magic)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "exec request: bad magic 0x%08x", h->magic);
  if (h->length == 0 || h->length > EXEC_WIRE_MAX_PAYLOAD)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "exec request: bad length %u", h->length);
  /* Every string takes at least its NUL: more strings than bytes cannot be. */
  if (h->argc == 0 || h->argc > EXEC_WIRE_MAX_STRINGS || h->envc > EXEC_WIRE_MAX_STRINGS ||
      (uint64_t)h->argc + h->envc + 1 > h->length)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "exec request: bad counts");
  return 0;
}

void exec_wire_request_clear(struct exec_wire_request *r) {
  free(r->argv);
  free(r->envp);
  free(r->payload);
  memset(r, 0, sizeof(*r));
}

int exec_wire_decode(const struct exec_wire_protocol *p, const struct exec_wire_header *h,
                     const unsigned char *payload, struct exec_wire_request *out,
                     struct cordon_error **err) {
  memset(out, 0, sizeof(*out));
  if (exec_wire_check_header(p, h, err) < 0)
    return -1;
  if (payload[h->length - 1] != 0)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "exec request: unterminated string");
  const char **argv = calloc((size_t)h->argc + 1, sizeof(char *));
  const char **envp = calloc((size_t)h->envc + 1, sizeof(char *));
  if (!argv || !envp) {
    free(argv);
    free(envp);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "exec request");
  }
  const char *why = NULL, *cwd = NULL;
  const char *s = (const char *)payload, *end = (const char *)payload + h->length;
  size_t total = (size_t)h->argc + h->envc + 1;
  for (size_t i = 0; i < total; i++) {
    if (s >= end) {
      why = "too few strings";
      break;
    }
    if (i == 0)
      cwd = s;
    else if (i <= h->argc)
      argv[i - 1] = s;
    else
      envp[i - 1 - h->argc] = s;
    s += strlen(s) + 1; /* the last byte is NUL, so this stays within the payload */
  }
  if (!why && s != end)
    why = "trailing bytes";
  if (!why && (cwd[0] != '/' || !argv[0][0]))
    why = "relative cwd or empty program";
  if (why) {
    free(argv);
    free(envp);
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "exec request: %s", why);
  }
  out->cwd = cwd;
  out->argv = argv;
  out->envp = envp;
  out->timeout_ms = h->timeout_ms;
  return 0;
}

uint32_t exec_wire_timeout_ms(double seconds) {
  double ms = seconds > 0 ? seconds * 1000.0 : 0;
  return ms <= 0 ? 0 : ms < 1 ? 1 : ms > (double)UINT32_MAX ? UINT32_MAX : (uint32_t)ms;
}

static bool reply_in_range(const struct exec_wire_protocol *p, const struct exec_wire_reply *r) {
  switch (r->type) {
  case EXEC_WIRE_RUNNING:
  case EXEC_WIRE_TIMED_OUT: return r->a == 0 && r->b == 0;
  case EXEC_WIRE_FAILED:
    return r->a >= EXEC_WIRE_STAGE_SETUP && r->a <= p->last_stage && r->b >= 0 &&
           r->b <= EXEC_WIRE_MAX_ERRNO;
  case EXEC_WIRE_EXITED:
    /* An exit code, or 128+N for a command killed by signal N. */
    return r->a >= 0 && r->a <= 255 && r->b >= 0 && r->b <= 64 && (r->b == 0 || r->a == 128 + r->b);
  case EXEC_WIRE_EXEC_FAILED:
    return (r->a == 126 || r->a == 127) && r->b >= 0 && r->b <= EXEC_WIRE_MAX_ERRNO;
  default: return false;
  }
}

int exec_wire_reply_parse(const struct exec_wire_protocol *p, const unsigned char *bytes,
                          size_t length, struct exec_wire_reply *out, struct cordon_error **err) {
  struct exec_wire_reply r;
  memset(out, 0, sizeof(*out));
  if (length != sizeof(r))
    return cordon_error_set(err, CORDON_ERR_INVALID, EPROTO,
                            "malformed reply from %s: %zu bytes instead of %zu", p->peer, length,
                            sizeof(r));
  memcpy(&r, bytes, sizeof(r));
  if (r.magic != p->reply_magic)
    return cordon_error_set(err, CORDON_ERR_INVALID, EPROTO,
                            "malformed reply from %s: bad magic 0x%08x", p->peer, r.magic);
  /* strchr would find a type of 0 (the terminator): refuse it first. */
  if (r.type == 0 || r.type > 0x7f || !strchr(p->reply_types, (int)r.type))
    return cordon_error_set(err, CORDON_ERR_INVALID, EPROTO,
                            "malformed reply from %s: unknown type 0x%08x", p->peer, r.type);
  if (!reply_in_range(p, &r))
    return cordon_error_set(err, CORDON_ERR_INVALID, EPROTO,
                            "malformed reply from %s: type '%c' with values %d, %d out of range",
                            p->peer, (char)r.type, (int)r.a, (int)r.b);
  *out = r;
  return 0;
}

/* ---- I/O ------------------------------------------------------------------------------------ */

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

/* A deadline on the monotonic clock for timeout_ms from now; < 0: none. */
static double deadline_after(int timeout_ms) {
  return timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
}

/* Wait until fd is readable (or hung up). Returns 1, 0 when the deadline passed, -1 (errno). */
static int wait_readable(int fd, double deadline) {
  for (;;) {
    int wait = -1;
    if (deadline >= 0) {
      double left = deadline - now_ms();
      if (left <= 0)
        return 0;
      wait = left >= INT_MAX ? INT_MAX : (int)left + 1;
    }
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    int ready = poll(&pfd, 1, wait);
    if (ready > 0)
      return 1;
    if (ready < 0 && errno != EINTR)
      return -1;
  }
}

int exec_wire_send_with_fds(int sock, const void *bytes, size_t length, const int *fds,
                            size_t n_fds) {
  union {
    char buf[CMSG_SPACE(sizeof(int) * EXEC_WIRE_STDIO_FDS)];
    struct cmsghdr align;
  } control;
  if (n_fds > EXEC_WIRE_STDIO_FDS) {
    errno = EINVAL;
    return -1;
  }
  memset(&control, 0, sizeof(control));
  struct iovec iov = {.iov_base = (void *)bytes, .iov_len = length};
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
  if (n_fds > 0) {
    msg.msg_control = control.buf;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
    memcpy(CMSG_DATA(cm), fds, sizeof(int) * n_fds);
  }
  size_t sent = 0;
  while (sent < length) {
    ssize_t n = sendmsg(sock, &msg, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return -1;
    sent += (size_t)n;
    iov.iov_base = (char *)bytes + sent;
    iov.iov_len = length - sent;
    msg.msg_control = NULL; /* the fds travel once, with the first bytes */
    msg.msg_controllen = 0;
  }
  return 0;
}

static void close_fds(int *fds, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (fds[i] >= 0) {
      close(fds[i]);
      fds[i] = -1;
    }
}

/* Keep the fds of one SCM_RIGHTS message in fds[] while there is room, counting every one in
 * *n_fds (so that too many can be refused) and closing those that do not fit. */
static void take_fds(struct msghdr *msg, int *fds, size_t max_fds, size_t *n_fds) {
  if (msg->msg_flags & MSG_CTRUNC)
    (*n_fds)++; /* more than the control buffer held: the kernel dropped the rest */
  for (struct cmsghdr *cm = CMSG_FIRSTHDR(msg); cm; cm = CMSG_NXTHDR(msg, cm)) {
    if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
      continue;
    size_t count = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; i++) {
      int fd;
      memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
      if (*n_fds < max_fds)
        fds[*n_fds] = fd;
      else
        close(fd);
      (*n_fds)++;
    }
  }
}

/* Read exactly n bytes before the deadline. fds attached to the first bytes go to take_fds
 * (fds NULL: none wanted); fds attached to later bytes are closed. Returns 1, 0 at EOF before
 * any byte, -1 with errno (ETIMEDOUT; EPROTO at EOF within the bytes). */
static int receive_exact(int sock, void *buf, size_t n, double deadline, int *fds, size_t max_fds,
                         size_t *n_fds) {
  size_t got = 0;
  while (got < n) {
    int ready = wait_readable(sock, deadline);
    if (ready <= 0) {
      if (ready == 0)
        errno = ETIMEDOUT;
      return -1;
    }
    union {
      char buf[CMSG_SPACE(sizeof(int) * EXEC_WIRE_STDIO_FDS)];
      struct cmsghdr align;
    } control;
    struct iovec iov = {.iov_base = (char *)buf + got, .iov_len = n - got};
    struct msghdr msg = {
        .msg_iov = &iov,
        .msg_iovlen = 1,
        .msg_control = control.buf,
        .msg_controllen = sizeof(control.buf),
    };
    ssize_t r = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (r < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (r >= 0) {
      size_t dropped = 0;
      if (fds)
        take_fds(&msg, fds, max_fds, n_fds);
      else
        take_fds(&msg, NULL, 0, &dropped);
    }
    if (r < 0)
      return -1;
    if (r == 0) {
      if (got == 0)
        return 0;
      errno = EPROTO;
      return -1;
    }
    got += (size_t)r;
    fds = NULL; /* the stdio travels with the first bytes only */
  }
  return 1;
}

int exec_wire_receive_request(int conn, const struct exec_wire_protocol *p, int timeout_ms,
                              int stdio[EXEC_WIRE_STDIO_FDS], struct exec_wire_request *req,
                              struct cordon_error **err) {
  memset(req, 0, sizeof(*req));
  for (size_t i = 0; i < EXEC_WIRE_STDIO_FDS; i++)
    stdio[i] = -1;
  double deadline = deadline_after(timeout_ms);
  struct exec_wire_header h;
  size_t n_fds = 0;
  int r = receive_exact(conn, &h, sizeof(h), deadline, stdio, EXEC_WIRE_STDIO_FDS, &n_fds);
  if (r <= 0) {
    close_fds(stdio, EXEC_WIRE_STDIO_FDS);
    if (r == 0)
      return 0;
    int e = errno == EPROTO ? 0 : errno;
    cordon_error_set(err, CORDON_ERR_INVALID, e, "exec request: %s",
                     e ? "no complete header" : "truncated header");
    return -1;
  }
  if (n_fds != EXEC_WIRE_STDIO_FDS) {
    close_fds(stdio, EXEC_WIRE_STDIO_FDS);
    return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                            "exec request with %zu fds instead of the command's 3 stdio fds",
                            n_fds);
  }
  if (exec_wire_check_header(p, &h, err) < 0) {
    close_fds(stdio, EXEC_WIRE_STDIO_FDS);
    return -1;
  }
  unsigned char *payload = malloc(h.length);
  if (!payload) {
    close_fds(stdio, EXEC_WIRE_STDIO_FDS);
    cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "exec request");
    return -1;
  }
  r = receive_exact(conn, payload, h.length, deadline, NULL, 0, NULL);
  if (r <= 0) {
    int e = r == 0 || errno == EPROTO ? 0 : errno;
    free(payload);
    close_fds(stdio, EXEC_WIRE_STDIO_FDS);
    cordon_error_set(err, CORDON_ERR_INVALID, e, "exec request: %s",
                     e ? "no complete payload" : "truncated payload");
    return -1;
  }
  if (exec_wire_decode(p, &h, payload, req, err) < 0) {
    free(payload);
    close_fds(stdio, EXEC_WIRE_STDIO_FDS);
    return -1;
  }
  req->payload = payload;
  return 1;
}

int exec_wire_send_reply(int conn, const struct exec_wire_protocol *p,
                         enum exec_wire_reply_type type, int32_t a, int32_t b) {
  struct exec_wire_reply r = {.magic = p->reply_magic, .type = (uint32_t)type, .a = a, .b = b};
  const char *q = (const char *)&r;
  size_t left = sizeof(r);
  while (left > 0) {
    ssize_t n = send(conn, q, left, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return -1; /* the host hung up: nobody to tell */
    q += n;
    left -= (size_t)n;
  }
  return 0;
}

int exec_wire_read_reply(int conn, const struct exec_wire_protocol *p, int timeout_ms,
                         struct exec_wire_reply *reply, struct cordon_error **err) {
  unsigned char buf[sizeof(*reply)];
  size_t got = 0;
  double deadline = deadline_after(timeout_ms);
  memset(reply, 0, sizeof(*reply));
  while (got < sizeof(buf)) {
    int ready = wait_readable(conn, deadline);
    if (ready == 0) {
      cordon_error_set(err, CORDON_ERR_SYSTEM, ETIMEDOUT,
                       "%s sent no complete reply within %d ms (%zu of %zu bytes)", p->peer,
                       timeout_ms, got, sizeof(buf));
      return -1;
    }
    /* recv() with no control buffer: fds the sandbox attaches are discarded by the kernel. */
    ssize_t n = ready < 0 ? -1 : recv(conn, buf + got, sizeof(buf) - got, MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (n <= 0) {
      if (got == 0)
        return 0;
      break; /* a partial reply: the parser names it */
    }
    got += (size_t)n;
  }
  return exec_wire_reply_parse(p, buf, got, reply, err) < 0 ? -1 : 1;
}

void exec_wire_send_kill(int conn) {
  char byte = EXEC_WIRE_KILL_BYTE;
  (void)!send(conn, &byte, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
}
