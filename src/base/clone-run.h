/* clone-run.c: clone3 onto a stack of our own, optionally born in a cgroup v2 directory
 * (CLONE_INTO_CGROUP: no migration). The raw system call wrappers live in base/syscalls.h; this
 * runner sits beside them in base/ because both the exec runner (floor 1) and confine's users
 * (the ns backend's workers) start children with it. */
#ifndef CORDON_BASE_CLONE_RUN_H
#define CORDON_BASE_CLONE_RUN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/syscalls.h"

/* clone3 that runs fn(arg) in the child on [stack, stack + stack_size) and exits with its
 * result; with cgroup_fd >= 0 the child is born in that v2 cgroup. For CLONE_VM|CLONE_VFORK:
 * the child borrows our memory until it execs or exits, and we wait until then, so it may
 * call anything a forked child may. The pid, or -1 with errno (ENOSYS where it is not
 * implemented: fork instead). clone-run.c. */
pid_t sys_clone3_run(uint64_t flags, int cgroup_fd, void *stack, size_t stack_size,
                     int (*fn)(void *), void *arg);

/* The same with CLONE_VM added (flags must not hold CLONE_VFORK), and then a wait until the
 * child no longer uses our memory (its execve, or its exit), as vfork waits, but interruptibly:
 * the kernel zeroes a word of ours and wakes its futex then (CLONE_CHILD_CLEARTID, as for a
 * thread's join), where a vfork parent sleeps uninterruptibly (state D, one more on the load
 * average for as long as it waits). While the child runs, this caller runs nothing but that
 * wait (raw system calls: no errno, no sanitizer runtime, which the child shares), so, as
 * with vfork, the child may call anything a forked child may; the caller must have no signal
 * handler that could run meanwhile. The pid, or -1 with errno (ENOSYS where it is not
 * implemented: fork instead). clone-run.c. */
pid_t sys_clone3_run_shared(uint64_t flags, int cgroup_fd, void *stack, size_t stack_size,
                            int (*fn)(void *), void *arg);

/* A vfork that runs fn(arg) on a stack of its own (16 KiB) and returns once the child has
 * exec'd or exited: fn, which should exec or _exit, may make only async-signal-safe calls and
 * write nothing of ours but errno (the child shares our memory, not our fd table), and the
 * calling thread must have every signal blocked. Nothing of a caller's memory is copied, which
 * a fork of a threaded caller would do (and run the child in a copy that keeps other threads'
 * locks held). A fork where clone3 is missing. The pid, or -1 with errno. */
pid_t sys_vfork_run(int (*fn)(void *), void *arg);

/* clone-run.c's assembly spells system call numbers as immediates. */
#define CONFINE_STRINGIFY_(x) #x
#define CONFINE_STRINGIFY(x) CONFINE_STRINGIFY_(x)

#endif
