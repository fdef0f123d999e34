/* /proc/PID/stat, read in one place: the fields cordon uses to tell a live process from a gone
 * one (or from a later process that reuses its pid), walk a process tree, and find its
 * command line in memory. */
#ifndef CORDON_BASE_PROC_H
#define CORDON_BASE_PROC_H

#include <stdbool.h>
#include <sys/types.h>

struct proc_stat {
  char state;                       /* field 3: R, S, D, Z (zombie), X (dead) ... */
  pid_t parent;                     /* field 4 */
  long threads;                     /* field 20 */
  unsigned long long start_time;    /* field 22: clock ticks after boot; with the pid and the
                                       boot id, names one process for the life of the host */
  unsigned long arg_start, arg_end; /* fields 48 and 49: where argv lives in its memory */
};

/* Read the stat line of pid (0: this process). -1 when the process is gone or the line cannot
 * be parsed. Allocates nothing: safe in a freshly forked child. */
int proc_stat_read(pid_t pid, struct proc_stat *out);

/* The start time of pid if it runs (neither gone nor a zombie), else 0. */
unsigned long long proc_start_time(pid_t pid);

/* Said by a program that exits as soon as its last session is destroyed (`cordon run`): what
 * the kernel finishes by itself after a sandbox has ended (its last process exiting, its
 * namespaces going down) may then be left to this process's exit, which hands it to init,
 * instead of being waited for. Never said by a library caller that lives on. */
void proc_exit_pending_set(void);
bool proc_exit_pending(void);

/* Whether address lies in the program's own executable (not in a shared object). Code there
 * surely runs again in an execve of /proc/self/exe, its constructors included: how cordon
 * starts a fresh image of itself (the ns holder's spawner, the egress daemon). In
 * libcordon.so it may not (a program that dlopen'd it): such callers are not re-exec'd. */
bool proc_in_executable(const void *address);

#endif
