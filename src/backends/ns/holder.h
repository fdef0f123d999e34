/* The ns holder: one small process per session that keeps the session's namespaces alive and
 * starts commands inside them.
 *
 * Process tree (pids as seen inside the session's pid namespace):
 *
 *   holder (pid 1)   builds the root, then drops every capability, so everything it forks
 *                    is born without any; reaps orphans and keeps one idle worker ready
 *     worker         supervises execs one at a time, as a child subreaper so everything a
 *                    command leaves behind comes back to it; reports the exit status, kills
 *                    the tree, then starts its next command process (up to 64 execs)
 *       command      started ahead of time in the worker's memory (CLONE_VM: shared until
 *                    its execve, while the worker waits interruptibly; worker.c), born in
 *                    the exec's cgroup leaf: setsid, rlimits, seccomp, then accept() on the
 *                    session socket; on a request: stdio, chdir, execve
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

#include "backends/ns/config.h"

/* Start the holder: on return it exists (*pid, its pid on the host) and builds its sandbox,
 * which the caller may overlap with work of its own (writing the session's state) before
 * ns_holder_wait(). The fds in cfg stay owned by the caller and must stay open until then. */
int ns_holder_spawn(const struct ns_holder_config *cfg, pid_t *pid, int *ready_fd,
                    struct cordon_error **err);
/* Wait until the holder started by ns_holder_spawn is ready, or kill it and say why it failed.
 * Takes ready_fd. */
int ns_holder_wait(pid_t pid, int ready_fd, struct cordon_error **err);

/* ---- one-shot: one command in a sandbox of its own --------------------------------------------
 *
 * For a session that runs exactly one command (`cordon run`, race candidates) the holder, its
 * socket and its pre-forked workers are pure cost. Instead the command's sandbox is made with
 * the command: pid 1 is cloned with CLONE_VM (no copy of the caller's page tables, which on a
 * virtualised host costs more than the rest of the setup together), builds the root, drops
 * every capability and clones the command with CLONE_VM|CLONE_VFORK; only the command's execve
 * makes a new address space. pid 1 then reaps until the command ends and exits, which makes the
 * kernel kill everything else in the namespace.
 *
 * Sharing the caller's memory is safe because the two never run library code at the same time:
 * the caller waits on a pipe while pid 1 sets up, and after its report pid 1 only waits for
 * children (system calls, no allocation). The caller may be multi-threaded: pid 1 takes over
 * the calling thread's identity while that thread is blocked, and changes its credentials with
 * raw system calls only (see confine/caps.c). */
struct ns_oneshot;

struct ns_oneshot_command {
  const char *const *argv; /* argv[0] searched in the PATH of envp */
  const char *const *envp;
  const char *cwd; /* inside the sandbox */
  int stdio[3];    /* the command's fds 0, 1, 2 (stay owned by the caller) */
};

/* Build the sandbox of cfg and start cmd in it. With cfg->oom_shield, pid 1 is cloned with
 * CLONE_VFORK by a thread of its own, which stays blocked until pid 1 ends: the OOM killer never
 * picks a task in the middle of a vfork (mm/oom_kill.c, in_vfork), and picking pid 1 would kill
 * every process sharing its memory, the caller included. On success *exit_fd (the caller closes it)
 * becomes readable when the command has ended. cfg and cmd must stay valid until
 * ns_oneshot_reap has returned (pid 1 no longer reads them once the command's status is in).
 * A command that cannot be executed is a result (126/127), not an error. */
int ns_oneshot_start(const struct ns_holder_config *cfg, const struct ns_oneshot_command *cmd,
                     struct ns_oneshot **out, int *exit_fd, struct cordon_error **err);
/* After exit_fd became readable: the command's status, 128+N with *term_signal = N when a
 * signal ended it (SIGKILL when the sandbox was killed before the command ended). Nothing in the
 * sandbox runs any more, but pid 1 may still be exiting (the kernel taking its namespaces
 * down): ns_oneshot_free waits for that, so a caller can do other work first. */
int ns_oneshot_reap(struct ns_oneshot *o, int *exit_code, int *term_signal,
                    struct cordon_error **err);
/* After ns_oneshot_reap: 127 or 126 when the command's execve failed (not found, cannot
 * execute), 0 when the command ran. */
int ns_oneshot_exec_failure(const struct ns_oneshot *o);
/* Kill the sandbox (pid 1, and with it everything in the namespace). Idempotent. */
void ns_oneshot_kill(struct ns_oneshot *o);
/* Kill and reap what is left, release everything. NULL is fine. */
void ns_oneshot_free(struct ns_oneshot *o);
/* pid 1 of an ended sandbox that has hung up (everything else in it killed and reaped: only its
 * _exit is left), not yet reaped, without the OOM shield; else 0. */
pid_t ns_oneshot_pid1_finishing(const struct ns_oneshot *o);
/* ns_oneshot_free, except that once the command has ended in a process about to exit
 * (proc_exit_pending), pid 1's own exit is not waited for. */
void ns_oneshot_release(struct ns_oneshot *o);

#endif
