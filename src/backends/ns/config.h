/* What a session's sandbox is built from, as the holder (holder.c) and its workers (worker.c)
 * receive it: the resolved root, identity, limits and the fds that carry them out. Its own
 * header so that the workers, which the holder starts, need nothing of the holder's. */
#ifndef CORDON_NS_CONFIG_H
#define CORDON_NS_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "confine/caps.h"
#include "confine/cgroup.h"
#include "confine/mount.h"
#include <cordon/error.h>

struct crypto_hmac;

struct ns_holder_config {
  struct confine_root_spec root;
  struct confine_identity identity; /* inside the namespace */
  uid_t outer_uid;                  /* what identity.uid maps to on the host */
  gid_t outer_gid;
  bool rootless; /* id maps written by an unprivileged process: setgroups is denied */
  struct confine_rlimits rlimits;
  bool new_network; /* false for egress open: the host's network namespace */
  bool loopback;    /* bring lo up in the new network namespace */
  int listen_fd;    /* the session socket, bound; the holder listens (so that a client's
                       SO_PEERCRED names the holder) */
  int cgroup_fd;    /* the session's v2 cgroup: the holder is born in it, and (delegated) it
                       takes one leaf per exec; -1 when there is none */
  int cgroup_join_fds[CONFINE_CG_MAX_DIRS]; /* v1 cgroup.procs fds the holder joins */
  int memory_join_fd; /* the v1 memory cgroup's cgroup.procs, or -1: only each command process
                         joins it (then a vfork, immune to the OOM killer until its execve), never
                         pid 1 or a worker, whose memory is shared with the caller (one-shot)
                         or with waiting command processes: the kernel kills every process
                         sharing an OOM victim's memory, and the session (or the caller) must
                         outlive an out-of-memory command */
  bool oom_shield;    /* one-shot: pid 1 is a vfork of a thread of the caller's, blocked for
                         pid 1's life, which makes the OOM killer pass pid 1 over (see
                         ns_oneshot_start); set with a memory limit, where pid 1 may share a
                         memory cgroup with the command (cgroup v2) */
  /* Keyed with the session's secret: every client must prove it (backends/ns/proto.h). */
  struct crypto_hmac *auth;
  /* The operator's uid as the holder's user namespace sees it: the only peer uid accepted. */
  uid_t client_uid;
  int socket_file_fd; /* O_PATH of the lease file in the session's directory, or -1. Once it
                         is unlinked (the session directory deleted, say with the project), the
                         session is gone: the holder ends it. A file, not the directory, so
                         that pid 1 holds nothing to walk the host's tree from. */
  /* `--cpus N`, N whole: pid 1 narrows its affinity to N CPUs, which every command inherits
   * (nproc says N); 0: unchanged. */
  unsigned cpus_visible;
  /* Egress restricted: pid 1 listens on 127.0.0.1:NET_BRIDGE_PORT in its network namespace and
   * hands that socket out over this fd, which it keeps for its life (backends/ns/egress.h);
   * -1 for every other class. */
  int egress_fd;
};

/* The configuration as bytes, for a fresh image of this program (a spawner exec'd by a caller
 * with threads, holder.c): written to fd as JSON, the fds by number only (they stay open at
 * those numbers across the exec), the HMAC by its keyed state. Load refuses anything malformed
 * (CORDON_ERR_INVALID) and returns a configuration of its own, freed by
 * ns_holder_config_free. */
int ns_holder_config_save(const struct ns_holder_config *cfg, int fd, struct cordon_error **err);
int ns_holder_config_load(int fd, struct ns_holder_config **out, struct cordon_error **err);
void ns_holder_config_free(struct ns_holder_config *cfg);
/* The fds the configuration carries, put in fds (NULL: only counted); returns how many. */
size_t ns_holder_config_fds(const struct ns_holder_config *cfg, int *fds);

/* A child that runs this program afresh (execve of /proc/self/exe) with argv PROGRAM flag N,
 * where N lists the extra fds' numbers (at most 8) and the configuration's memfd. Nothing of
 * this process runs in the child between its clone and its exec but async-signal-safe calls,
 * so a caller with threads can use it. The child is a vfork (it shares this memory until its
 * exec): the calling thread must have every signal blocked, so that no handler of the
 * caller's runs in it; the new image starts with that mask. It keeps the configuration's fds
 * and the extra ones at their numbers, and no other (0-2 aside). A failed exec ends the child
 * with NS_CONFIG_EXEC_FAILED. Returns the child's pid, or -1. */
#define NS_CONFIG_EXEC_FAILED 127
pid_t ns_holder_config_exec(const struct ns_holder_config *cfg, const char *flag, const int *extra,
                            size_t n_extra, struct cordon_error **err);
/* In the new image, from its argv (argv[1] the flag, argv[2] the numbers): the n_extra fds
 * (each checked to be a pipe) and the configuration, loaded and its memfd closed. A hand-made
 * argv is a usage error. */
int ns_holder_config_from_argv(char **argv, int *extra, size_t n_extra,
                               struct ns_holder_config **cfg, struct cordon_error **err);

#endif
