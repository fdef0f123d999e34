/* The qemu monitor's parts (monitor.h: microvm_monitor_qemu). qemu.c holds the monitor's
 * operations and the host side of the guest agent's wire; qemu-vmm.c builds and starts the
 * confined qemu process and its boot files; the guest side is guest/ (cordon-guest). Files in
 * a session's control directory: agent.sock (qemu's chardev for the agent's virtio-serial
 * port; one client at a time), agent.lock (serialises execs), console.log (the guest's ttyS0,
 * never mixed with command output), initrd.img (the cached base initramfs with the agent
 * appended), vmm.log (qemu's own stderr). */
#ifndef CORDON_BACKENDS_MICROVM_QEMU_H
#define CORDON_BACKENDS_MICROVM_QEMU_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "backends/microvm/monitor.h"

#define QEMU_BINARY "qemu-system-x86_64"
#define QEMU_AGENT_SOCKET "agent.sock"
#define QEMU_CONSOLE_LOG "console.log"
#define QEMU_INITRD "initrd.img"
#define QEMU_VMM_LOG "vmm.log"
/* The VMM's uid and gid (nobody): qemu holds nothing of root's. */
#define QEMU_VMM_UID CONFINE_ROOT_HOST_UID
#define QEMU_VMM_GID CONFINE_ROOT_HOST_GID
/* The VMM's ids inside its own user namespace (the guest's sandbox user), mapped to the above. */
#define QEMU_VMM_INNER_UID CONFINE_SANDBOX_UID
#define QEMU_VMM_INNER_GID CONFINE_SANDBOX_GID
/* The fds qemu is handed: its console goes to stdout (console.log), its own messages to
 * stderr (vmm.log). */
#define QEMU_FD_AGENT 3
#define QEMU_FD_KERNEL 4
#define QEMU_FD_INITRD 5
#define QEMU_FD_WORKSPACE 6
/* Under TCG, qemu's translation cache in MiB (qemu's default is 1 GiB): host memory the guest's
 * code fills beyond its RAM, which --memory does not count; this bounds it. A boot fills about
 * 45 MiB, the escape suite's session about 100; when it is full qemu flushes it and translates
 * again (a pause), so it is kept well above what a session's work fills. */
#define QEMU_TCG_CACHE_MIB 256u
/* The built guest (scripts/build-guest). */
#define QEMU_GUEST_KERNEL "vmlinux"
#define QEMU_GUEST_INITRAMFS "initramfs.cpio"
#define QEMU_GUEST_SUMS "SHA256SUMS"
/* Names the kernel; scripts/build-guest's own minimal kernel's starts QEMU_GUEST_MINIMAL. */
#define QEMU_GUEST_KERNEL_VERSION "kernel-version"
#define QEMU_GUEST_MINIMAL "cordon-minimal "
/* Where the agent binary is found before the built and installed copies. */
#define QEMU_GUEST_AGENT_ENV "CORDON_GUEST_AGENT"

/* The guest directory cfg names (or the environment's, or the default); static or cfg's. */
const char *qemu_guest_dir(const struct microvm_config *cfg);
/* The agent binary to boot with: malloc'd path, NULL when none exists. */
char *qemu_agent_path(void);
/* "" when every file SHA256SUMS lists in dir is present with its checksum (and the kernel and
 * initramfs are among them), else a malloc'd phrase naming what is wrong; NULL on ENOMEM. */
char *qemu_guest_check(const char *dir);
/* Whether dir holds build-guest's minimal kernel (no ACPI: qemu's microvm then runs without
 * ACPI and names the virtio-mmio devices on the kernel command line) rather than Debian's. */
bool qemu_guest_minimal(const char *dir);
/* QEMU_BINARY's path in PATH (malloc'd), or NULL. */
char *qemu_binary_path(void);

/* Pure: a newc cpio archive holding one regular file `name` (mode 0755) with `data`, and the
 * trailer. Malloc'd; -ENOMEM. */
int qemu_cpio_single(const char *name, const unsigned char *data, size_t length,
                     unsigned char **out, size_t *out_length);

/* Pure: qemu's argv (NULL-terminated, malloc'd strings in a malloc'd vector: free with
 * qemu_argv_free). kvm: the accelerator; minimal: the kernel is build-guest's minimal one
 * (qemu_guest_minimal); kernel, initrd and workspace: the paths qemu opens
 * (no commas: /proc/self/fd/N in practice). */
char **qemu_argv_build(const char *binary, const struct microvm_config *cfg, bool kvm, bool minimal,
                       const char *kernel, const char *initrd, const char *workspace);
void qemu_argv_free(char **argv);

/* Write control_dir/initrd.img (the base initramfs, then the agent as /init), start qemu
 * confined and detached (it outlives this process), and return its pid (host pid namespace).
 * The VMM: its own mount, pid, ipc, uts and net namespaces, no_new_privs, QEMU's -sandbox. */
int qemu_vmm_spawn(const struct microvm_config *cfg, bool kvm, pid_t *pid,
                   struct cordon_error **err);
/* The last `lines` lines of control_dir/NAME (console.log, vmm.log), newlines shown as '|'
 * (malloc'd; "" when none). */
char *qemu_log_tail(const char *control_dir, const char *name, int lines);

#endif
