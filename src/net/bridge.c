/* The bridge inside the sandbox (net_bridge_serve, proxy.h): each TCP connection accepted on
 * 127.0.0.1 is handed, socket and all, to the proxy outside over a fresh connection to its
 * unix socket (handoff.h), then closed here. It parses nothing and relays nothing: the proxy
 * reads the request from the client's own socket, decides, and relays client <-> upstream
 * itself (one relay a byte). A handoff that cannot be made (the proxy's socket is gone, or
 * its queue full) closes the client at once. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/handoff.h"
#include "net/proxy.h"

static void hand(int client, int (*connect_proxy)(void *arg), void *arg) {
  int proxy = connect_proxy(arg);
  if (proxy >= 0) {
    net_handoff_send(proxy, client);
    close(proxy);
  }
  close(client);
}

int net_bridge_serve(int listen_fd, int (*connect_proxy)(void *arg), void *arg, int stop_fd,
                     struct cordon_error **err) {
  int flags = fcntl(listen_fd, F_GETFL);
  if (flags < 0 || fcntl(listen_fd, F_SETFL, flags | O_NONBLOCK) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "egress bridge: listening socket");
  for (;;) {
    struct pollfd fds[2] = {{.fd = listen_fd, .events = POLLIN}, {.fd = stop_fd, .events = POLLIN}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR)
        continue;
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "egress bridge: poll");
    }
    if (fds[1].revents)
      return 0;
    int client;
    while ((client = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0)
      hand(client, connect_proxy, arg);
  }
}
