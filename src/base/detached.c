/* A child that outlives us (see detached.h). */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/detached.h"

void *detached_map(struct detached *d, size_t args_size, size_t stack_size) {
  size_t args = (args_size + 4095) & ~(size_t)4095;
  d->length = args + ((stack_size + 4095) & ~(size_t)4095);
  d->map = mmap(NULL, d->length, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK | MAP_NORESERVE, -1, 0);
  if (d->map == MAP_FAILED) {
    d->map = NULL;
    return NULL;
  }
  return d->map;
}

pid_t detached_start(struct detached *d, int (*child)(void *), void *arg) {
  sigset_t all, old_mask;
  sigfillset(&all);
  sigprocmask(SIG_SETMASK, &all, &old_mask);
  pid_t pid = clone(child, d->map + d->length, CLONE_VM | SIGCHLD, arg);
  int saved = errno;
  if (pid > 0)
    setpgid(pid, pid);
  sigprocmask(SIG_SETMASK, &old_mask, NULL);
  if (pid < 0) {
    munmap(d->map, d->length);
    d->map = NULL;
    errno = saved;
  }
  return pid;
}
