/* A child that outlives us, started without copying or waiting: the one primitive under
 * fs_remove_tree_detached and proc_spawn_detached.
 *
 * The child shares our memory (CLONE_VM: no page tables copied) but runs on a mapping of its
 * own, which also holds its arguments at the bottom and is never unmapped (it is ours until we
 * exit, then the child's alone). It runs beside our exit, so it must not touch anything of ours
 * that the exit changes: the allocator, stdio, errno (our thread's), even our stack. Its code
 * therefore makes only raw system calls (detached_raw) and is built without the address
 * sanitizer's instrumentation (DETACHED_CODE), whose shadow state belongs to our thread. */
#ifndef CORDON_BASE_DETACHED_H
#define CORDON_BASE_DETACHED_H

#include <stddef.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define DETACHED_CODE __attribute__((no_sanitize_address))
#else
#define DETACHED_CODE
#endif

/* A system call whose result is its return value (-1 on failure), never errno. */
DETACHED_CODE static inline long detached_raw(long number, long a, long b, long c, long d) {
  return syscall(number, a, b, c, d);
}

struct detached {
  unsigned char *map; /* the arguments at the bottom, the child's stack above them */
  size_t length;
};

/* Map room for args_size bytes of arguments (8-aligned, returned) under a stack of stack_size
 * bytes; NULL with errno when it cannot be mapped. */
void *detached_map(struct detached *d, size_t args_size, size_t stack_size);

/* Start child(arg) on d's stack: every signal blocked across the clone (no handler of ours runs
 * in the child; it sets the mask it wants), the child moved into a process group of its own
 * before we go on (a harness that kills our group, or a terminal's ^C, must not stop it; its
 * own setsid may come after our exit). Returns its pid; on failure -1 with errno, d unmapped. */
pid_t detached_start(struct detached *d, int (*child)(void *), void *arg);

#endif
