/* Network namespaces (see net.h). */
#include <errno.h>
#include <net/if.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "confine/net.h"

int confine_loopback_up(struct cordon_error **err) {
  _cleanup_close_ int sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (sock < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "socket for the loopback interface");
  struct ifreq ifr;
  memset(&ifr, 0, sizeof(ifr));
  strcpy(ifr.ifr_name, "lo");
  if (ioctl(sock, SIOCGIFFLAGS, &ifr) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot read the flags of lo");
  ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
  if (ioctl(sock, SIOCSIFFLAGS, &ifr) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot bring lo up");
  return 0;
}
