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
/* A keeper forked ahead of its request (see exec.c), waiting on request_w; pid 0: none. */
struct guest_keeper {
  pid_t pid;
  int request_w;
  struct guest_exec_fds fds;
};
/* Fork one: 0, or -1 with errno set. */
int guest_keeper_prefork(const struct guest_config *cfg, struct guest_keeper *k);
/* Hand it a request the agent has checked (an exec wire header and payload): 0 with *fds the
 * command's streams and its status (k->pid is the keeper's pid), or -1 with errno set when the
 * keeper is gone (discarded then). */
int guest_keeper_start(struct guest_keeper *k, const unsigned char *request, size_t length,
                       struct guest_exec_fds *fds);
/* Give up an unused one (it exits with its child). */
void guest_keeper_discard(struct guest_keeper *k);

/* memory.c: the watch that ends a memory hog before the guest stalls in reclaim. */
struct guest_meminfo {
  unsigned long total_kib, available_kib;
};
/* /proc/meminfo's text: false when MemTotal or MemAvailable is missing or malformed. */
bool guest_meminfo_parse(const char *text, struct guest_meminfo *m);
/* MemAvailable below the floor (1/25 of the RAM, at least 8 MiB). */
bool guest_memory_low(const struct guest_meminfo *m);
/* PROC/meminfo read and parsed: 0, or -1. */
int guest_meminfo_read(const char *proc, struct guest_meminfo *m);
/* The process under PROC with the highest oom_score above 0, never pid 1 (*score set), or -1. */
pid_t guest_oom_choose(const char *proc, long *score);

#endif
