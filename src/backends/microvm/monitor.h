/* The monitor shim of the microvm backend: the one interface through which the backend drives a
 * virtual machine, never a hypervisor directly. A monitor checks what it needs (preflight, no
 * side effects), boots a VM for a session, runs commands in it, and stops it. The backend above
 * (microvm.c) owns the session: its state, the shared workspace (read, write and ls happen on
 * the host side of the shared directory, through protocol/workspace.c) and snapshots, which are
 * the workspace's, so a microvm session's snapshot id is the one ns gives for the same tree.
 *
 * Monitors: qemu (qemu-system-x86_64 -M microvm, the guest agent over virtio-serial),
 * firecracker and libkrun (preflight names every missing requirement; boot where all are
 * present), fake (deterministic and in-process: commands run on the host in the workspace, for
 * tests of everything above the shim). No monitor ever stands in for another, and a monitor
 * never runs in a weaker mode than asked: a requirement it lacks is a refusal that names it. */
#ifndef CORDON_BACKENDS_MICROVM_MONITOR_H
#define CORDON_BACKENDS_MICROVM_MONITOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cordon/backend.h>
#include <cordon/error.h>

/* 256 MiB: enough for a shell, git and a test runner in the guest; --memory changes it. */
#define MICROVM_DEFAULT_MEMORY_BYTES (256ull << 20)
/* Below this the guest kernel and its initramfs do not fit: the boot hangs, it never fails. */
#define MICROVM_MIN_MEMORY_BYTES (96ull << 20)
#define MICROVM_DEFAULT_VCPUS 1u
/* Where the guest finds the workspace when the manifest names no root. */
#define MICROVM_DEFAULT_ROOT "/workspace"
/* Environment: the monitor when the manifest names none, and where the built guest lives. */
#define MICROVM_MONITOR_ENV "CORDON_MICROVM_MONITOR"
#define MICROVM_DEFAULT_MONITOR "qemu"
#define MICROVM_GUEST_DIR_ENV "CORDON_GUEST_DIR"
#define MICROVM_DEFAULT_GUEST_DIR "/var/cache/cordon/guest"

/* How the guest's CPU is run. AUTO: KVM where it really works, else software emulation. An
 * explicit choice is never changed: KVM asked where it does not work is a refusal. */
enum microvm_accel {
  MICROVM_ACCEL_AUTO = 0,
  MICROVM_ACCEL_KVM,
  MICROVM_ACCEL_TCG,
};

/* What a monitor is given to boot a session's VM. Paths are absolute host paths. */
struct microvm_config {
  const char *workspace;     /* host directory shared into the guest, read-write */
  const char *root;          /* where the guest sees it (MICROVM_DEFAULT_ROOT when NULL) */
  const char *control_dir;   /* the session's runtime directory (protocol/rundir.h): sockets,
                                console log, pid files; outside every workspace and snapshot */
  const char *guest_dir;     /* the built guest: kernel, initramfs, checksums (NULL: from the
                                environment, else MICROVM_DEFAULT_GUEST_DIR) */
  uint64_t memory_bytes;     /* 0: MICROVM_DEFAULT_MEMORY_BYTES */
  unsigned vcpus;            /* 0: MICROVM_DEFAULT_VCPUS */
  enum cordon_egress egress; /* none: no NIC and no loopback route off; loopback: lo only */
  enum microvm_accel accel;
  const char *const *env; /* the session's base environment (KEY=VALUE), NULL-terminated */
  double boot_timeout;    /* seconds; 0: the monitor's bound. A boot never waits forever */
  bool user_root;         /* commands run as root in the guest instead of uid 1000 */
  uint64_t pids;          /* 0: no limit; else the most processes (and threads) the sandbox
                             user may have in the guest at once (the guest agent sets it as
                             RLIMIT_NPROC; refused with user_root, which the kernel exempts) */
};

/* One requirement a monitor checked: `missing` NULL when present, else a malloc'd phrase that
 * names it ("no firecracker binary in PATH", "/dev/kvm is PVM-backed: ..."). */
struct microvm_requirement {
  const char *what; /* "binary", "kvm", "kernel", "rootfs", "vsock", "library", ... */
  char *missing;
};

#define MICROVM_MAX_REQUIREMENTS 16
struct microvm_preflight {
  struct microvm_requirement items[MICROVM_MAX_REQUIREMENTS];
  size_t count;
  enum microvm_accel accel; /* what boot would use when nothing is missing */
};

/* A running VM, as the backend holds it. `state` (a JSON object as text, malloc'd) is what a
 * later process needs to reach the VM again (attach); the backend persists it. */
struct microvm_vm {
  const struct microvm_monitor *monitor;
  pid_t vmm_pid;                /* 0: none (fake) */
  unsigned long long vmm_start; /* its start time (/proc/PID/stat), so a reused pid is not it */
  char *state;
  void *impl; /* the monitor's in-process data */
};

struct microvm_monitor {
  const char *name;
  const char *summary;
  /* Check every requirement for cfg without side effects (no process started, nothing
   * written). Returns 0 and fills *out (clear with microvm_preflight_clear); < 0 only when the
   * check itself failed (ENOMEM). */
  int (*preflight)(const struct microvm_config *cfg, struct microvm_preflight *out,
                   struct cordon_error **err);
  /* Boot and return once the guest agent answers (bounded by cfg->boot_timeout), or fail with
   * what went wrong (the console's last lines where there is one). */
  int (*boot)(const struct microvm_config *cfg, struct microvm_vm *vm, struct cordon_error **err);
  /* Reach a VM booted by another process from its saved state. */
  int (*attach)(const struct microvm_config *cfg, const char *state, struct microvm_vm *vm,
                struct cordon_error **err);
  /* Run one command in the guest: the backend protocol's exec semantics (the request resolved
   * by the library: complete env, cwd relative to the workspace or absolute in the guest). The
   * status comes from the guest agent's own record, never from the VMM's exit. */
  int (*exec)(struct microvm_vm *vm, const struct microvm_config *cfg,
              const struct cordon_exec_request *req, struct cordon_exec_result *res,
              struct cordon_error **err);
  /* Stop the VM and everything in it. Idempotent; the workspace stays. */
  int (*shutdown)(struct microvm_vm *vm, struct cordon_error **err);
  /* Free vm's in-process data (not the VM). May be NULL. */
  void (*release)(struct microvm_vm *vm);
};

extern const struct microvm_monitor microvm_monitor_qemu;
extern const struct microvm_monitor microvm_monitor_firecracker;
extern const struct microvm_monitor microvm_monitor_libkrun;
extern const struct microvm_monitor microvm_monitor_fake;

/* The monitor of that name, or NULL. */
const struct microvm_monitor *microvm_monitor_find(const char *name);
/* "qemu, firecracker, libkrun, fake" (static). */
const char *microvm_monitor_names(void);

/* Add one requirement to a report (missing: a printf format, NULL when present). Returns
 * -ENOMEM or -E2BIG. */
int microvm_preflight_add(struct microvm_preflight *p, const char *what, const char *missing_fmt,
                          ...) __attribute__((format(printf, 3, 4)));
/* NULL when nothing is missing, else one line naming every missing requirement
 * ("qemu: no qemu-system-x86_64 in PATH; /dev/kvm is PVM-backed ..."); malloc'd. */
char *microvm_preflight_describe(const struct microvm_monitor *m,
                                 const struct microvm_preflight *p);
void microvm_preflight_clear(struct microvm_preflight *p);

/* kvm.c: 1 when /dev/kvm can run a standard guest kernel here; 0 with *reason (malloc'd)
 * naming why not: missing, not openable, no KVM API, or PVM-backed (no vmx/svm in the host's
 * CPU flags, or the kernel says kvm-pvm), where standard guest kernels hang. Never starts a
 * VM to find out. */
int microvm_kvm_usable(char **reason);
/* The KVM probe every monitor calls: microvm_kvm_usable unless a test replaced it. */
extern int (*microvm_kvm_probe)(char **reason);

#endif
