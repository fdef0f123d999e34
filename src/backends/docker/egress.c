/* Egress class `restricted` on docker, the host side (egress.h). The proxy's end is the
 * container's: a pidfd of its init, which stops with the container (`session destroy`,
 * `docker rm -f`, the engine's restart), so the daemon outlives neither. */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "backends/docker/egress.h"
#include "base/cleanup.h"
#include "base/syscalls.h"
#include "net/daemon.h"
#include "net/proxy.h"

int docker_egress_start(struct cordon_session *s, const struct cordon_manifest *m,
                        const char *agent_dir, uid_t uid, gid_t gid, int *handoff,
                        struct cordon_error **err) {
  *handoff = -1;
  enum cordon_egress egress = m->policy.egress;
  if (egress != CORDON_EGRESS_RESTRICTED)
    return m->egress_rules
               ? cordon_error_set(err, CORDON_ERR_USAGE, 0,
                                  "egress rules (allowed domains, ranges, pinned names) need "
                                  "class restricted, not %s",
                                  cordon_egress_name(egress))
               : 0;
  struct net_rules *rules = NULL;
  if (net_rules_parse(m->egress_rules, &rules, err) < 0)
    return -1;
  _cleanup_close_ int dir_fd = open(agent_dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  int r;
  if (dir_fd < 0) {
    r = cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot open %s", agent_dir);
  } else {
    struct net_egress_daemon_spec spec = {.rules = rules,
                                          .run_fd = dir_fd,
                                          .state_dir = s->state_dir,
                                          .serves_bridge = false,
                                          .socket_uid = uid,
                                          .socket_gid = gid};
    r = net_egress_daemon_start(&spec, handoff, err); /* the daemon has its own copy */
  }
  net_rules_free(rules);
  return r;
}

int docker_egress_bind(int handoff, long agent_pid, struct cordon_error **err) {
  if (handoff < 0)
    return 0;
  /* The engine on another host (or pid namespace) leaves init invisible: the proxy would have
   * no measure of the session's life, and the socket's bind mount would not reach it anyway. */
  if (agent_pid <= 0)
    return cordon_error_set(err, CORDON_ERR_UNSUPPORTED, 0,
                            "egress restricted on docker needs the engine on this host: the "
                            "container's init is not visible here");
  _cleanup_close_ int pidfd = sys_pidfd_open((pid_t)agent_pid, 0);
  if (pidfd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno,
                            "egress proxy: the container's init (pid %ld)", agent_pid);
  return net_egress_hand(handoff, NET_EGRESS_LIFETIME, pidfd, err);
}
