/* The egress proxy's daemon: the host-side process that runs one session's proxy (proxy.h) for
 * exactly as long as the session, and, for a backend whose sandbox cannot run the bridge
 * itself (ns), the bridge too. Backends start it before their sandbox and then hand it, over a
 * socket pair, one fd that says what to serve and when to stop:
 *
 *   NET_EGRESS_BRIDGE    a TCP socket listening inside the sandbox's network namespace: the
 *                        proxy serves it itself (no bridge, no unix socket: one relay a
 *                        byte); the pair's hang-up (its holder, the sandbox's pid 1, ended) is
 *                        the session's end.
 *   NET_EGRESS_LIFETIME  a pidfd of a process inside the sandbox (docker: the container's
 *                        init), whose exit is the session's end; the bridge runs in the
 *                        sandbox and connects to the proxy's socket.
 *
 * A pair closed before anything arrived (the sandbox never started) ends the daemon at once. */
#ifndef CORDON_NET_DAEMON_H
#define CORDON_NET_DAEMON_H

#include <stdbool.h>
#include <sys/types.h>

#include <cordon/error.h>

struct net_rules;

/* The proxy's socket, in the directory the daemon is given. */
#define NET_EGRESS_SOCKET "egress.sock"
/* The session's egress event log (events.h), in its state directory. The daemon holds a shared
 * flock on it for its whole life, so whoever sums the log at the session's end can wait for
 * its last lines (net_egress_events_wait). */
#define NET_EGRESS_EVENTS "events.jsonl"

enum net_egress_handoff {
  NET_EGRESS_BRIDGE = 'L',
  NET_EGRESS_LIFETIME = 'P',
};

struct net_egress_daemon_spec {
  const struct net_rules *rules; /* copied to the daemon (net_rules_save) */
  int run_fd;                    /* O_PATH of a directory private to the session: the socket
                                    (not made when serves_bridge: the proxy serves the listener
                                    handed over) */
  const char *state_dir;         /* the session's state directory: events.jsonl */
  bool serves_bridge;            /* accepts NET_EGRESS_BRIDGE only (else NET_EGRESS_LIFETIME) */
  uid_t socket_uid;              /* the socket's owner (who runs the bridge); (uid_t)-1: ours */
  gid_t socket_gid;
};

/* Start the daemon: forked, then this program exec'd afresh (never the fork's copy of a
 * process that may have threads), in its own session, nobody's child here. *handoff: our end of the
 * pair, for net_egress_hand (or to pass to the process that will hand; closing it unused ends the
 * daemon). The daemon lives in its own mount namespace whose root is a read-only tmpfs holding
 * only what name resolution reads (docs/security.md, "Restricted egress"): as root, or as
 * another user inside a user namespace of its own (where the kernel offers none, without). */
int net_egress_daemon_start(const struct net_egress_daemon_spec *spec, int *handoff,
                            struct cordon_error **err);

/* Waits up to timeout_ms for every daemon writing the log open at fd to have ended (its last
 * decisions written): 0, or -1 at the timeout (the log is read as it is). */
int net_egress_events_wait(int fd, int timeout_ms);

/* Send the one fd the daemon waits for over handoff. */
int net_egress_hand(int handoff, enum net_egress_handoff kind, int fd, struct cordon_error **err);

#endif
