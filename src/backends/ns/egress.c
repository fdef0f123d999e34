/* Egress class `restricted` on ns, the host side: the daemon that runs the session's proxy and
 * the bridge from the sandbox's loopback to it (see egress.h), and pid 1's handoff of the
 * bridge's listening socket. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backends/ns/egress.h"
#include "base/cleanup.h"
#include "base/syscalls.h"
#include "net/proxy.h"

#define EGRESS_SOCKET_NAME "egress.sock"
#define EVENTS_NAME "events.jsonl"
/* nobody: the proxy's uid and gid when cordon runs as root */
#define OVERFLOW_ID 65534

struct egress_daemon {
  const struct net_rules *rules;
  int handoff;      /* the sandbox's listening socket arrives here; its hang-up ends us */
  int proxy_listen; /* EGRESS_SOCKET_NAME in the session's runtime directory */
  int run_fd;
  int events_fd;
};

/* The bridge's way to the proxy: a new connection to its socket for each client. The
 * directory's path may exceed sun_path: go through our fd of it. */
static int connect_proxy(void *arg) {
  const struct egress_daemon *d = arg;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -1;
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  snprintf(addr.sun_path, sizeof(addr.sun_path), "/proc/self/fd/%d/%s", d->run_fd,
           EGRESS_SOCKET_NAME);
  if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

static int receive_listener(int handoff) {
  char byte;
  struct iovec iov = {.iov_base = &byte, .iov_len = 1};
  union {
    struct cmsghdr align;
    char buf[CMSG_SPACE(sizeof(int))];
  } control;
  struct msghdr msg = {.msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = control.buf,
                       .msg_controllen = sizeof(control.buf)};
  ssize_t n;
  do
    n = recvmsg(handoff, &msg, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  struct cmsghdr *c = n == 1 ? CMSG_FIRSTHDR(&msg) : NULL;
  if (!c || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
      c->cmsg_len != CMSG_LEN(sizeof(int)))
    return -1; /* the sandbox ended (or failed) before its setup: nothing to serve */
  int fd;
  memcpy(&fd, CMSG_DATA(c), sizeof(fd));
  return fd;
}

/* Nothing of cordon's but what the daemon serves with: no other fd, no handler, no terminal,
 * no core, no new privileges, not dumpable. */
static void daemon_confine(const struct egress_daemon *d) {
  int keep[] = {d->handoff, d->proxy_listen, d->run_fd, d->events_fd};
  for (int fd = 3; fd < 1024; fd++) {
    bool kept = false;
    for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
      kept |= keep[i] == fd;
    if (!kept)
      close(fd);
  }
  sys_close_range(1024, ~0U, 0);
  /* Not even cordon's stdio: a reader of cordon's output (a pipe) must see its end when cordon
   * exits, not when the session does. A failure is said in the event log (daemon_failed). */
  int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null_fd >= 0) {
    for (int i = 0; i < 3; i++)
      dup2(null_fd, i);
    if (null_fd > 2)
      close(null_fd);
  }
  for (int sig = 1; sig < NSIG; sig++)
    signal(sig, SIG_DFL);
  signal(SIGPIPE, SIG_IGN); /* a client gone mid-write is that connection's end only */
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  static const struct rlimit no_core = {0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  (void)!chdir("/");
  prctl(PR_SET_NAME, "cordon-egress", 0, 0, 0);
  prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

/* One line in the event log (the only output the daemon has) when the proxy or the bridge
 * could not serve. */
static void daemon_failed(int events_fd, const char *what, const struct cordon_error *err) {
  char line[512];
  const char *m = err && err->message ? err->message : "failed";
  size_t k = 0;
  for (const char *p = m; *p && k < 200; p++) /* a message in a JSON string: no quote, no \\ */
    line[k++] = (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20) ? '?' : *p;
  line[k] = 0;
  dprintf(events_fd, "{\"kind\":\"egress.error\",\"in\":\"%s\",\"message\":\"%s\"}\n", what, line);
}

static _Noreturn void egress_main(struct egress_daemon *d) {
  daemon_confine(d);
  struct cordon_error *err = NULL;
  /* The proxy's seccomp filter, before anything from the sandbox arrives; the bridge inherits
   * it. */
  if (net_proxy_confine(&err) < 0) {
    daemon_failed(d->events_fd, "confine", err);
    _exit(1);
  }
  int listener = receive_listener(d->handoff);
  if (listener < 0)
    _exit(0);
  pid_t bridge = fork();
  if (bridge == 0) {
    close(d->proxy_listen);
    int r = net_bridge_serve(listener, connect_proxy, d, d->handoff, &err);
    if (r < 0)
      daemon_failed(d->events_fd, "bridge", err);
    _exit(r < 0);
  }
  close(listener);
  /* The proxy needs no one's files: as root, it serves as nobody (no capability left). The
   * bridge keeps the caller's uid: it connects to the socket in the caller's 0700 runtime
   * directory. */
  if (geteuid() == 0 &&
      (setgroups(0, NULL) < 0 || setresgid(OVERFLOW_ID, OVERFLOW_ID, OVERFLOW_ID) < 0 ||
       setresuid(OVERFLOW_ID, OVERFLOW_ID, OVERFLOW_ID) < 0)) {
    cordon_error_set(&err, CORDON_ERR_SYSTEM, errno, "cannot drop to uid %d", OVERFLOW_ID);
    daemon_failed(d->events_fd, "proxy", err);
    kill(bridge, SIGKILL);
    _exit(1);
  }
  struct net_proxy_options o = {.rules = d->rules, .events_fd = d->events_fd};
  int r = bridge < 0 ? -1 : net_proxy_serve(&o, d->proxy_listen, d->handoff, &err);
  if (r < 0)
    daemon_failed(d->events_fd, "proxy", err);
  if (bridge > 0) {
    kill(bridge, SIGKILL);
    while (waitpid(bridge, NULL, 0) < 0 && errno == EINTR)
      ;
  }
  _exit(r < 0);
}

static int proxy_socket(int run_fd, struct cordon_error **err) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "socket");
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  snprintf(addr.sun_path, sizeof(addr.sun_path), "/proc/self/fd/%d/%s", run_fd, EGRESS_SOCKET_NAME);
  if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
      fchmodat(run_fd, EGRESS_SOCKET_NAME, 0600, 0) < 0 || listen(fd, 128) < 0) {
    int e = errno;
    close(fd);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "cannot create the egress proxy's socket");
  }
  return fd;
}

int ns_egress_start(const struct net_rules *rules, int run_fd, const char *state_dir,
                    int *sandbox_end, struct cordon_error **err) {
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "socketpair");
  _cleanup_close_ int ours = pair[0];
  _cleanup_close_ int theirs = pair[1];
  _cleanup_close_ int listen_fd = proxy_socket(run_fd, err);
  if (listen_fd < 0)
    return -1;
  _cleanup_close_ int state_fd = open(state_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  _cleanup_close_ int events_fd =
      state_fd < 0 ? -1
                   : openat(state_fd, EVENTS_NAME,
                            O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (events_fd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot open %s/%s", state_dir,
                            EVENTS_NAME);
  struct egress_daemon d = {.rules = rules,
                            .handoff = ours,
                            .proxy_listen = listen_fd,
                            .run_fd = run_fd,
                            .events_fd = events_fd};
  /* Twice, so that the daemon is nobody's child here: a caller that lives on (a race) must not
   * find it among its children, and `session create` may exit at once. */
  pid_t pid = fork();
  if (pid == 0) {
    close(theirs);
    setsid();
    pid_t daemon = fork();
    if (daemon != 0)
      _exit(daemon < 0);
    egress_main(&d);
  }
  if (pid < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot start the egress proxy");
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
    ;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, 0, "cannot start the egress proxy");
  *sandbox_end = theirs;
  theirs = -1;
  return 0;
}

int ns_egress_handoff(int fd, struct cordon_error **err) {
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "egress bridge socket");
  struct sockaddr_in addr = {.sin_family = AF_INET,
                             .sin_port = htons(NET_BRIDGE_PORT),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  char byte = 'L';
  struct iovec iov = {.iov_base = &byte, .iov_len = 1};
  union {
    struct cmsghdr align;
    char buf[CMSG_SPACE(sizeof(int))];
  } control;
  memset(&control, 0, sizeof(control));
  struct msghdr msg = {.msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = control.buf,
                       .msg_controllen = sizeof(control.buf)};
  struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &s, sizeof(s));
  int r = 0;
  if (bind(s, (struct sockaddr *)&addr, sizeof(addr)) < 0 || listen(s, 128) < 0)
    r = cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot listen on 127.0.0.1:%d",
                         NET_BRIDGE_PORT);
  else if (sendmsg(fd, &msg, MSG_NOSIGNAL) != 1)
    r = cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot hand the egress bridge its socket");
  close(s);
  return r;
}
