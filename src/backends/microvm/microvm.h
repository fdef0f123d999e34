/* What the microvm backend's own files share, above and beside the monitor shim (monitor.h):
 * choosing a monitor by name (never a silent substitute), the KVM probe every monitor asks
 * (replaceable by tests, so a host where KVM works can still test the refusal), and the small
 * host lookups preflights make without side effects (a program in PATH, the guest directory). */
#ifndef CORDON_BACKENDS_MICROVM_MICROVM_H
#define CORDON_BACKENDS_MICROVM_MICROVM_H

#include <stdbool.h>
#include <sys/types.h>

#include <cordon/backend.h>
#include <cordon/error.h>

#include "backends/microvm/monitor.h"

/* The monitor a session uses: `asked` (the manifest's), else $CORDON_MICROVM_MONITOR, else
 * qemu. An unknown name is a usage error that lists the monitors; nothing else is tried. */
int microvm_monitor_choose(const char *asked, const struct microvm_monitor **out,
                           struct cordon_error **err);

/* The guest directory of cfg: cfg->guest_dir, else $CORDON_GUEST_DIR, else the default. */
const char *microvm_guest_dir(const struct microvm_config *cfg);

/* The path of `program` in $PATH (malloc'd), or NULL: looked up, never run. */
char *microvm_find_in_path(const char *program);

/* Whether `path` is an existing regular file (is_dir false) or directory (is_dir true). */
bool microvm_path_is(const char *path, bool is_dir);

/* Add the KVM requirement to a report: the probe's reason when KVM cannot be used here. */
int microvm_preflight_kvm(struct microvm_preflight *p);

/* The start time of process pid (/proc/PID/stat field 22), 0 when it is gone: with the pid,
 * what tells a VMM from an unrelated process that reused its pid. */
unsigned long long microvm_process_start(pid_t pid);
/* firecracker and libkrun: attach from {"pid","start"}, and stop the VMM when it is still ours. */
int microvm_vmm_attach(const char *monitor, const char *state, struct microvm_vm *vm,
                       struct cordon_error **err);
void microvm_vmm_stop(struct microvm_vm *vm);

/* vmm-root.c: give the VMM process a root of its own (it must be root in a new mount namespace,
 * pid 1 of a new pid namespace): the system paths read-only, basic /dev (and /dev/kvm when kvm),
 * its own /proc, and the detached workspace tree at MICROVM_VMM_WORKSPACE; nothing else of the
 * host's files. On return its root and cwd are the new "/". */
#define MICROVM_VMM_WORKSPACE "/workspace"
int microvm_vmm_root_enter(int workspace_tree, bool kvm, struct cordon_error **err);

#endif
