/* net/handoff and the proxy's handoff mode (docker's bridge hands each client's socket over the
 * proxy's unix socket): what a hostile bridge sends instead (no fd, a non-socket, a unix socket,
 * a listening socket, several fds, more than fit, nothing at all) is refused, every fd that came
 * is closed, and the proxy keeps serving; a client whose shared socket the sandbox made blocking
 * holds nobody else up. Loopback only: a proxy child, an upstream child, a "bridge" listener. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "net/handoff.h"
#include "net/proxy.h"

static struct {
  pid_t proxy, upstream;
  int stop;   /* the proxy's stop pipe, our end */
  int bridge; /* a TCP listener standing for the bridge's */
  int events; /* the proxy's event log */
  uint16_t upstream_port;
  char path[108]; /* the proxy's unix socket */
} rig;

static int listen_tcp(uint16_t *port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in in = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t length = sizeof in;
  assert_true(fd >= 0);
  assert_int_equal(bind(fd, (struct sockaddr *)&in, sizeof in), 0);
  assert_int_equal(listen(fd, 64), 0);
  assert_int_equal(getsockname(fd, (struct sockaddr *)&in, &length), 0);
  *port = ntohs(in.sin_port);
  return fd;
}

static int dial_tcp(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in in = {
      .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  assert_true(fd >= 0);
  assert_int_equal(connect(fd, (struct sockaddr *)&in, sizeof in), 0);
  return fd;
}

static int dial_proxy(void) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un address = {.sun_family = AF_UNIX};
  snprintf(address.sun_path, sizeof address.sun_path, "%s", rig.path);
  assert_true(fd >= 0);
  assert_int_equal(connect(fd, (struct sockaddr *)&address, sizeof address), 0);
  return fd;
}

/* Upstream: each connection gets "hello" then 16 MiB, sent blocking (a reader that stops
 * reading leaves it waiting: the flood test's pressure). */
static void upstream_main(int listen_fd) {
  signal(SIGPIPE, SIG_IGN);
  static char chunk[1 << 16];
  memset(chunk, 'x', sizeof chunk);
  for (;;) {
    int fd = accept(listen_fd, NULL, NULL);
    if (fd < 0)
      continue;
    if (fork() == 0) {
      send(fd, "hello", 5, MSG_NOSIGNAL);
      for (int i = 0; i < 256; i++)
        if (send(fd, chunk, sizeof chunk, MSG_NOSIGNAL) <= 0)
          break;
      _exit(0);
    }
    close(fd);
    while (waitpid(-1, NULL, WNOHANG) > 0)
      ;
  }
}

static int setup(void **state) {
  (void)state;
  signal(SIGPIPE, SIG_IGN);
  int up = listen_tcp(&rig.upstream_port);
  uint16_t bridge_port;
  rig.bridge = listen_tcp(&bridge_port);
  rig.upstream = fork();
  if (rig.upstream == 0)
    upstream_main(up);
  close(up);
  snprintf(rig.path, sizeof rig.path, "/tmp/cordon-test-handoff.%d.sock", (int)getpid());
  unlink(rig.path);
  int unix_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un address = {.sun_family = AF_UNIX};
  snprintf(address.sun_path, sizeof address.sun_path, "%s", rig.path);
  assert_int_equal(bind(unix_fd, (struct sockaddr *)&address, sizeof address), 0);
  assert_int_equal(listen(unix_fd, 64), 0);
  char events[] = "/tmp/cordon-test-handoff-events.XXXXXX";
  rig.events = mkstemp(events);
  assert_true(rig.events >= 0);
  unlink(events);
  int stop[2];
  assert_int_equal(pipe2(stop, O_CLOEXEC), 0);
  rig.proxy = fork();
  if (rig.proxy == 0) {
    close(stop[1]);
    const char *domains[] = {"up.test", NULL}, *cidrs[] = {"127.0.0.0/8", NULL};
    const char *pins[] = {"up.test:127.0.0.1", NULL};
    struct cordon_egress_rules rules = {domains, cidrs, pins};
    struct net_rules *parsed = NULL;
    struct cordon_error *err = NULL;
    if (net_rules_parse(&rules, &parsed, &err) < 0)
      _exit(3);
    struct net_proxy_options o = {
        .rules = parsed, .events_fd = rig.events, .header_timeout_ms = 500, .handoff = true};
    int r = net_proxy_serve(&o, unix_fd, stop[0], &err);
    _exit(r < 0 ? 1 : 0);
  }
  close(stop[0]);
  close(unix_fd);
  rig.stop = stop[1];
  return 0;
}

static int teardown(void **state) {
  (void)state;
  close(rig.stop);
  int status = -1;
  for (int i = 0; i < 300 && waitpid(rig.proxy, &status, WNOHANG) == 0; i++)
    usleep(10000);
  if (status == -1) {
    kill(rig.proxy, SIGKILL);
    waitpid(rig.proxy, NULL, 0);
  }
  kill(rig.upstream, SIGKILL);
  waitpid(rig.upstream, NULL, 0);
  unlink(rig.path);
  close(rig.bridge);
  close(rig.events);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0); /* it stopped when told */
  return 0;
}

/* Sends one message of `count` fds (none: the byte alone) on a fresh unix connection. */
static int send_fds(const int *fds, size_t count, char byte) {
  int conn = dial_proxy();
  struct iovec iov = {.iov_base = &byte, .iov_len = 1};
  union {
    struct cmsghdr align;
    char buf[CMSG_SPACE(sizeof(int) * 16)];
  } control;
  memset(&control, 0, sizeof control);
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
  if (count) {
    msg.msg_control = control.buf;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * count);
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * count);
    memcpy(CMSG_DATA(c), fds, sizeof(int) * count);
  }
  assert_int_equal(sendmsg(conn, &msg, MSG_NOSIGNAL), 1);
  return conn;
}

/* Does fd reach its end (EOF or hang-up) within ms? */
static bool ends_within(int fd, int ms) {
  struct pollfd p = {.fd = fd, .events = POLLIN};
  if (poll(&p, 1, ms) != 1)
    return false;
  char byte;
  return recv(fd, &byte, 1, MSG_DONTWAIT) <= 0 || (p.revents & POLLHUP);
}

/* A client of the "bridge": its accepted socket is handed to the proxy (and our copy of it
 * returned in *kept, or closed); the client's end is returned. */
static int client_through_handoff(int *kept) {
  uint16_t port;
  struct sockaddr_in in;
  socklen_t length = sizeof in;
  assert_int_equal(getsockname(rig.bridge, (struct sockaddr *)&in, &length), 0);
  port = ntohs(in.sin_port);
  int client = dial_tcp(port);
  int accepted = accept4(rig.bridge, NULL, NULL, SOCK_CLOEXEC);
  assert_true(accepted >= 0);
  int conn = dial_proxy();
  assert_int_equal(net_handoff_send(conn, accepted), 0);
  close(conn);
  if (kept)
    *kept = accepted;
  else
    close(accepted);
  return client;
}

/* A CONNECT through a handed-over socket reaches upstream: "200", then "hello", within 3 s. */
static void assert_serves(void) {
  int client = client_through_handoff(NULL);
  char request[128], reply[512];
  int n =
      snprintf(request, sizeof request, "CONNECT up.test:%u HTTP/1.1\r\n\r\n", rig.upstream_port);
  assert_int_equal(send(client, request, (size_t)n, 0), n);
  size_t got = 0;
  struct pollfd p = {.fd = client, .events = POLLIN};
  while (got < sizeof reply - 1 && poll(&p, 1, 3000) == 1) {
    ssize_t r = recv(client, reply + got, sizeof reply - 1 - got, 0);
    if (r <= 0)
      break;
    got += (size_t)r;
    reply[got] = 0;
    if (strstr(reply, "hello"))
      break;
  }
  reply[got] = 0;
  assert_true(strncmp(reply, "HTTP/1.1 200", 12) == 0);
  assert_non_null(strstr(reply, "\r\n\r\nhello"));
  close(client);
}

static bool logged(const char *what) {
  char buffer[16384];
  ssize_t n = pread(rig.events, buffer, sizeof buffer - 1, 0);
  buffer[n > 0 ? n : 0] = 0;
  return strstr(buffer, what) != NULL;
}

static void test_serves_a_handed_socket(void **state) {
  (void)state;
  assert_serves();
}

static void test_refuses_a_file(void **state) {
  (void)state;
  int file = open("/dev/null", O_RDONLY | O_CLOEXEC);
  int conn = send_fds(&file, 1, NET_HANDOFF_BYTE);
  close(file);
  assert_true(ends_within(conn, 2000));
  close(conn);
  assert_true(logged("\"bad-handoff\""));
  assert_serves();
}

static void test_refuses_a_unix_socket(void **state) {
  (void)state;
  int pair[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  int conn = send_fds(&pair[1], 1, NET_HANDOFF_BYTE);
  close(pair[1]);
  assert_true(ends_within(conn, 2000));
  assert_true(ends_within(pair[0], 2000)); /* the proxy closed the one it got */
  close(conn);
  close(pair[0]);
  assert_serves();
}

static void test_refuses_a_listening_socket(void **state) {
  (void)state;
  uint16_t port;
  int listener = listen_tcp(&port);
  int conn = send_fds(&listener, 1, NET_HANDOFF_BYTE);
  assert_true(ends_within(conn, 2000));
  close(conn);
  close(listener);
  assert_serves();
}

/* Several fds in one message (3 fit the proxy's room, 12 do not): all closed by the proxy,
 * which the pipes' read ends see as EOF once ours are closed too. */
static void test_refuses_many_fds(void **state) {
  (void)state;
  for (size_t count = 3; count <= 12; count += 9) {
    int reads[12], writes[12];
    for (size_t i = 0; i < count; i++) {
      int p[2];
      assert_int_equal(pipe2(p, O_CLOEXEC), 0);
      reads[i] = p[0];
      writes[i] = p[1];
    }
    int conn = send_fds(writes, count, NET_HANDOFF_BYTE);
    for (size_t i = 0; i < count; i++)
      close(writes[i]);
    assert_true(ends_within(conn, 2000));
    close(conn);
    for (size_t i = 0; i < count; i++) {
      struct pollfd p = {.fd = reads[i], .events = POLLIN};
      assert_int_equal(poll(&p, 1, 2000), 1);
      assert_true(p.revents & POLLHUP);
      close(reads[i]);
    }
  }
  assert_serves();
}

static void test_refuses_no_fd(void **state) {
  (void)state;
  int conn = send_fds(NULL, 0, NET_HANDOFF_BYTE);
  assert_true(ends_within(conn, 2000));
  close(conn);
  /* nothing at all: closed at the head's deadline (500 ms here) */
  int silent = dial_proxy();
  assert_true(ends_within(silent, 3000));
  close(silent);
  assert_serves();
}

/* The sandbox keeps its copy of the handed socket's open file, clears O_NONBLOCK on it and
 * stops reading while upstream floods: a splice into it would block. The proxy must end that
 * connection (the watchdog) and keep serving the next client. */
static void test_blocking_client_holds_nobody(void **state) {
  (void)state;
  int kept = -1;
  int client = client_through_handoff(&kept);
  int small = 4096;
  setsockopt(client, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  setsockopt(kept, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
  char request[128], reply[256];
  int n =
      snprintf(request, sizeof request, "CONNECT up.test:%u HTTP/1.1\r\n\r\n", rig.upstream_port);
  assert_int_equal(send(client, request, (size_t)n, 0), n);
  size_t got = 0; /* the reply's head only, byte by byte: the proxy has the socket by then */
  struct pollfd p = {.fd = client, .events = POLLIN};
  while (got < sizeof reply - 1 && poll(&p, 1, 3000) == 1 && recv(client, reply + got, 1, 0) == 1)
    if (++got >= 4 && memcmp(reply + got - 4, "\r\n\r\n", 4) == 0)
      break;
  reply[got] = 0;
  assert_true(strncmp(reply, "HTTP/1.1 200", 12) == 0);
  int flags = fcntl(kept, F_GETFL);
  assert_int_equal(fcntl(kept, F_SETFL, flags & ~O_NONBLOCK), 0);
  usleep(300000); /* the flood fills the client's socket; a blocking splice would now hang */
  assert_serves();
  close(client);
  close(kept);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_serves_a_handed_socket),
      cmocka_unit_test(test_refuses_a_file),
      cmocka_unit_test(test_refuses_a_unix_socket),
      cmocka_unit_test(test_refuses_a_listening_socket),
      cmocka_unit_test(test_refuses_many_fds),
      cmocka_unit_test(test_refuses_no_fd),
      cmocka_unit_test(test_blocking_client_holds_nobody),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
