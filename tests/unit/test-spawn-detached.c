/* proc_spawn_detached (src/base/spawn-detached.c): the program starts in a process group of its
 * own, with stdio on /dev/null, the kept fd as fd 3 and no other fd of ours, an empty signal mask,
 * the environment given, and arguments copied (the caller frees its own at once). The child is
 * `sleep`, looked at from outside through /proc once it has exec'd. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/spawn-detached.h"

/* The whole of /proc/PID/NAME (NULs kept), or NULL. */
static char *proc_read(pid_t pid, const char *name, size_t *length) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/%s", pid, name);
  FILE *f = fopen(path, "r");
  if (!f)
    return NULL;
  char *buf = calloc(1, 16384);
  size_t n = buf ? fread(buf, 1, 16383, f) : 0;
  fclose(f);
  if (length)
    *length = n;
  return buf;
}

static bool has_execd(pid_t pid) {
  char path[64], target[256] = {0};
  snprintf(path, sizeof(path), "/proc/%d/exe", pid);
  return readlink(path, target, sizeof(target) - 1) > 0 && strstr(target, "sleep");
}

/* The fd numbers of pid, as a sorted bit mask of the first 64, and how many there are. */
static unsigned long long open_fds(pid_t pid, int *count) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/fd", pid);
  DIR *d = opendir(path);
  unsigned long long mask = 0;
  *count = 0;
  for (struct dirent *e; d && (e = readdir(d));) {
    if (e->d_name[0] == '.')
      continue;
    int fd = atoi(e->d_name);
    (*count)++;
    if (fd < 64)
      mask |= 1ULL << fd;
  }
  if (d)
    closedir(d);
  return mask;
}

static void test_spawn(void **state) {
  (void)state;
  char kept[] = "/tmp/cordon-spawn-detached.XXXXXX";
  int keep = mkstemp(kept);
  assert_true(keep >= 0);
  /* An fd of ours that must not reach the child: not close-on-exec on purpose. */
  int stray = open("/dev/null", O_RDONLY);
  assert_true(stray >= 0);
  /* A signal blocked here must not stay blocked there. */
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGTERM);
  sigprocmask(SIG_BLOCK, &block, &old);
  char *argv_heap[] = {strdup("sleep"), strdup("30"), NULL};
  char *envp_heap[] = {strdup("MARK=from-envp"), strdup("PATH=/usr/bin:/bin"), NULL};
  pid_t pid = proc_spawn_detached("/bin/sleep", argv_heap, envp_heap, keep);
  /* The caller may free its vectors at once: the child has its own copies. */
  for (char **a = argv_heap; *a; a++) {
    memset(*a, 'X', strlen(*a));
    free(*a);
  }
  for (char **e = envp_heap; *e; e++) {
    memset(*e, 'X', strlen(*e));
    free(*e);
  }
  sigprocmask(SIG_SETMASK, &old, NULL);
  assert_true(pid > 0);
  for (int i = 0; i < 500 && !has_execd(pid); i++)
    nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
  assert_true(has_execd(pid));

  int count = 0;
  assert_int_equal(open_fds(pid, &count), 0xfULL); /* 0, 1, 2 and 3: nothing else of ours */
  assert_int_equal(count, 4);
  char path[64], target[256];
  snprintf(path, sizeof(path), "/proc/%d/fd/3", pid);
  ssize_t n = readlink(path, target, sizeof(target) - 1);
  assert_true(n > 0);
  target[n] = 0;
  assert_string_equal(target, kept);
  snprintf(path, sizeof(path), "/proc/%d/fd/0", pid);
  n = readlink(path, target, sizeof(target) - 1);
  assert_true(n > 0);
  target[n] = 0;
  assert_string_equal(target, "/dev/null");

  size_t length = 0;
  char *cmdline = proc_read(pid, "cmdline", &length);
  assert_non_null(cmdline);
  assert_int_equal(length, sizeof("sleep\0"
                                  "30"));
  assert_memory_equal(cmdline,
                      "sleep\0"
                      "30",
                      length);
  free(cmdline);
  char *environ_text = proc_read(pid, "environ", &length);
  assert_non_null(environ_text);
  assert_memory_equal(environ_text, "MARK=from-envp\0PATH=/usr/bin:/bin", length);
  free(environ_text);
  char *status = proc_read(pid, "status", NULL);
  assert_non_null(status);
  assert_non_null(strstr(status, "SigBlk:\t0000000000000000"));
  free(status);
  /* Its own process group (pgrp is the 5th field of stat, after the parenthesised name). */
  char *stat = proc_read(pid, "stat", NULL);
  assert_non_null(stat);
  int pgrp = 0;
  assert_int_equal(sscanf(strrchr(stat, ')') + 2, "%*c %*d %d", &pgrp), 1);
  assert_int_equal(pgrp, pid);
  free(stat);

  kill(pid, SIGKILL);
  int wstatus = 0;
  assert_int_equal(waitpid(pid, &wstatus, 0), pid);
  close(keep);
  close(stray);
  unlink(kept);
}

static void test_missing_program(void **state) {
  (void)state;
  char *argv[] = {"nothing", NULL};
  char *envp[] = {NULL};
  pid_t pid = proc_spawn_detached("/nonexistent/program", argv, envp, -1);
  assert_true(pid > 0); /* started: the exec fails in the child, which exits 127 */
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 127);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_spawn),
                                     cmocka_unit_test(test_missing_program)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
