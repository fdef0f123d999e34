/* The network half of the landlock mechanism: Landlock's own network rights cover TCP ports
 * only, so when the policy's network is not open a second seccomp filter refuses every socket
 * family but AF_UNIX (EAFNOSUPPORT): no UDP, raw, packet or netlink socket, whatever the
 * kernel's Landlock ABI. It is compiled in the parent (libseccomp allocates) and attached in
 * the child after cordon's own filter. */
#include <errno.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/landlock.h"
#include "base/cleanup.h"

static void release_ctx(scmp_filter_ctx *ctx) {
  if (*ctx)
    seccomp_release(*ctx);
}

static int add_rules(scmp_filter_ctx ctx) {
  int r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1,
                           SCMP_A0(SCMP_CMP_NE, AF_UNIX));
  if (r < 0)
    return r;
  /* i386's socketcall hides its arguments behind a pointer: refuse it whole (libc uses the
   * direct socket call, filtered above, on every kernel cordon supports). */
  return seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(socketcall), 0);
}

int agent_landlock_net_filter(struct confine_seccomp_program *out, struct cordon_error **err) {
  _cleanup_(release_ctx) scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (!ctx)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "landlock: the socket filter");
  int r = 0;
#if defined(__x86_64__)
  /* cordon's main filter lets i386 programs through with its rules: so must this one. Not x32:
   * libseccomp 2.5.4 drops x86-64's argument rules when x32 shares the context (measured);
   * agent_landlock_x32_socket_filter covers x32 apart. */
  r = seccomp_arch_add(ctx, SCMP_ARCH_X86);
  if (r == -EEXIST)
    r = 0;
#endif
  if (r == 0)
    r = add_rules(ctx);
  if (r < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, -r, "landlock: the socket filter");
  /* libseccomp 2.5 exports BPF only to an fd. */
  _cleanup_close_ int fd = memfd_create("cordon-agent-net", MFD_CLOEXEC);
  if (fd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "memfd_create");
  r = seccomp_export_bpf(ctx, fd);
  if (r < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, -r, "landlock: compiling the socket filter");
  struct stat st;
  if (fstat(fd, &st) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "landlock: the socket filter");
  size_t size = (size_t)st.st_size;
  if (size == 0 || size % sizeof(struct sock_filter) != 0 ||
      size / sizeof(struct sock_filter) > BPF_MAXINSNS)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, EINVAL, "socket filter of %zu bytes", size);
  _cleanup_free_ struct sock_filter *prog = malloc(size);
  if (!prog)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "landlock: the socket filter");
  if (pread(fd, prog, size, 0) != (ssize_t)size)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno ? errno : EIO, "socket filter");
  out->filter = steal_ptr(&prog);
  out->length = (unsigned short)(size / sizeof(struct sock_filter));
  return 0;
}

#if defined(__x86_64__)
/* x32's socket call (its number with bit 30 set, on x86-64's audit arch): the same rule. */
#define X32_SOCKET (0x40000000U | 41U)
static struct sock_filter x32_socket[] = {
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 5),
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, X32_SOCKET, 0, 3),
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])), /* low half */
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_UNIX, 1, 0),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EAFNOSUPPORT),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
};
static const struct confine_seccomp_program x32_program = {x32_socket, ARRAY_SIZE(x32_socket)};
#endif

const struct confine_seccomp_program *agent_landlock_x32_socket_filter(void) {
#if defined(__x86_64__)
  return &x32_program;
#else
  return NULL;
#endif
}
