/* What putting a new process in a fresh cgroup costs, three ways, in turn in one run: the way
 * exec/runner.c starts a command in its per-exec leaf (clone3 CLONE_VM|CLONE_VFORK|
 * CLONE_INTO_CGROUP: born there), against the way it did before (a vfork whose child writes
 * "0" into the leaf's cgroup.procs: a migration), and the same write into a cgroup v1 hierarchy
 * (pids), which has no clone3 way in. Each round makes a fresh cgroup, starts a child that exits
 * at once, times the start (the parent is suspended until the child's exit, as with vfork),
 * reaps it and removes the cgroup; rounds are GAP_MS apart, since a migration right after
 * another one finds the kernel's rwsem already in writer mode and skips the RCU grace period
 * that an exec of a live session pays.
 *
 *   cc -O2 -o /tmp/cgroup-birth bench/cgroup-birth.c && /tmp/cgroup-birth [ROUNDS] [GAP_MS]
 *
 * Needs root (or a delegated cgroup of our own) and a cgroup v2 hierarchy; the v1 row only
 * where /sys/fs/cgroup/pids is a v1 hierarchy. x86-64 only. Prints min, median, p75, p90 and
 * max of each way, and the ratio of the medians to the v2 write's. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif

struct clone_args_v2 {
  uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid,
      set_tid_size, cgroup;
};

/* clone3 whose child exits at once on the stack it is given (it runs no C code). */
static long clone3_exit_child(struct clone_args_v2 *args) {
  long r;
  __asm__ volatile("syscall\n"
                   "test %%rax, %%rax\n"
                   "jnz 1f\n"
                   "mov $60, %%eax\n" /* exit(0) */
                   "xor %%edi, %%edi\n"
                   "syscall\n"
                   "1:\n"
                   : "=a"(r)
                   : "0"((long)SYS_clone3), "D"(args), "S"((long)sizeof(*args))
                   : "rcx", "r11", "memory");
  return r;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int compare(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

enum way { V2_BORN, V2_WRITE, V1_WRITE, WAYS };
static const char *const way_names[WAYS] = {
    "v2 clone3 CLONE_INTO_CGROUP", "v2 vfork + cgroup.procs", "v1 pids vfork + cgroup.procs"};
static char parent_dir[WAYS][4200];
static _Alignas(16) unsigned char child_stack[16384];

/* One round of one way: the start's time in ms, or -1. */
static double one_round(enum way way, int round) {
  char dir[4300], procs[4400];
  snprintf(dir, sizeof(dir), "%s/cgroup-birth-%d-%d", parent_dir[way], (int)getpid(), round);
  if (mkdir(dir, 0755) < 0)
    return -1;
  snprintf(procs, sizeof(procs), "%s/cgroup.procs", dir);
  int dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int procs_fd = open(procs, O_WRONLY | O_CLOEXEC);
  double start = now();
  pid_t pid;
  if (way == V2_BORN) {
    struct clone_args_v2 args = {.flags = CLONE_VM | CLONE_VFORK | CLONE_INTO_CGROUP,
                                 .exit_signal = SIGCHLD,
                                 .stack = (uint64_t)(uintptr_t)child_stack,
                                 .stack_size = sizeof(child_stack),
                                 .cgroup = (uint64_t)dir_fd};
    pid = (pid_t)clone3_exit_child(&args);
  } else {
    pid = vfork();
    if (pid == 0) {
      _exit(write(procs_fd, "0", 1) == 1 ? 0 : 1);
    }
  }
  double took = (now() - start) * 1000;
  int status = 0;
  bool ok =
      pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  close(dir_fd);
  close(procs_fd);
  for (int i = 0; i < 1000 && rmdir(dir) < 0 && errno == EBUSY; i++)
    usleep(1000);
  return ok ? took : -1;
}

/* Our own cgroup in a hierarchy: the path after "ID:CONTROLLERS:" of its /proc/self/cgroup line. */
static int own_cgroup(const char *controllers, char *out, size_t size) {
  FILE *f = fopen("/proc/self/cgroup", "re");
  if (!f)
    return -1;
  char line[4096];
  int found = -1;
  while (found < 0 && fgets(line, sizeof(line), f)) {
    char *first = strchr(line, ':'), *second = first ? strchr(first + 1, ':') : NULL;
    if (!second)
      continue;
    *second = '\0';
    if (strcmp(first + 1, controllers) == 0) {
      second[1 + strcspn(second + 1, "\n")] = '\0';
      snprintf(out, size, "%s", strcmp(second + 1, "/") == 0 ? "" : second + 1);
      found = 0;
    }
  }
  fclose(f);
  return found;
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 100;
  int gap_ms = argc > 2 ? atoi(argv[2]) : 40;
  if (rounds < 4 || gap_ms < 0) {
    fprintf(stderr, "usage: cgroup-birth [ROUNDS >= 4] [GAP_MS]\n");
    return 2;
  }
  char own[4096];
  const char *v2 = NULL;
  const char *candidates[] = {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"};
  for (int i = 0; i < 2 && !v2; i++) {
    struct statfs sfs;
    if (statfs(candidates[i], &sfs) == 0 && sfs.f_type == CGROUP2_SUPER_MAGIC)
      v2 = candidates[i];
  }
  if (!v2 || own_cgroup("", own, sizeof(own)) < 0) {
    fprintf(stderr, "cgroup-birth: no cgroup v2 hierarchy here\n");
    return 1;
  }
  snprintf(parent_dir[V2_BORN], sizeof(parent_dir[0]), "%s%s", v2, own);
  snprintf(parent_dir[V2_WRITE], sizeof(parent_dir[0]), "%s%s", v2, own);
  struct statfs sfs;
  bool has_v1 = statfs("/sys/fs/cgroup/pids", &sfs) == 0 && sfs.f_type == CGROUP_SUPER_MAGIC &&
                own_cgroup("pids", own, sizeof(own)) == 0;
  if (has_v1)
    snprintf(parent_dir[V1_WRITE], sizeof(parent_dir[0]), "/sys/fs/cgroup/pids%s", own);
  int ways = has_v1 ? WAYS : V1_WRITE;

  double *times[WAYS];
  for (int w = 0; w < ways; w++)
    times[w] = calloc((size_t)rounds, sizeof(double));
  for (int round = 0; round < rounds; round++)
    for (int k = 0; k < ways; k++) {
      int w = (round + k) % ways; /* each way first in turn */
      times[w][round] = one_round((enum way)w, round);
      if (times[w][round] < 0) {
        fprintf(stderr, "cgroup-birth: %s failed in round %d: %s\n", way_names[w], round,
                strerror(errno));
        return 1;
      }
      if (gap_ms)
        usleep((useconds_t)gap_ms * 1000);
    }
  printf("%d rounds, %d ms apart; ms to start a child in a fresh cgroup\n", rounds, gap_ms);
  printf("%-30s %8s %8s %8s %8s %8s %8s\n", "way", "min", "median", "p75", "p90", "max", "ratio");
  double base = 0;
  for (int w = 0; w < ways; w++) {
    qsort(times[w], (size_t)rounds, sizeof(double), compare);
    double median = times[w][rounds / 2];
    if (w == V2_WRITE)
      base = median;
  }
  for (int w = 0; w < ways; w++) {
    double *t = times[w];
    printf("%-30s %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f\n", way_names[w], t[0], t[rounds / 2],
           t[rounds * 3 / 4], t[rounds * 9 / 10], t[rounds - 1], t[rounds / 2] / base);
    free(t);
  }
  printf("(ratio: median / the v2 write's median)\n");
  return 0;
}
