/* Network namespaces: what egress class `loopback` needs inside a fresh namespace. */
#ifndef CORDON_CONFINE_NET_H
#define CORDON_CONFINE_NET_H

#include <cordon/error.h>

/* Bring `lo` up in the caller's (new) network namespace; the kernel gives it 127.0.0.1/8 and
 * ::1. An ioctl, not the `ip` binary: nothing is exec'd. */
int confine_loopback_up(struct cordon_error **err);

#endif
