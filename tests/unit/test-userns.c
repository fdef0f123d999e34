/* confine/userns.c: the throw-away user namespaces that carry an idmapped mount's mapping. The
 * fd must be a user namespace with exactly the mapping asked for; the helper process that made
 * it is not waited for on the way (a session's start does not pay for the scheduler running a
 * killed process): it raises no SIGCHLD in the caller and is reaped by the next creation, so at
 * most one is ever left over. Needs root (CAP_SETUID for the mapping); skips otherwise. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <linux/nsfs.h>

#include "confine/userns.h"

/* The children of this process, zombies included, or -1 when the kernel does not say. */
static int count_children(void) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/self/task/%ld/children", (long)syscall(SYS_gettid));
  FILE *f = fopen(path, "re");
  if (!f)
    return -1;
  int n = 0, pid;
  while (fscanf(f, "%d", &pid) == 1)
    n++;
  fclose(f);
  return n;
}

/* The first line of the uid_map a process sees after joining the namespace fd. */
static int uid_map_seen_through(int ns_fd, char *out, size_t size) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) < 0)
    return -1;
  pid_t pid = fork();
  if (pid == 0) {
    char buf[128] = {0};
    int map = -1;
    if (setns(ns_fd, CLONE_NEWUSER) == 0)
      map = open("/proc/self/uid_map", O_RDONLY | O_CLOEXEC);
    ssize_t n = map >= 0 ? read(map, buf, sizeof(buf) - 1) : -1;
    _exit(n > 0 && write(fds[1], buf, (size_t)n) == n ? 0 : 1);
  }
  close(fds[1]);
  ssize_t n = pid > 0 ? read(fds[0], out, size - 1) : -1;
  close(fds[0]);
  int status = 0;
  if (pid > 0)
    waitpid(pid, &status, 0);
  if (n <= 0 || !WIFEXITED(status) || WEXITSTATUS(status))
    return -1;
  out[n] = 0;
  return 0;
}

static void test_the_fd_is_a_user_namespace_with_the_mapping(void **state) {
  (void)state;
  if (geteuid() != 0)
    skip();
  struct cordon_error *err = NULL;
  int fd = confine_userns_idmap_fd(0, 65534, 0, 65534, &err);
  assert_true(fd >= 0);
  assert_int_equal(ioctl(fd, NS_GET_NSTYPE), CLONE_NEWUSER);
  char map[128];
  assert_int_equal(uid_map_seen_through(fd, map, sizeof(map)), 0);
  unsigned inner = 1, outer = 0, count = 0;
  assert_int_equal(sscanf(map, "%u %u %u", &inner, &outer, &count), 3);
  assert_int_equal(inner, 0);
  assert_int_equal(outer, 65534);
  assert_int_equal(count, 1);
  close(fd);
}

static void test_the_helper_is_not_waited_for_and_never_piles_up(void **state) {
  (void)state;
  if (geteuid() != 0)
    skip();
  sigset_t chld, old, pending;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  assert_int_equal(sigprocmask(SIG_BLOCK, &chld, &old), 0);
  int before = count_children();
  for (unsigned i = 0; i < 6; i++) {
    struct cordon_error *err = NULL;
    /* Alternate the mappings so that every call makes a new namespace (the last one is cached). */
    int fd = confine_userns_idmap_fd(0, 60000 + i % 2, 0, 60000 + i % 2, &err);
    assert_true(fd >= 0);
    close(fd);
    int now = count_children();
    if (before >= 0)
      assert_true(now <= before + 1);
  }
  /* The helpers died without telling the caller: no SIGCHLD for a wait it never asked for. */
  assert_int_equal(sigpending(&pending), 0);
  assert_false(sigismember(&pending, SIGCHLD));
  assert_int_equal(sigprocmask(SIG_SETMASK, &old, NULL), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_the_fd_is_a_user_namespace_with_the_mapping),
      cmocka_unit_test(test_the_helper_is_not_waited_for_and_never_piles_up),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
