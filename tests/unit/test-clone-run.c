/* base/clone-run.c: clone3 into a function on a stack of the caller's (the vfork that starts
 * the ns holder's command processes). The child must run on that stack, in our memory when
 * asked (CLONE_VM|CLONE_VFORK: we wait until it is done), and exit with the function's result;
 * born in the cgroup asked for. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/magic.h>

#include <cmocka.h>

#include "base/clone-run.h"

#define STACK_SIZE (64 * 1024)

struct probe {
  unsigned char *stack;
  volatile int on_stack; /* the child saw one of its locals inside [stack, stack + size) */
  volatile int wrote;
  int result;
};

__attribute__((no_sanitize_address)) static int child(void *arg) {
  struct probe *p = arg;
  volatile int local = 0;
  uintptr_t at = (uintptr_t)&local;
  p->on_stack = at >= (uintptr_t)p->stack && at < (uintptr_t)p->stack + STACK_SIZE;
  p->wrote = 42;
  return p->result;
}

static int wait_status(pid_t pid) {
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  return WEXITSTATUS(status);
}

/* Run child on a fresh stack with flags; the child's pid, or 0 where sys_clone3_run is not
 * implemented (after checking that it says so: ENOSYS, and callers fork instead). */
static pid_t start_child(struct probe *p, uint64_t flags) {
  p->stack = mmap(NULL, STACK_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(p->stack != MAP_FAILED);
  pid_t pid = sys_clone3_run(flags, -1, p->stack, STACK_SIZE, child, p);
#if !defined(__x86_64__)
  assert_int_equal(pid, -1);
  assert_int_equal(errno, ENOSYS);
  return 0;
#endif
  assert_true(pid > 0);
  return pid;
}

static void test_vfork_shares_memory_and_exits_with_the_result(void **state) {
  (void)state;
  struct probe p = {.result = 7};
  pid_t pid = start_child(&p, CLONE_VM | CLONE_VFORK);
  if (pid == 0) {
    munmap(p.stack, STACK_SIZE);
    return;
  }
  /* CLONE_VFORK: the child is done by now, and wrote into our memory from its own stack. */
  assert_int_equal(p.wrote, 42);
  assert_true(p.on_stack);
  assert_int_equal(wait_status(pid), 7);
  munmap(p.stack, STACK_SIZE);
}

static void test_without_clone_vm_the_child_has_a_copy(void **state) {
  (void)state;
  struct probe p = {.result = 3};
  pid_t pid = start_child(&p, 0);
  if (pid == 0) {
    munmap(p.stack, STACK_SIZE);
    return;
  }
  assert_int_equal(wait_status(pid), 3);
  assert_int_equal(p.wrote, 0);
  munmap(p.stack, STACK_SIZE);
}

static void test_errors_come_back_as_errno(void **state) {
  (void)state;
  unsigned char stack[64];
  /* A stack without a size is refused by the kernel; nothing runs. */
  errno = 0;
  pid_t pid = sys_clone3_run(CLONE_VM | CLONE_VFORK, -1, stack, 0, child, NULL);
  assert_int_equal(pid, -1);
  assert_true(errno == EINVAL || errno == ENOSYS);
  /* So is a cgroup that is not one. */
  int not_a_cgroup = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  assert_true(not_a_cgroup >= 0);
  struct probe p = {.result = 0};
  p.stack = mmap(NULL, STACK_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(p.stack != MAP_FAILED);
  errno = 0;
  pid = sys_clone3_run(CLONE_VM | CLONE_VFORK, not_a_cgroup, p.stack, STACK_SIZE, child, &p);
  assert_int_equal(pid, -1);
  assert_true(errno != 0);
  assert_int_equal(p.wrote, 0);
  close(not_a_cgroup);
  munmap(p.stack, STACK_SIZE);
}

/* ---- born in a cgroup ---------------------------------------------------------------------- */

struct cgroup_probe {
  char seen[4096]; /* the child's /proc/self/cgroup, read as its first act */
  long length;
};

/* The child's first act: read /proc/self/cgroup into our memory (raw calls: nothing else has
 * run in it yet, not even errno). */
__attribute__((no_sanitize_address)) static int read_own_cgroup(void *arg) {
  struct cgroup_probe *p = arg;
  long fd = syscall(SYS_openat, AT_FDCWD, "/proc/self/cgroup", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 1;
  p->length = syscall(SYS_read, fd, p->seen, sizeof(p->seen) - 1);
  syscall(SYS_close, fd);
  return p->length > 0 ? 0 : 2;
}

/* A fresh v2 cgroup under our own: its path below the mount ("/..."), and its directory. Skips
 * where none can be made. */
static void make_cgroup(char *relative, size_t relative_size, char *dir, size_t dir_size) {
  const char *mount = NULL;
  const char *candidates[] = {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"};
  for (size_t i = 0; i < 2 && !mount; i++) {
    struct statfs sfs;
    if (statfs(candidates[i], &sfs) == 0 && sfs.f_type == CGROUP2_SUPER_MAGIC)
      mount = candidates[i];
  }
  char own[2100] = "", line[2100];
  FILE *f = mount ? fopen("/proc/self/cgroup", "re") : NULL;
  while (f && fgets(line, sizeof(line), f))
    if (strncmp(line, "0::/", 4) == 0) {
      line[strcspn(line, "\n")] = '\0';
      snprintf(own, sizeof(own), "%s", strcmp(line + 3, "/") == 0 ? "" : line + 3);
    }
  if (f)
    fclose(f);
  snprintf(relative, relative_size, "%s/cordon-test-clone-%d", own, (int)getpid());
  snprintf(dir, dir_size, "%s%s", mount ? mount : "", relative);
  if (!mount || mkdir(dir, 0755) < 0) {
    print_message("SKIP: no cgroup v2 of our own to make a child cgroup in (%s)\n",
                  mount ? strerror(errno) : "no v2 hierarchy");
    skip();
  }
}

static void test_born_in_the_cgroup(void **state) {
  (void)state;
#if !defined(__x86_64__)
  skip();
#endif
  char relative[2200], dir[2300];
  make_cgroup(relative, sizeof(relative), dir, sizeof(dir));
  int cgroup_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  assert_true(cgroup_fd >= 0);
  unsigned char *stack =
      mmap(NULL, STACK_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(stack != MAP_FAILED);
  struct cgroup_probe p = {.length = 0};
  pid_t pid =
      sys_clone3_run(CLONE_VM | CLONE_VFORK, cgroup_fd, stack, STACK_SIZE, read_own_cgroup, &p);
  int e = errno;
  close(cgroup_fd);
  munmap(stack, STACK_SIZE);
  if (pid < 0 && (e == E2BIG || e == EINVAL || e == ENOSYS)) {
    rmdir(dir);
    print_message("SKIP: this kernel has no CLONE_INTO_CGROUP (%s)\n", strerror(e));
    skip();
  }
  assert_true(pid > 0);
  int status = wait_status(pid);
  rmdir(dir);
  assert_int_equal(status, 0);
  /* Its first act already saw the cgroup: it was born there, not moved there. */
  char expected[2300];
  snprintf(expected, sizeof(expected), "0::%s\n", relative);
  p.seen[p.length] = '\0';
  assert_non_null(strstr(p.seen, expected));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_vfork_shares_memory_and_exits_with_the_result),
      cmocka_unit_test(test_without_clone_vm_the_child_has_a_copy),
      cmocka_unit_test(test_errors_come_back_as_errno),
      cmocka_unit_test(test_born_in_the_cgroup),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
