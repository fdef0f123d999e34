/* Starting a program that outlives us without waiting for its exec (see spawn-detached.h).
 *
 * posix_spawn clones with CLONE_VFORK: the caller stays blocked until the child's execve has
 * built the new program's address space, about a millisecond for cordon's binary on a host
 * where page-table work is a hypervisor call. A caller about to exit need not wait: the child
 * here shares our memory (CLONE_VM, no copy) but not our stack, reads only what was copied to
 * its own mapping, and makes raw system calls (errno and the allocator belong to our exiting
 * thread), as the detached remover does. */
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/detached.h"
#include "base/spawn-detached.h"

#define SPAWN_STACK_SIZE (64 * 1024)
#define raw detached_raw

struct spawn_args {
  const char *path;
  char **argv;
  char **envp;
  int keep_fd;
};

DETACHED_CODE static int spawn_main(void *arg) {
  const struct spawn_args *sa = arg;
  raw(SYS_setsid, 0, 0, 0, 0);
  /* fd 3 first (keep_fd may be 0, 1 or 2), then stdio, then nothing else. */
  if (sa->keep_fd >= 0 && sa->keep_fd != 3 && raw(SYS_dup3, sa->keep_fd, 3, 0, 0) < 0)
    raw(SYS_exit, 127, 0, 0, 0);
  long null = raw(SYS_openat, AT_FDCWD, (long)"/dev/null", O_RDWR, 0);
  if (null < 0 || (null != 0 && raw(SYS_dup3, null, 0, 0, 0) < 0) ||
      raw(SYS_dup3, 0, 1, 0, 0) < 0 || raw(SYS_dup3, 0, 2, 0, 0) < 0)
    raw(SYS_exit, 127, 0, 0, 0);
  if (sa->keep_fd >= 0)
    raw(SYS_fcntl, 3, F_SETFD, 0, 0);
  raw(SYS_close_range, sa->keep_fd >= 0 ? 4 : 3, ~0U, 0, 0);
  uint64_t empty = 0; /* the kernel's sigset_t */
  raw(SYS_rt_sigprocmask, SIG_SETMASK, (long)&empty, 0, sizeof(empty));
  raw(SYS_execve, (long)sa->path, (long)sa->argv, (long)sa->envp, 0);
  raw(SYS_exit, 127, 0, 0, 0);
  return 0;
}

/* Bytes for a NULL-terminated vector and its strings. */
static size_t vector_size(char *const v[], size_t *count) {
  size_t bytes = 0, n = 0;
  for (; v && v[n]; n++)
    bytes += strlen(v[n]) + 1;
  *count = n;
  return bytes + (n + 1) * sizeof(char *);
}

/* Copy v into *at (pointers first, then the strings); returns the copy. */
static char **vector_copy(char *const v[], size_t n, char **at) {
  char **out = (char **)(void *)*at;
  char *text = *at + (n + 1) * sizeof(char *);
  for (size_t i = 0; i < n; i++) {
    size_t len = strlen(v[i]) + 1;
    memcpy(text, v[i], len);
    out[i] = text;
    text += len;
  }
  out[n] = NULL;
  *at = text;
  return out;
}

pid_t proc_spawn_detached(const char *path, char *const argv[], char *const envp[], int keep_fd) {
  size_t argc = 0, envc = 0;
  size_t data = sizeof(struct spawn_args) + strlen(path) + 1 + vector_size(argv, &argc) +
                vector_size(envp, &envc) + 2 * sizeof(char *);
  struct detached child;
  struct spawn_args *sa = detached_map(&child, data, SPAWN_STACK_SIZE);
  if (!sa)
    return -1;
  char *at = (char *)(sa + 1);
  at += (8 - ((uintptr_t)at & 7)) & 7;
  sa->argv = vector_copy(argv, argc, &at);
  at += (8 - ((uintptr_t)at & 7)) & 7;
  sa->envp = vector_copy(envp, envc, &at);
  memcpy(at, path, strlen(path) + 1);
  sa->path = at;
  sa->keep_fd = keep_fd;
  return detached_start(&child, spawn_main, sa);
}
