/* Thin wrappers for the system calls glibc 2.36 does not wrap (the new mount API, pidfds,
 * clone3-era helpers). Debian 12's kernel headers predate some constants: define them here. */
#ifndef CORDON_CONFINE_SYSCALLS_H
#define CORDON_CONFINE_SYSCALLS_H

#include <fcntl.h>
#include <linux/mount.h>
#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef MOUNT_ATTR_IDMAP
#define MOUNT_ATTR_IDMAP 0x00100000
#endif
#ifndef MOUNT_ATTR_NOSYMFOLLOW
#define MOUNT_ATTR_NOSYMFOLLOW 0x00200000
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif
#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef OPEN_TREE_CLOEXEC
#define OPEN_TREE_CLOEXEC O_CLOEXEC
#endif
#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif

struct confine_mount_attr {
  uint64_t attr_set;
  uint64_t attr_clr;
  uint64_t propagation;
  uint64_t userns_fd;
};

static inline int sys_open_tree(int dirfd, const char *path, unsigned flags) {
  return (int)syscall(SYS_open_tree, dirfd, path, flags);
}
static inline int sys_move_mount(int from_dirfd, const char *from_path, int to_dirfd,
                                 const char *to_path, unsigned flags) {
  return (int)syscall(SYS_move_mount, from_dirfd, from_path, to_dirfd, to_path, flags);
}
static inline int sys_mount_setattr(int dirfd, const char *path, unsigned flags,
                                    struct confine_mount_attr *attr) {
  return (int)syscall(SYS_mount_setattr, dirfd, path, flags, attr, sizeof(*attr));
}
static inline int sys_fsopen(const char *fsname, unsigned flags) {
  return (int)syscall(SYS_fsopen, fsname, flags);
}
static inline int sys_fsconfig(int fd, unsigned cmd, const char *key, const void *value, int aux) {
  return (int)syscall(SYS_fsconfig, fd, cmd, key, value, aux);
}
static inline int sys_fsmount(int fd, unsigned flags, unsigned attr_flags) {
  return (int)syscall(SYS_fsmount, fd, flags, attr_flags);
}
static inline int sys_pivot_root(const char *new_root, const char *put_old) {
  return (int)syscall(SYS_pivot_root, new_root, put_old);
}
static inline int sys_pidfd_open(pid_t pid, unsigned flags) {
  return (int)syscall(SYS_pidfd_open, pid, flags);
}
static inline int sys_pidfd_send_signal(int pidfd, int sig) {
  return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
}

#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif

/* struct clone_args of clone3(2), spelled out so <linux/sched.h> and <sched.h> never meet. */
struct confine_clone_args {
  uint64_t flags;
  uint64_t pidfd;
  uint64_t child_tid;
  uint64_t parent_tid;
  uint64_t exit_signal;
  uint64_t stack;
  uint64_t stack_size;
  uint64_t tls;
  uint64_t set_tid;
  uint64_t set_tid_size;
  uint64_t cgroup;
};

/* fork-like clone3: the child continues on a copy of our stack. With cgroup_fd >= 0 the child
 * is born in that cgroup (v2), which costs no migration. Only for single-threaded callers (no
 * atfork handlers run). */
static inline pid_t sys_clone3_fork(uint64_t flags, int cgroup_fd) {
  struct confine_clone_args args = {
      .flags = flags | (cgroup_fd >= 0 ? CLONE_INTO_CGROUP : 0),
      .exit_signal = SIGCHLD,
      .cgroup = cgroup_fd >= 0 ? (uint64_t)cgroup_fd : 0,
  };
  return (pid_t)syscall(SYS_clone3, &args, sizeof(args));
}

/* clone3 that runs fn(arg) in the child on [stack, stack + stack_size) and exits with its
 * result; with cgroup_fd >= 0 the child is born in that v2 cgroup. For CLONE_VM|CLONE_VFORK:
 * the child borrows our memory until it execs or exits, and we wait until then, so it may
 * call anything a forked child may. The pid, or -1 with errno (ENOSYS where it is not
 * implemented: fork instead). clone-run.c. */
pid_t sys_clone3_run(uint64_t flags, int cgroup_fd, void *stack, size_t stack_size,
                     int (*fn)(void *), void *arg);

#define CONFINE_STRINGIFY_(x) #x
#define CONFINE_STRINGIFY(x) CONFINE_STRINGIFY_(x)

#endif
