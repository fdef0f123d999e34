/* Egress class `restricted` on ns, the host side: the proxy's daemon (net/daemon.h) started
 * with the bridge to serve, and pid 1's handoff of the bridge's listening socket. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "backends/ns/egress.h"
#include "net/daemon.h"
#include "net/proxy.h"

int ns_egress_start(const struct net_rules *rules, int run_fd, const char *state_dir,
                    int *sandbox_end, struct cordon_error **err) {
  struct net_egress_daemon_spec spec = {.rules = rules,
                                        .run_fd = run_fd,
                                        .state_dir = state_dir,
                                        .serves_bridge = true,
                                        .socket_uid = (uid_t)-1,
                                        .socket_gid = (gid_t)-1};
  return net_egress_daemon_start(&spec, sandbox_end, err);
}

int ns_egress_handoff(int fd, struct cordon_error **err) {
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "egress bridge socket");
  struct sockaddr_in addr = {.sin_family = AF_INET,
                             .sin_port = htons(NET_BRIDGE_PORT),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  int r = 0;
  if (bind(s, (struct sockaddr *)&addr, sizeof(addr)) < 0 || listen(s, 128) < 0)
    r = cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot listen on 127.0.0.1:%d",
                         NET_BRIDGE_PORT);
  else
    r = net_egress_hand(fd, NET_EGRESS_BRIDGE, s, err);
  close(s);
  return r;
}
