/* clone3 into a function on its own stack (see syscalls.h: sys_clone3_run).
 *
 * glibc 2.36 has clone() (no CLONE_INTO_CGROUP) but no clone3() wrapper, and a raw clone3 with
 * a new stack cannot return into C: the child would resume in the caller's frame on a stack
 * that holds none of it. So the system call and the call of fn sit in a few lines of assembly,
 * as in glibc's own clone3.S: the kernel preserves every register but rax (and rcx, r11), so fn
 * and arg travel in r8 and r9 to the child, which clears the frame pointer, calls fn on the new
 * stack (16-byte aligned by the caller, as the ABI wants at a call) and exits with its result.
 * Elsewhere than x86-64 it fails with ENOSYS and callers fall back to a fork. */
#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include "base/clone-run.h"

#if defined(__x86_64__)

/* long cordon_clone3_raw(struct confine_clone_args *args, size_t size, int (*fn)(void *),
 *                        void *arg): the child's pid, or -errno. */
long cordon_clone3_raw(struct confine_clone_args *args, size_t size, int (*fn)(void *), void *arg);
__asm__(".text\n"
        ".globl cordon_clone3_raw\n"
        ".hidden cordon_clone3_raw\n"
        ".type cordon_clone3_raw, @function\n"
        "cordon_clone3_raw:\n"
        "  .cfi_startproc\n"
        "  mov %rdx, %r8\n" /* fn */
        "  mov %rcx, %r9\n" /* arg */
        "  mov $" CONFINE_STRINGIFY(
            SYS_clone3) ", %eax\n"
                        "  syscall\n"
                        "  test %rax, %rax\n"
                        "  jz 1f\n"
                        "  ret\n" /* the parent (after the child's exec or exit, with CLONE_VFORK),
                                     or -errno */
                        "1:\n"
                        "  .cfi_undefined %rip\n" /* the child: no caller to unwind to */
                        "  xor %ebp, %ebp\n"
                        "  mov %r9, %rdi\n"
                        "  call *%r8\n"
                        "  mov %eax, %edi\n"
                        "  mov $" CONFINE_STRINGIFY(
                            SYS_exit) ", %eax\n"
                                      "  syscall\n"
                                      "  hlt\n"
                                      "  .cfi_endproc\n"
                                      ".size cordon_clone3_raw, .-cordon_clone3_raw\n");

/* The arguments of a clone into fn on stack (born in cgroup_fd when >= 0), SIGCHLD at its end. */
static struct confine_clone_args run_args(uint64_t flags, int cgroup_fd, void *stack,
                                          size_t stack_size) {
  return (struct confine_clone_args){
      .flags = flags | (cgroup_fd >= 0 ? CLONE_INTO_CGROUP : 0),
      .exit_signal = SIGCHLD,
      .stack = (uint64_t)(uintptr_t)stack,
      .stack_size = stack_size,
      .cgroup = cgroup_fd >= 0 ? (uint64_t)cgroup_fd : 0,
  };
}

pid_t sys_clone3_run(uint64_t flags, int cgroup_fd, void *stack, size_t stack_size,
                     int (*fn)(void *), void *arg) {
  struct confine_clone_args args = run_args(flags, cgroup_fd, stack, stack_size);
  long r = cordon_clone3_raw(&args, sizeof(args), fn, arg);
  if (r < 0) {
    errno = (int)-r;
    return -1;
  }
  return (pid_t)r;
}

/* futex(word, FUTEX_WAIT, value) without glibc's wrapper, which would write errno: the child
 * of sys_clone3_run_shared shares our thread-local storage, errno included, and may be
 * between a failed call and its look at errno. Returns 0 or -errno. */
__attribute__((always_inline, no_sanitize_address)) static inline long
raw_futex_wait(uint32_t *word, uint32_t value) {
  register long timeout __asm__("r10") = 0;
  long r;
  __asm__ volatile("syscall"
                   : "=a"(r)
                   : "0"((long)SYS_futex), "D"(word), "S"((long)FUTEX_WAIT), "d"((long)value),
                     "r"(timeout)
                   : "rcx", "r11", "memory");
  return r;
}

/* Not instrumented by ASan: nothing between the clone and the end of the wait may touch the
 * sanitizer's state (its stack frames, its fake stacks), which the child uses meanwhile. */
__attribute__((no_sanitize_address)) pid_t sys_clone3_run_shared(uint64_t flags, int cgroup_fd,
                                                                 void *stack, size_t stack_size,
                                                                 int (*fn)(void *), void *arg) {
  if (flags & CLONE_VFORK) {
    errno = EINVAL;
    return -1;
  }
  /* Non-zero until the child lets go of our memory: the kernel writes 0 there and wakes the
   * futex on it (a shared futex wake, so the wait below is a shared one too). Set before the
   * child exists, so no ordering is left to the kernel. */
  uint32_t in_use = 1;
  struct confine_clone_args args =
      run_args(flags | CLONE_VM | CLONE_CHILD_CLEARTID, cgroup_fd, stack, stack_size);
  args.child_tid = (uint64_t)(uintptr_t)&in_use;
  long r = cordon_clone3_raw(&args, sizeof(args), fn, arg);
  if (r < 0) {
    errno = (int)-r;
    return -1;
  }
  /* A signal, a stop or a spurious wake-up only sends us round again; the word is 0 once the
   * child has exec'd (exec_mm_release) or exited (exit_mm_release). */
  while (__atomic_load_n(&in_use, __ATOMIC_ACQUIRE) != 0)
    raw_futex_wait(&in_use, 1);
  return (pid_t)r;
}

#else

pid_t sys_clone3_run(uint64_t flags, int cgroup_fd, void *stack, size_t stack_size,
                     int (*fn)(void *), void *arg) {
  (void)flags, (void)cgroup_fd, (void)stack, (void)stack_size, (void)fn, (void)arg;
  errno = ENOSYS;
  return -1;
}

pid_t sys_clone3_run_shared(uint64_t flags, int cgroup_fd, void *stack, size_t stack_size,
                            int (*fn)(void *), void *arg) {
  (void)flags, (void)cgroup_fd, (void)stack, (void)stack_size, (void)fn, (void)arg;
  errno = ENOSYS;
  return -1;
}

#endif

/* The stack is in this frame, which stays put while the child uses it (CLONE_VFORK suspends
 * us until its execve or exit). Not instrumented by ASan, so it is on the thread's real stack,
 * not in a fake frame. */
__attribute__((noinline, no_sanitize_address)) pid_t sys_vfork_run(int (*fn)(void *), void *arg) {
  _Alignas(16) unsigned char stack[16 * 1024];
  pid_t pid = sys_clone3_run(CLONE_VM | CLONE_VFORK, -1, stack, sizeof(stack), fn, arg);
  if (pid < 0 && errno == ENOSYS && (pid = fork()) == 0)
    _exit(fn(arg));
  return pid;
}
