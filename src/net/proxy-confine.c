/* Confinement of the proxy process (net_proxy_confine, proxy.h): a seccomp denylist of what a
 * proxy never needs. A denylist, not an allowlist, because getaddrinfo's needs vary with the
 * host's NSS configuration (files, dns, resolve, mdns modules loaded at run time). */
#include <errno.h>
#include <sched.h>
#include <seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/socket.h>

#include "base/cleanup.h"
#include "net/proxy.h"

static void release_ctx(scmp_filter_ctx *ctx) {
  if (*ctx)
    seccomp_release(*ctx);
}

/* Refused with EPERM. Names this architecture lacks are skipped. */
static const char *const denied[] = {
    "execve",
    "execveat",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "unshare",
    "setns",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsmount",
    "fsconfig",
    "fspick",
    "mount_setattr",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "open_by_handle_at",
    "name_to_handle_at",
    "keyctl",
    "add_key",
    "request_key",
    "reboot",
    "swapon",
    "swapoff",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "acct",
    "quotactl",
    "personality",
    "iopl",
    "ioperm",
    "lookup_dcookie",
    "syslog",
    "uselib",
    "vhangup",
    "memfd_create",
    "io_uring_setup",
    "seccomp",
};

/* Socket families a proxy has no use for (it needs unix, IPv4 and IPv6), and raw sockets. */
static const int denied_families[] = {AF_NETLINK, AF_PACKET, AF_ALG, AF_VSOCK, AF_KEY};

static const scmp_datum_t namespace_flags[] = {CLONE_NEWNS,  CLONE_NEWCGROUP, CLONE_NEWUTS,
                                               CLONE_NEWIPC, CLONE_NEWUSER,   CLONE_NEWPID,
                                               CLONE_NEWNET};

static int add_rules(scmp_filter_ctx ctx) {
  for (size_t i = 0; i < ARRAY_SIZE(denied); i++) {
    int nr = seccomp_syscall_resolve_name(denied[i]);
    if (nr == __NR_SCMP_ERROR)
      continue;
    int r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
    if (r < 0)
      return r;
  }
  for (size_t i = 0; i < ARRAY_SIZE(denied_families); i++) {
    int r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1,
                             SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)denied_families[i]));
    if (r < 0)
      return r;
  }
  /* clone with a namespace flag is refused; threads (the resolver's) stay allowed. clone3
   * hides its flags behind a pointer, so it gets ENOSYS, on which glibc falls back to clone. */
  for (size_t i = 0; i < ARRAY_SIZE(namespace_flags); i++) {
    int r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                             SCMP_A0(SCMP_CMP_MASKED_EQ, namespace_flags[i], namespace_flags[i]));
    if (r < 0)
      return r;
  }
  int r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
  if (r < 0)
    return r;
  return seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 1,
                          SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, SOCK_RAW));
}

int net_proxy_confine(struct cordon_error **err) {
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "egress proxy: no_new_privs");
  _cleanup_(release_ctx) scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (!ctx)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "egress proxy: seccomp");
  int r = add_rules(ctx);
  if (r == 0)
    r = seccomp_load(ctx);
  if (r < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, -r, "egress proxy: seccomp filter");
  return 0;
}
