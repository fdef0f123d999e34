/* Handing a client's socket to the proxy (handoff.h). */
#include "net/handoff.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* Room for a few fds: a sender that puts more in one message gets MSG_CTRUNC (the kernel
 * closes what did not fit), and every fd that did fit is closed here. */
#define HANDOFF_MAX_FDS 4

int net_handoff_send(int to, int fd) {
  char byte = NET_HANDOFF_BYTE;
  struct iovec iov = {.iov_base = &byte, .iov_len = 1};
  union {
    struct cmsghdr align;
    char buf[CMSG_SPACE(sizeof(int))];
  } control;
  memset(&control, 0, sizeof control);
  struct msghdr msg = {.msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = control.buf,
                       .msg_controllen = sizeof control.buf};
  struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &fd, sizeof fd);
  ssize_t n;
  do
    n = sendmsg(to, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  while (n < 0 && errno == EINTR);
  return n == 1 ? 0 : -1;
}

static int option(int fd, int name) {
  int value = -1;
  socklen_t length = sizeof value;
  if (getsockopt(fd, SOL_SOCKET, name, &value, &length) < 0 || length != sizeof value)
    return -1;
  return value;
}

void net_handoff_close(int fd) {
  static const struct linger none = {0, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &none, sizeof none); /* not a socket: no matter */
  close(fd);
}

const char *net_handoff_check(int fd) {
  struct stat st;
  if (fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode))
    return "not a socket";
  int domain = option(fd, SO_DOMAIN);
  if (domain != AF_INET && domain != AF_INET6)
    return "not an IPv4 or IPv6 socket";
  if (option(fd, SO_TYPE) != SOCK_STREAM || option(fd, SO_PROTOCOL) != IPPROTO_TCP)
    return "not a TCP socket";
  if (option(fd, SO_ACCEPTCONN) != 0)
    return "a listening socket";
  struct sockaddr_storage peer;
  socklen_t length = sizeof peer;
  if (getpeername(fd, (struct sockaddr *)&peer, &length) < 0)
    return "not connected";
  return NULL;
}

int net_handoff_receive(int from, int *fd, const char **why) {
  *fd = -1;
  char byte = 0;
  struct iovec iov = {.iov_base = &byte, .iov_len = 1};
  union {
    struct cmsghdr align;
    char buf[CMSG_SPACE(sizeof(int) * HANDOFF_MAX_FDS)];
  } control;
  struct msghdr msg = {.msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = control.buf,
                       .msg_controllen = sizeof control.buf};
  ssize_t n = recvmsg(from, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
    return 0;
  int received = -1, count = 0;
  for (struct cmsghdr *c = n > 0 ? CMSG_FIRSTHDR(&msg) : NULL; c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
      continue;
    size_t fds = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < fds; i++) {
      int one;
      memcpy(&one, CMSG_DATA(c) + i * sizeof(int), sizeof one);
      if (count++ == 0)
        received = one;
      else
        net_handoff_close(one);
    }
  }
  const char *reason = NULL;
  if (n <= 0)
    reason = "";
  else if (msg.msg_flags & MSG_CTRUNC)
    reason = "more than one fd";
  else if (count == 0)
    reason = "no fd";
  else if (count > 1)
    reason = "more than one fd";
  else if (byte != NET_HANDOFF_BYTE)
    reason = "not a handoff";
  else
    reason = net_handoff_check(received);
  if (!reason) {
    int flags = fcntl(received, F_GETFL);
    if (flags < 0 || fcntl(received, F_SETFL, flags | O_NONBLOCK) < 0)
      reason = "not a socket";
  }
  if (reason) {
    if (received >= 0)
      net_handoff_close(received);
    *why = reason;
    return -1;
  }
  *fd = received;
  return 1;
}
