/* Starting a program that outlives us without waiting for its exec: for a process about to
 * exit (as fs_remove_tree_detached), whose caller must not pay for the new program's start. */
#ifndef CORDON_BASE_SPAWN_DETACHED_H
#define CORDON_BASE_SPAWN_DETACHED_H

#include <sys/types.h>

/* Start path with argv and envp (copied: the caller may free them at once) in a process group of
 * its own (and a session of its own when its setsid runs before our setpgid makes it a group
 * leader: either keeps it from a kill of our group), with an empty signal mask, stdin, stdout and
 * stderr on /dev/null, keep_fd (when >= 0) as its fd 3 and no other fd of ours. The child shares
 * our memory until its execve, making only raw system calls on a stack of its own, so we go on
 * without waiting for the exec as posix_spawn would. Returns its pid, or -1 with errno (nothing
 * started). Only for a process that exits soon: the child's stack is never unmapped. */
pid_t proc_spawn_detached(const char *path, char *const argv[], char *const envp[], int keep_fd);

#endif
