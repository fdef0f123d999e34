/* The one home of raw system calls: thin static inline wrappers named sys_<kernel name> for
 * the calls glibc 2.36 does not wrap (the new mount API, openat2, pidfds, clone3,
 * close_range) and for those whose glibc wrapper must be bypassed (the set*id calls, which
 * glibc broadcasts to every thread, unsafe in a clone child that shares our memory) or a
 * sanitizer's hook (PR_SET_NAME, whose hook locks in a fork of a threaded process). Debian
 * 12's kernel headers predate some constants: define them here. */
#ifndef CORDON_BASE_SYSCALLS_H
#define CORDON_BASE_SYSCALLS_H

#include <fcntl.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <signal.h>
#include <stdint.h>
#include <sys/prctl.h>
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
#ifndef SYS_openat2
#define SYS_openat2 437
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
static inline int sys_openat2(int dirfd, const char *path, struct open_how *how) {
  return (int)syscall(SYS_openat2, dirfd, path, how, sizeof(*how));
}
static inline int sys_close_range(unsigned first, unsigned last, unsigned flags) {
  return (int)syscall(SYS_close_range, first, last, flags);
}
/* The raw set*id calls change only the calling thread (glibc's wrappers signal every thread,
 * which a clone child sharing our memory must not do). */
static inline int sys_setgroups(size_t size, const gid_t *list) {
  return (int)syscall(SYS_setgroups, size, list);
}
static inline int sys_setresgid(gid_t rgid, gid_t egid, gid_t sgid) {
  return (int)syscall(SYS_setresgid, rgid, egid, sgid);
}
static inline int sys_setresuid(uid_t ruid, uid_t euid, uid_t suid) {
  return (int)syscall(SYS_setresuid, ruid, euid, suid);
}
/* header and data are struct __user_cap_header_struct / __user_cap_data_struct. */
static inline int sys_capset(void *header, const void *data) {
  return (int)syscall(SYS_capset, header, data);
}
static inline int sys_seccomp(unsigned op, unsigned flags, void *args) {
  return (int)syscall(SYS_seccomp, op, flags, args);
}
/* The thread's name (comm), bypassing every hook on prctl: a sanitizer's takes its thread
 * registry's lock, which in a fork of a threaded process may stay held by a thread that is not
 * there (a fork child of a threaded caller: the ns holder, attest's marker process). */
static inline int sys_prctl_set_name(const char *name) {
  return (int)syscall(SYS_prctl, PR_SET_NAME, name, 0, 0, 0);
}
static inline int sys_pause(void) {
  return (int)syscall(SYS_pause);
}
static inline long sys_futex(uint32_t *word, int op, uint32_t value) {
  return syscall(SYS_futex, word, op, value, NULL, NULL, 0);
}
/* struct linux_dirent64 records into buf; bytes read, 0 at the end, -1 with errno. */
static inline long sys_getdents64(int fd, void *buf, size_t size) {
  return syscall(SYS_getdents64, fd, buf, size);
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

#endif
