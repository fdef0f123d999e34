/* The seccomp deny list (see seccomp.h; the reasons are in docs/security.md).
 *
 * Every rule returns EPERM except clone3 and openat2, which return ENOSYS: their flags (and
 * openat2's mode) live in a struct that seccomp cannot inspect, and ENOSYS makes libc fall back
 * to clone(2) and openat(2), whose arguments we can. The filter covers the x86 and x32 ABIs too
 * on x86-64, so 32-bit entry points are no way around it; any other architecture is killed. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <seccomp.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/syscalls.h"
#include "confine/seccomp.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

const char *const confine_seccomp_denied[] = {
    /* keyrings: shared kernel state with a long CVE history, no use inside a sandbox */
    "keyctl",
    "add_key",
    "request_key",
    /* kernel attack surface rarely needed by build and test workloads */
    "userfaultfd",
    "perf_event_open",
    "bpf",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    /* the kernel itself */
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "syslog",
    "iopl",
    "ioperm",
    "quotactl",
    "quotactl_fd",
    "lookup_dcookie",
    "uselib",
    "vhangup",
    "nfsservctl",
    /* file handles bypass path-based access checks */
    "open_by_handle_at",
    "name_to_handle_at",
    /* the mount table */
    "mount",
    "umount",
    "umount2",
    "pivot_root",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    /* namespaces (clone and unshare are filtered by flag below) */
    "setns",
    /* other processes' memory and fds */
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_getfd",
    NULL,
};

static const unsigned long namespace_flags[] = {
    CLONE_NEWNS,   CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC,
    CLONE_NEWUSER, CLONE_NEWPID,    CLONE_NEWNET,
};

/* Personality bits that weaken address-space randomisation or protections. The mask includes
 * bit 31 so that the query value 0xffffffff (all bits) is not caught. */
static const unsigned long weakening_personality[] = {
    ADDR_NO_RANDOMIZE,
    ADDR_COMPAT_LAYOUT,
    MMAP_PAGE_ZERO,
    READ_IMPLIES_EXEC,
};

static void release_ctx(scmp_filter_ctx *ctx) {
  if (*ctx)
    seccomp_release(*ctx);
}

static int rule(scmp_filter_ctx ctx, uint32_t action, const char *name, unsigned n,
                const struct scmp_arg_cmp *cmp, struct cordon_error **err) {
  int nr = seccomp_syscall_resolve_name(name);
  if (nr == __NR_SCMP_ERROR)
    return 0; /* not a system call on this architecture */
  int r = seccomp_rule_add_array(ctx, action, nr, n, cmp);
  if (r < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, -r, "seccomp rule for %s", name);
  return 0;
}

/* Where each call that sets a file's mode takes it (argument index), and for the calls that only
 * create with O_CREAT or O_TMPFILE, where the flags are (-1: the call always creates). */
static const struct {
  const char *name;
  int mode_arg, flags_arg;
} setid_calls[] = {
    {"chmod", 1, -1},     {"fchmod", 1, -1}, {"fchmodat", 2, -1},
    {"fchmodat2", 2, -1}, {"mknod", 1, -1},  {"mknodat", 2, -1},
    {"creat", 1, -1},     {"open", 2, 1},    {"openat", 3, 2},
};

/* No set-user-ID or set-group-ID bit on anything a sandboxed command makes (finding 9 of issue
 * 14): a file the sandbox writes in a root-owned workspace is host root's, and with S_ISUID it
 * would be a root shell for every local user. Deny the bits where they are asked for: a mode
 * with either of them, and (open, openat) only when the call creates. The mode register is
 * masked bit by bit, so values above 07777 (which the kernel ignores) change nothing. openat2's
 * mode sits in a struct: it returns ENOSYS instead, and libc falls back to openat. */
static int setid_rules(scmp_filter_ctx ctx, struct cordon_error **err) {
  const uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
  /* rule() skips a name libseccomp does not know; these two are on every architecture since
   * Linux 6.6 and 5.6, so an unknown one means a libseccomp too old to close them: fail closed
   * (seccomp-gen fails the build; the docker init refuses to run the command). */
  static const char *const newer[] = {"fchmodat2", "openat2"};
  for (size_t i = 0; i < 2; i++)
    if (seccomp_syscall_resolve_name(newer[i]) == __NR_SCMP_ERROR)
      return cordon_error_set(err, CORDON_ERR_UNSUPPORTED, ENOSYS,
                              "this libseccomp does not know %s: set-id modes cannot be denied",
                              newer[i]);
  static const unsigned long bits[] = {S_ISUID, S_ISGID};
  /* O_TMPFILE includes O_DIRECTORY: its own bit alone says "create" */
  static const unsigned long creating[] = {O_CREAT, O_TMPFILE & ~O_DIRECTORY};
  for (size_t i = 0; i < sizeof(setid_calls) / sizeof(setid_calls[0]); i++)
    for (size_t b = 0; b < 2; b++) {
      unsigned a = (unsigned)setid_calls[i].mode_arg;
      struct scmp_arg_cmp mode = {a, SCMP_CMP_MASKED_EQ, bits[b], bits[b]};
      if (setid_calls[i].flags_arg < 0) {
        if (rule(ctx, eperm, setid_calls[i].name, 1, &mode, err) < 0)
          return -1;
        continue;
      }
      for (size_t c = 0; c < 2; c++) {
        struct scmp_arg_cmp both[2] = {
            {(unsigned)setid_calls[i].flags_arg, SCMP_CMP_MASKED_EQ, creating[c], creating[c]},
            mode,
        };
        if (rule(ctx, eperm, setid_calls[i].name, 2, both, err) < 0)
          return -1;
      }
    }
  return rule(ctx, SCMP_ACT_ERRNO(ENOSYS), "openat2", 0, NULL, err);
}

/* The rules, into a fresh context. */
static int make_filter(scmp_filter_ctx *out, struct cordon_error **err) {
  _cleanup_(release_ctx) scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (!ctx)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "seccomp_init");
  if (seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, EINVAL, "seccomp bad-arch action");
  /* The system-call numbers as a binary tree rather than a list: the same decisions. */
  if (seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, EINVAL, "seccomp filter layout");
#if defined(__x86_64__)
  /* Ignore EEXIST-style failures: an arch already present is fine. */
  seccomp_arch_add(ctx, SCMP_ARCH_X86);
  seccomp_arch_add(ctx, SCMP_ARCH_X32);
#endif
  const uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
  for (size_t i = 0; confine_seccomp_denied[i]; i++)
    if (rule(ctx, eperm, confine_seccomp_denied[i], 0, NULL, err) < 0)
      return -1;
  if (rule(ctx, SCMP_ACT_ERRNO(ENOSYS), "clone3", 0, NULL, err) < 0)
    return -1;
  for (size_t i = 0; i < sizeof(namespace_flags) / sizeof(namespace_flags[0]); i++) {
    struct scmp_arg_cmp cmp = SCMP_A0(SCMP_CMP_MASKED_EQ, namespace_flags[i], namespace_flags[i]);
    if (rule(ctx, eperm, "clone", 1, &cmp, err) < 0 ||
        rule(ctx, eperm, "unshare", 1, &cmp, err) < 0)
      return -1;
  }
  struct scmp_arg_cmp newtime = SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NEWTIME, CLONE_NEWTIME);
  if (rule(ctx, eperm, "unshare", 1, &newtime, err) < 0)
    return -1;
  if (setid_rules(ctx, err) < 0)
    return -1;
  /* Terminal injection: the command number is an int, but the register is 64 bits wide and the
   * kernel truncates it, so compare the low 32 bits only (high-bit variants are caught too). */
  static const unsigned long tty_injection[] = {TIOCSTI, TIOCLINUX};
  for (size_t i = 0; i < 2; i++) {
    struct scmp_arg_cmp cmp = SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, tty_injection[i]);
    if (rule(ctx, eperm, "ioctl", 1, &cmp, err) < 0)
      return -1;
  }
  for (size_t i = 0; i < sizeof(weakening_personality) / sizeof(weakening_personality[0]); i++) {
    struct scmp_arg_cmp cmp = SCMP_A0(SCMP_CMP_MASKED_EQ, weakening_personality[i] | 0x80000000u,
                                      weakening_personality[i]);
    if (rule(ctx, eperm, "personality", 1, &cmp, err) < 0)
      return -1;
  }
  *out = ctx;
  ctx = NULL;
  return 0;
}

int confine_seccomp_install(struct cordon_error **err) {
  _cleanup_(release_ctx) scmp_filter_ctx ctx = NULL;
  if (make_filter(&ctx, err) < 0)
    return -1;
  int r = seccomp_load(ctx);
  if (r < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, -r, "cannot load the seccomp filter");
  return 0;
}

int confine_seccomp_build(struct confine_seccomp_program *out, struct cordon_error **err) {
  _cleanup_(release_ctx) scmp_filter_ctx ctx = NULL;
  if (make_filter(&ctx, err) < 0)
    return -1;
  /* libseccomp 2.5 exports BPF only to an fd: use a memfd and read the program back. */
  _cleanup_close_ int fd = memfd_create("cordon-seccomp", MFD_CLOEXEC);
  if (fd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "memfd_create");
  int r = seccomp_export_bpf(ctx, fd);
  if (r < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, -r, "cannot compile the seccomp filter");
  struct stat st;
  if (fstat(fd, &st) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "seccomp filter");
  size_t size = (size_t)st.st_size;
  if (size == 0 || size % sizeof(struct sock_filter) != 0 ||
      size / sizeof(struct sock_filter) > BPF_MAXINSNS)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, EINVAL, "seccomp filter of %zu bytes", size);
  struct sock_filter *prog = malloc(size);
  if (!prog)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "seccomp filter");
  if (pread(fd, prog, size, 0) != (ssize_t)size) {
    free(prog);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno ? errno : EIO, "seccomp filter");
  }
  out->filter = prog;
  out->length = (unsigned short)(size / sizeof(struct sock_filter));
  return 0;
}

int confine_seccomp_attach(const struct confine_seccomp_program *program) {
  struct sock_fprog fprog = {.len = program->length, .filter = program->filter};
  if (sys_seccomp(SECCOMP_SET_MODE_FILTER, 0, &fprog) < 0)
    return -errno;
  return 0;
}
