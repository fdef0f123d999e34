/* A test harness for the egress proxy without a backend (tests/cli/egress-proxy.bats, bench/):
 * the proxy (net_proxy_serve) on a unix socket in this process, and the bridge
 * (net_bridge_serve) on a loopback TCP port in a child, as a sandbox would have them.
 *
 *   net-proxyd --socket PATH --port-file FILE [--port N] [--events FILE] [--confine]
 *              [--allow-domain NAME]... [--allow-cidr CIDR]... [--resolve NAME:ADDR]...
 *              [--max-connections N] [--header-timeout-ms N] [--idle-timeout-ms N]
 *
 * The bridge's port is written to FILE once both listen. SIGTERM or SIGINT stops both. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "net/proxy.h"

static int stop_pipe[2] = {-1, -1};

static void on_signal(int signal) {
  (void)signal;
  ssize_t ignored = write(stop_pipe[1], "x", 1);
  (void)ignored;
}

static int connect_unix(void *arg) {
  const char *path = arg;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un address = {.sun_family = AF_UNIX};
  snprintf(address.sun_path, sizeof address.sun_path, "%s", path);
  if (fd >= 0 && connect(fd, (struct sockaddr *)&address, sizeof address) < 0) {
    close(fd);
    return -1;
  }
  return fd;
}

static void die(const char *what) {
  fprintf(stderr, "net-proxyd: %s: %s\n", what, strerror(errno));
  exit(2);
}

static const char **push(const char **list, size_t *count, const char *value) {
  list = realloc(list, (*count + 2) * sizeof *list);
  if (!list)
    die("realloc");
  list[(*count)++] = value;
  list[*count] = NULL;
  return list;
}

int main(int argc, char **argv) {
  const char *socket_path = NULL, *port_file = NULL, *events_path = NULL;
  const char **domains = NULL, **cidrs = NULL, **pins = NULL;
  size_t domain_count = 0, cidr_count = 0, pin_count = 0;
  struct net_proxy_options o = {.events_fd = -1,
                                .handoff = true}; /* as docker's: the bridge hands over */
  int port = 0, confine = 0;
  static const struct option options[] = {
      {"socket", required_argument, NULL, 's'},
      {"port-file", required_argument, NULL, 'f'},
      {"port", required_argument, NULL, 'p'},
      {"events", required_argument, NULL, 'e'},
      {"allow-domain", required_argument, NULL, 'd'},
      {"allow-cidr", required_argument, NULL, 'c'},
      {"resolve", required_argument, NULL, 'r'},
      {"confine", no_argument, NULL, 'C'},
      {"max-connections", required_argument, NULL, 'm'},
      {"header-timeout-ms", required_argument, NULL, 'H'},
      {"idle-timeout-ms", required_argument, NULL, 'I'},
      {NULL, 0, NULL, 0},
  };
  for (int c; (c = getopt_long(argc, argv, "", options, NULL)) != -1;) {
    switch (c) {
    case 's': socket_path = optarg; break;
    case 'f': port_file = optarg; break;
    case 'p': port = atoi(optarg); break;
    case 'e': events_path = optarg; break;
    case 'd': domains = push(domains, &domain_count, optarg); break;
    case 'c': cidrs = push(cidrs, &cidr_count, optarg); break;
    case 'r': pins = push(pins, &pin_count, optarg); break;
    case 'C': confine = 1; break;
    case 'm': o.max_connections = (unsigned)atoi(optarg); break;
    case 'H': o.header_timeout_ms = atoi(optarg); break;
    case 'I': o.idle_timeout_ms = atoi(optarg); break;
    default: return 2;
    }
  }
  if (!socket_path || !port_file) {
    fprintf(stderr, "net-proxyd: --socket and --port-file are required\n");
    return 2;
  }
  struct cordon_egress_rules rules = {domains, cidrs, pins};
  struct net_rules *parsed = NULL;
  struct cordon_error *err = NULL;
  if (net_rules_parse(&rules, &parsed, &err) < 0) {
    fprintf(stderr, "net-proxyd: %s\n", err->message);
    cordon_error_free(err);
    return 2;
  }
  o.rules = parsed;
  if (events_path &&
      (o.events_fd = open(events_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600)) < 0)
    die(events_path);

  int unix_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un address = {.sun_family = AF_UNIX};
  snprintf(address.sun_path, sizeof address.sun_path, "%s", socket_path);
  unlink(socket_path);
  if (unix_fd < 0 || bind(unix_fd, (struct sockaddr *)&address, sizeof address) < 0 ||
      listen(unix_fd, 512) < 0)
    die(socket_path);
  int tcp_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(tcp_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in in = {.sin_family = AF_INET,
                           .sin_port = htons((uint16_t)port),
                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t length = sizeof in;
  if (tcp_fd < 0 || bind(tcp_fd, (struct sockaddr *)&in, sizeof in) < 0 ||
      listen(tcp_fd, 512) < 0 || getsockname(tcp_fd, (struct sockaddr *)&in, &length) < 0)
    die("bridge socket");
  if (pipe2(stop_pipe, O_CLOEXEC) < 0)
    die("pipe");
  struct sigaction sa = {.sa_handler = on_signal};
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);

  pid_t bridge = fork();
  if (bridge < 0)
    die("fork");
  if (bridge == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    close(unix_fd);
    int r = net_bridge_serve(tcp_fd, connect_unix, (void *)socket_path, stop_pipe[0], &err);
    if (r < 0)
      fprintf(stderr, "net-proxyd: bridge: %s\n", err->message);
    cordon_error_free(err);
    net_rules_free(parsed);
    free(domains);
    free(cidrs);
    free(pins);
    _exit(r < 0 ? 1 : 0);
  }
  close(tcp_fd);
#if defined(__SANITIZE_ADDRESS__)
  /* LeakSanitizer's exit check attaches with ptrace, which the filter refuses: under ASan the
   * harness serves unconfined (tests/unit/test-net-confine.c tests the filter itself). */
  confine = 0;
#endif
  if (confine && net_proxy_confine(&err) < 0) {
    fprintf(stderr, "net-proxyd: %s\n", err->message);
    return 2;
  }
  FILE *f = fopen(port_file, "we");
  if (!f)
    die(port_file);
  fprintf(f, "%u\n", ntohs(in.sin_port));
  fclose(f);
  int r = net_proxy_serve(&o, unix_fd, stop_pipe[0], &err);
  if (r < 0)
    fprintf(stderr, "net-proxyd: proxy: %s\n", err->message);
  cordon_error_free(err);
  kill(bridge, SIGTERM);
  waitpid(bridge, NULL, 0);
  close(unix_fd);
  unlink(socket_path);
  if (o.events_fd >= 0)
    close(o.events_fd);
  net_rules_free(parsed);
  free(domains);
  free(cidrs);
  free(pins);
  return r < 0 ? 1 : 0;
}
