/* The egress proxy's cost (issue 20, "Measure"): a bulk download and the set-up of a new
 * connection, each directly from a loopback server and through the two paths a session has,
 * in one process tree (the server is a thread here, the proxy and the bridge forked children):
 *
 *   proxy   the proxy on a loopback TCP listener, as on ns (the daemon serves the listener
 *           that the sandbox's pid 1 hands over): client -> proxy -> server
 *   bridge  as on docker (the bridge in the container): the bridge accepts and hands the
 *           client's socket to the proxy over a unix socket (SCM_RIGHTS); the proxy then
 *           relays client -> proxy -> server as above (no byte crosses the bridge)
 *
 * All three use the same client and the same server; "direct" is what `--net open` gives.
 *
 *   egress [BYTES] [ROUNDS] [all|direct|proxy|bridge]   (default: 1 GiB, 200 rounds, all)
 *
 * all: the throughput of each path (median of 3 downloads, interleaved) and its ratio to
 * direct (goal >= 0.7), and the median time from connect() to the first byte of the reply
 * over ROUNDS new connections (through the proxy: connect, CONNECT, "200", first byte) and
 * its difference from direct (goal <= 1 ms). One path: a single download, for an outside
 * timer that alternates runs.
 *
 * Where the cost is (perf, loopback): the relay's splices move page references, not bytes, so
 * a proxied byte is copied as often as a direct one (into the server's socket, out of the
 * client's); what the proxy adds is a second TCP connection's packet work (transmit, loopback
 * delivery, acks) and its wake-ups, nearly all in the kernel under splice(2). Hence one relay
 * on both paths (ns: no bridge; docker: the bridge hands the socket over and relays nothing)
 * and pipes that grow to 1 MiB under bulk. Both paths leave every socket's buffers to the
 * kernel's autotuning, as the direct path does (docs/design.md has the knobs tried). On a machine
 * whose CPUs are saturated, compare CPU time per byte (an outside timer) rather than wall
 * time: a path with more processes gets a larger share of a contended machine. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "net/proxy.h"

static size_t bulk_bytes = 1ul << 30;
static volatile int send_bulk = 1; /* 0: the latency rounds, one byte a connection */

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void *serve(void *arg) {
  int listen_fd = *(int *)arg;
  static char chunk[1 << 20];
  for (;;) {
    int fd = accept(listen_fd, NULL, NULL);
    if (fd < 0)
      continue;
    if (!send_bulk) {
      send(fd, "x", 1, MSG_NOSIGNAL);
    } else {
      for (size_t left = bulk_bytes; left > 0;) {
        ssize_t n = send(fd, chunk, left < sizeof chunk ? left : sizeof chunk, MSG_NOSIGNAL);
        if (n <= 0)
          break;
        left -= (size_t)n;
      }
    }
    close(fd);
  }
  return NULL;
}

static int listen_tcp(uint16_t *port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in in = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t length = sizeof in;
  if (fd < 0 || bind(fd, (struct sockaddr *)&in, sizeof in) < 0 || listen(fd, 512) < 0 ||
      getsockname(fd, (struct sockaddr *)&in, &length) < 0) {
    perror("egress: listen");
    exit(1);
  }
  *port = ntohs(in.sin_port);
  return fd;
}

static int dial(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in in = {
      .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (connect(fd, (struct sockaddr *)&in, sizeof in) < 0) {
    perror("egress: connect");
    exit(1);
  }
  return fd;
}

/* Opens a connection to the server, through the bridge when bridge_port != 0; returns it
 * once the tunnel is up (the "200" read). */
static int open_to(uint16_t server_port, uint16_t bridge_port) {
  if (!bridge_port)
    return dial(server_port);
  int fd = dial(bridge_port);
  char request[128], reply[256];
  int n =
      snprintf(request, sizeof request, "CONNECT bench.example:%u HTTP/1.1\r\n\r\n", server_port);
  if (send(fd, request, (size_t)n, 0) != n) {
    perror("egress: send");
    exit(1);
  }
  size_t got = 0;
  while (got < sizeof reply - 1) {
    ssize_t r = recv(fd, reply + got, 1, 0); /* byte by byte: leave the payload unread */
    if (r <= 0)
      break;
    got++;
    if (got >= 4 && memcmp(reply + got - 4, "\r\n\r\n", 4) == 0)
      break;
  }
  reply[got] = 0;
  if (strncmp(reply, "HTTP/1.1 200", 12) != 0) {
    fprintf(stderr, "egress: the proxy answered: %s\n", reply);
    exit(1);
  }
  return fd;
}

static double download(uint16_t server_port, uint16_t bridge_port) {
  static char buffer[1 << 20];
  double start = now_s();
  int fd = open_to(server_port, bridge_port);
  size_t total = 0;
  for (ssize_t n; (n = recv(fd, buffer, sizeof buffer, 0)) > 0;)
    total += (size_t)n;
  double seconds = now_s() - start;
  close(fd);
  if (total != bulk_bytes) {
    fprintf(stderr, "egress: got %zu bytes of %zu\n", total, bulk_bytes);
    exit(1);
  }
  return (double)total / seconds / 1e6;
}

static double first_byte(uint16_t server_port, uint16_t bridge_port) {
  char byte;
  double start = now_s();
  int fd = open_to(server_port, bridge_port);
  if (recv(fd, &byte, 1, 0) != 1) {
    fprintf(stderr, "egress: no first byte\n");
    exit(1);
  }
  double ms = (now_s() - start) * 1e3;
  close(fd);
  return ms;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, size_t n) {
  qsort(v, n, sizeof *v, by_value);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int connect_unix(void *arg) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un address = {.sun_family = AF_UNIX};
  snprintf(address.sun_path, sizeof address.sun_path, "%s", (const char *)arg);
  if (fd >= 0 && connect(fd, (struct sockaddr *)&address, sizeof address) < 0) {
    close(fd);
    return -1;
  }
  return fd;
}

int main(int argc, char **argv) {
  if (argc > 1)
    bulk_bytes = strtoull(argv[1], NULL, 10);
  int rounds = argc > 2 ? atoi(argv[2]) : 200;
  const char *only = argc > 3 && strcmp(argv[3], "all") ? argv[3] : NULL;
  if (rounds < 1 ||
      (only && strcmp(only, "direct") && strcmp(only, "proxy") && strcmp(only, "bridge"))) {
    fprintf(stderr, "usage: egress [BYTES] [ROUNDS] [all|direct|proxy|bridge]\n");
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  uint16_t server_port, bridge_port, proxy_port;
  int server_fd = listen_tcp(&server_port);
  int bridge_fd = listen_tcp(&bridge_port);
  int proxy_fd = listen_tcp(&proxy_port);
  char socket_path[108];
  snprintf(socket_path, sizeof socket_path, "/tmp/cordon-egress-bench.%d.sock", (int)getpid());
  int unix_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un address = {.sun_family = AF_UNIX};
  snprintf(address.sun_path, sizeof address.sun_path, "%s", socket_path);
  unlink(socket_path);
  if (bind(unix_fd, (struct sockaddr *)&address, sizeof address) < 0 || listen(unix_fd, 512) < 0) {
    perror(socket_path);
    return 1;
  }
  int stop[2];
  if (pipe(stop) < 0)
    return 1;
  char pin[64];
  snprintf(pin, sizeof pin, "bench.example:127.0.0.1");
  const char *domains[] = {"bench.example", NULL}, *cidrs[] = {"127.0.0.0/8", NULL};
  const char *pins[] = {pin, NULL};
  struct cordon_egress_rules rules = {domains, cidrs, pins};
  struct net_rules *parsed = NULL;
  struct cordon_error *err = NULL;
  if (net_rules_parse(&rules, &parsed, &err) < 0)
    return 1;
  pid_t children[3];
  for (int i = 0; i < 3; i++) {
    children[i] = fork();
    if (children[i] == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      close(stop[1]);
      struct net_proxy_options o = {.rules = parsed, .events_fd = -1, .handoff = i == 0};
      int r = i == 0   ? net_proxy_serve(&o, unix_fd, stop[0], &err)
              : i == 1 ? net_bridge_serve(bridge_fd, connect_unix, socket_path, stop[0], &err)
                       : net_proxy_serve(&o, proxy_fd, stop[0], &err);
      _exit(r < 0 ? 1 : 0);
    }
  }
  close(stop[0]);
  pthread_t server;
  pthread_create(&server, NULL, serve, &server_fd);
  usleep(100000);

  if (only) { /* one download on one path, for an outside timer */
    uint16_t via = !strcmp(only, "direct") ? 0 : !strcmp(only, "proxy") ? proxy_port : bridge_port;
    printf("%s: %.0f MB/s\n", only, download(server_port, via));
  } else {
    double direct[3], proxied[3], bridged[3];
    for (int i = 0; i < 3; i++) { /* interleaved, so drift in the machine's load hits all */
      direct[i] = download(server_port, 0);
      proxied[i] = download(server_port, proxy_port);
      bridged[i] = download(server_port, bridge_port);
    }
    double d = median(direct, 3), p = median(proxied, 3), q = median(bridged, 3);
    printf("bulk %zu bytes: direct %.0f MB/s; through the proxy (ns) %.0f MB/s: %.2fx; "
           "through bridge+proxy (docker) %.0f MB/s: %.2fx\n",
           bulk_bytes, d, p, p / d, q, q / d);
    send_bulk = 0;
    double *a = calloc((size_t)rounds, sizeof *a), *b = calloc((size_t)rounds, sizeof *b);
    double *c = calloc((size_t)rounds, sizeof *c);
    for (int i = 0; i < rounds; i++) {
      a[i] = first_byte(server_port, 0);
      b[i] = first_byte(server_port, proxy_port);
      c[i] = first_byte(server_port, bridge_port);
    }
    size_t n = (size_t)rounds;
    double la = median(a, n), lb = median(b, n), lc = median(c, n);
    printf("new connection to first byte, median of %d: direct %.3f ms; through the proxy "
           "%.3f ms: +%.3f ms; through bridge+proxy %.3f ms: +%.3f ms\n",
           rounds, la, lb, lb - la, lc, lc - la);
    free(a);
    free(b);
    free(c);
  }
  close(stop[1]);
  for (int i = 0; i < 3; i++)
    waitpid(children[i], NULL, 0);
  unlink(socket_path);
  net_rules_free(parsed);
  return 0;
}
