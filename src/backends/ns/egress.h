/* Egress class `restricted` on ns: the host-side half. A daemon forked from cordon runs the
 * session's proxy (src/net/) on a unix socket in the session's runtime directory, and a bridge
 * that accepts on the sandbox's 127.0.0.1:NET_BRIDGE_PORT and relays to it. The bridge's
 * listening socket is made by the sandbox's pid 1 inside the sandbox's network namespace and
 * handed out over a socket pair (ns_egress_handoff), so nothing of the proxy runs in the sandbox
 * and nothing of the host is mounted into it. pid 1 keeps its end of that pair for its life: its
 * hang-up is the session's end, and the daemon's. */
#ifndef CORDON_NS_EGRESS_H
#define CORDON_NS_EGRESS_H

#include <cordon/error.h>

struct net_rules;

/* Fork the daemon (its own session and process group, detached from the caller) for the rules,
 * with its socket in run_fd (O_PATH of the session's runtime directory) and its events appended
 * to <state_dir>/events.jsonl. *sandbox_end gets the fd pid 1 must be given (cfg.egress_fd). */
int ns_egress_start(const struct net_rules *rules, int run_fd, const char *state_dir,
                    int *sandbox_end, struct cordon_error **err);

/* In pid 1, inside the network namespace with lo up: listen on 127.0.0.1:NET_BRIDGE_PORT and
 * send that socket over fd (kept open by pid 1 for its life). */
int ns_egress_handoff(int fd, struct cordon_error **err);

#endif
