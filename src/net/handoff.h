/* A client's connection handed over, not relayed: the bridge inside the sandbox accepts a TCP
 * connection on 127.0.0.1:NET_BRIDGE_PORT and sends the accepted socket itself to the proxy
 * over the proxy's unix socket (SCM_RIGHTS, one byte of data, one fd, on a unix connection of
 * its own). The proxy then reads the request from the client's socket and relays client <->
 * upstream itself: one relay a byte instead of two, and no unix hop (bench/egress).
 *
 * What arrives is the sandbox's, so hostile: a non-socket, a unix socket, a listening or
 * unconnected socket, several fds, a truncated control message, or none at all are refused
 * (every fd that came is closed). An accepted socket is TCP over IPv4 or IPv6, connected. The
 * sandbox may keep a copy of the same open file and change its flags (O_NONBLOCK) under the
 * proxy: the proxy never relies on them (net_proxy_serve: MSG_DONTWAIT, and a watchdog signal
 * that ends any call that blocks anyway). */
#ifndef CORDON_NET_HANDOFF_H
#define CORDON_NET_HANDOFF_H

/* The one data byte that carries the fd. */
#define NET_HANDOFF_BYTE 'S'

/* Sends fd over the connected unix socket `to` (never blocks). 0, or -1 with errno. */
int net_handoff_send(int to, int fd);

/* Receives one handoff from the unix socket `from` without blocking: 1 and *fd (O_CLOEXEC,
 * O_NONBLOCK set) when a checked TCP socket came; 0 when nothing has arrived yet; -1 when
 * refused or the peer left, *why a static reason ("" when the peer left having sent nothing). */
int net_handoff_receive(int from, int *fd, const char **why);

/* Closes a socket that came by handoff without waiting on it: the sandbox may have set
 * SO_LINGER, which would make the last close wait for unsent data. */
void net_handoff_close(int fd);

/* Is fd a connected TCP socket (IPv4 or IPv6)? NULL when it is, else the reason. */
const char *net_handoff_check(int fd);

#endif
