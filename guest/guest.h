/* cordon-guest: pid 1 of a microvm guest and the agent that runs cordon's commands in it over
 * a virtio-serial port (backends/microvm/guest-wire.h). boot.c prepares the guest; agent.c
 * serves the wire; exec.c runs one command under its keeper. */
#ifndef CORDON_GUEST_GUEST_H
#define CORDON_GUEST_GUEST_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "backends/microvm/guest-wire.h"

struct guest_config {
  const char *root; /* where the workspace is mounted */
  uid_t uid;        /* who commands run as: 1000, or 0 with cordon.user=root */
  bool loopback;    /* bring lo up (cordon.net=loopback); else no network at all */
  /* cordon.pids=N: RLIMIT_NPROC of the sandbox user; 0: none */
  unsigned long pids;
};

/* boot.c */
void guest_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void guest_boot(struct guest_config *cfg);
int guest_open_port(void);

/* exec.c: one command's process side. */
struct guest_exec_fds {
  int stdin_w, stdout_r, stderr_r; /* the agent's ends (non-blocking) */
  int status_r;                    /* the keeper writes one exec wire reply here */
};
/* Fork the keeper of one command (see exec.c). Returns its pid, or -1 with errno set. */
pid_t guest_exec_start(const struct guest_config *cfg, const struct exec_wire_request *req,
                       struct guest_exec_fds *fds);

#endif
