/* The ns holder: one small process per session that keeps the session's namespaces alive and
 * starts commands inside them.
 *
 * Process tree (pids as seen inside the session's pid namespace):
 *
 *   holder (pid 1)   builds the root, then drops every capability, so everything it forks
 *                    is born without any; reaps orphans and keeps one idle worker ready
 *     worker         supervises one exec, as a child subreaper so everything the command
 *                    leaves behind comes back to it; reports the exit status, kills the tree
 *       command      forked ahead of time, born in the exec's cgroup leaf: setsid, rlimits,
 *                    seccomp, then accept() on the session socket; on a request: stdio,
 *                    chdir, execve
 *
 * Killing the holder (pid 1) makes the kernel kill the whole namespace. The holder is created
 * by ns_holder_spawn() from the calling process: a fork (so the holder is not our child and
 * outlives us) that clones the holder into new user, mount, pid, ipc, uts, cgroup (and net)
 * namespaces and writes its id maps from outside, as only a process in the parent namespace
 * can map an unprivileged host uid. */
#ifndef CORDON_NS_HOLDER_H
#define CORDON_NS_HOLDER_H

#include <stdbool.h>
#include <sys/types.h>

#include <cordon/error.h>

#include "confine/caps.h"
#include "confine/cgroup.h"
#include "confine/mount.h"

struct ns_holder_config {
  struct confine_root_spec root;
  struct confine_identity identity; /* inside the namespace */
  uid_t outer_uid;                  /* what identity.uid maps to on the host */
  gid_t outer_gid;
  bool rootless; /* id maps written by an unprivileged process: setgroups is denied */
  struct confine_rlimits rlimits;
  bool new_network; /* false for egress open: the host's network namespace */
  bool loopback;    /* bring lo up in the new network namespace */
  int listen_fd;    /* the session socket, listening */
  int cgroup_fd;    /* the session's v2 cgroup: the holder is born in it, and (delegated) it
                       takes one leaf per exec; -1 when there is none */
  int cgroup_join_fds[CONFINE_CG_MAX_DIRS]; /* v1 cgroup.procs fds the holder joins */
};

/* Start the holder and wait until it is ready (or report why it failed). *pid is its pid on
 * the host. The fds in cfg stay owned by the caller. */
int ns_holder_spawn(const struct ns_holder_config *cfg, pid_t *pid, struct cordon_error **err);

#endif
