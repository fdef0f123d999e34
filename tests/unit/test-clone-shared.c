/* confine/clone-run.c, sys_clone3_run_shared: the child runs in our memory on a stack of its
 * own and we wait, as a vfork parent would, until it has exec'd or exited (never earlier), but
 * interruptibly: while it runs we sleep in state S, not D (which the load average counts). The ns
 * holder's workers start their command processes this way. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/clone-run.h"

#define STACK_SIZE (64 * 1024)

struct probe {
  int gate;              /* the child blocks reading this pipe until the test lets it go */
  volatile int before;   /* written by the child before it blocks */
  volatile int after;    /* written by the child right before it execs or exits */
  const char *exec_path; /* NULL: exit with 5 */
};

/* The child: only system calls (it shares our memory and our thread's errno with the helper
 * thread below), on its own stack, not instrumented. */
__attribute__((no_sanitize_address)) static int child(void *arg) {
  struct probe *p = arg;
  p->before = 1;
  char byte;
  while (syscall(SYS_read, p->gate, &byte, 1) < 0) {
  }
  p->after = 1;
  if (p->exec_path) {
    char *const argv[] = {(char *)p->exec_path, NULL};
    char *const envp[] = {NULL};
    syscall(SYS_execve, p->exec_path, argv, envp);
    syscall(SYS_exit, 127);
  }
  return 5;
}

/* What the main thread does while the child holds it: its state letter from /proc, several
 * times, then the child let go. (A stop signal would stop this thread too: tests/cli/
 * ns-idle-load.bats stops a single-threaded worker instead.) */
struct watch {
  pid_t tid; /* the thread waiting in sys_clone3_run_shared */
  int gate_write;
  volatile int *before;
  char states[8];
};

static char thread_state(pid_t tid) {
  char path[64], buf[512];
  snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return '?';
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0)
    return '?';
  buf[n] = 0;
  char *close_paren = strrchr(buf, ')');
  return close_paren && close_paren[1] == ' ' ? close_paren[2] : '?';
}

static void pause_ms(long ms) {
  struct timespec t = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

static void *watcher(void *arg) {
  struct watch *w = arg;
  for (int i = 0; i < 200 && !*w->before; i++)
    pause_ms(10);
  for (size_t i = 0; i < sizeof(w->states); i++) {
    pause_ms(20);
    w->states[i] = thread_state(w->tid);
  }
  (void)!write(w->gate_write, "g", 1);
  return NULL;
}

static int wait_status(pid_t pid) {
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  return WEXITSTATUS(status);
}

/* Run child (exec'ing path, or exiting) while a thread watches us wait; returns the child's
 * exit status, or -1 where sys_clone3_run_shared is not implemented. */
static int run_watched(const char *path, struct watch *w, struct probe *p) {
  int gate[2];
  assert_int_equal(pipe2(gate, O_CLOEXEC), 0);
  *p = (struct probe){.gate = gate[0], .exec_path = path};
  *w = (struct watch){
      .tid = (pid_t)syscall(SYS_gettid), .gate_write = gate[1], .before = &p->before};
  unsigned char *stack =
      mmap(NULL, STACK_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(stack != MAP_FAILED);
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, watcher, w), 0);
  pid_t pid = sys_clone3_run_shared(0, -1, stack, STACK_SIZE, child, p);
  int e = errno;
  if (pid < 0)
    (void)!write(gate[1], "g", 1); /* no child: let the watcher end */
  /* Back only once the child is done with our memory: it got past the gate. */
  if (pid > 0)
    assert_int_equal(p->after, 1);
  pthread_join(thread, NULL);
  close(gate[0]);
  close(gate[1]);
  munmap(stack, STACK_SIZE);
#if !defined(__x86_64__)
  assert_int_equal(pid, -1);
  assert_int_equal(e, ENOSYS);
  return -1;
#endif
  (void)e;
  assert_true(pid > 0);
  return wait_status(pid);
}

static void assert_waited_interruptibly(const struct watch *w) {
  for (size_t i = 0; i < sizeof(w->states); i++) {
    if (w->states[i] != 'S')
      fail_msg("sample %zu: the waiting thread is in state %c, not S", i, w->states[i]);
  }
}

static void test_waits_for_the_exit_interruptibly(void **state) {
  (void)state;
  struct watch w;
  struct probe p;
  int status = run_watched(NULL, &w, &p);
  if (status < 0)
    return;
  assert_int_equal(status, 5);
  assert_waited_interruptibly(&w);
}

static void test_waits_for_the_exec_interruptibly(void **state) {
  (void)state;
  const char *path = access("/bin/true", X_OK) == 0 ? "/bin/true" : "/usr/bin/true";
  struct watch w;
  struct probe p;
  int status = run_watched(path, &w, &p);
  if (status < 0)
    return;
  assert_int_equal(status, 0); /* true ran: the exec, not our exit 127 */
  assert_waited_interruptibly(&w);
}

static void test_refuses_clone_vfork(void **state) {
  (void)state;
  unsigned char stack[64];
  errno = 0;
  assert_int_equal(sys_clone3_run_shared(CLONE_VFORK, -1, stack, sizeof(stack), child, NULL), -1);
#if defined(__x86_64__)
  assert_int_equal(errno, EINVAL);
#else
  assert_int_equal(errno, ENOSYS);
#endif
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_waits_for_the_exit_interruptibly),
      cmocka_unit_test(test_waits_for_the_exec_interruptibly),
      cmocka_unit_test(test_refuses_clone_vfork),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
