/* The egress proxy's confinement (net_proxy_confine, src/net/proxy-confine.c), applied in a
 * child: what a proxy never needs is refused, what it needs (threads, sockets of its three
 * families, name lookups in /etc) still works. */
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "net/proxy.h"

static void *nothing(void *arg) {
  return arg;
}

/* The child's exit code: 0 when every check held, else the number of the one that failed. */
static int confined_checks(void) {
  struct cordon_error *err = NULL;
  if (net_proxy_confine(&err) < 0)
    return 1;
  char *const argv[] = {"true", NULL};
  execv("/bin/true", argv);
  if (errno != EPERM)
    return 2;
  if (mount("none", "/", NULL, MS_REMOUNT, NULL) == 0 || errno != EPERM)
    return 3;
  if (unshare(CLONE_NEWNET) == 0 || errno != EPERM)
    return 4;
  if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) == 0 || errno != EPERM)
    return 5;
  if (socket(AF_NETLINK, SOCK_DGRAM, 0) >= 0 || errno != EAFNOSUPPORT)
    return 6;
  if (socket(AF_INET, SOCK_RAW, 1) >= 0 || errno != EPERM)
    return 7;
  int fd = socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return 8;
  close(fd);
  pthread_t thread;
  if (pthread_create(&thread, NULL, nothing, NULL) != 0 || pthread_join(thread, NULL) != 0)
    return 9;
  struct addrinfo *list = NULL;
  if (getaddrinfo("localhost", NULL, NULL, &list) != 0)
    return 10;
  freeaddrinfo(list);
  return 0;
}

static void test_confine(void **state) {
  (void)state;
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0)
    _exit(confined_checks());
  int status = 0;
  assert_int_equal(waitpid(child, &status, 0), child);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_confine),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
