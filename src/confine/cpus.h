/* The CPUs a sandbox's command sees: `--cpus N` with a whole N also narrows the command's CPU
 * affinity to N of the CPUs it may run on, so that nproc and os.sched_getaffinity say N (the
 * CFS quota, cgroup.c, is what limits it; affinity is what tools size their thread pools by).
 * The choice of CPUs is pure; reading and setting the affinity are the two system calls. */
#ifndef CORDON_CONFINE_CPUS_H
#define CORDON_CONFINE_CPUS_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>

#include <cordon/error.h>

/* Pure: N when cpus is a whole number of CPUs (1, 2.0), else 0 (a fraction keeps the quota only).
 */
unsigned confine_cpus_visible(double cpus);

/* Pure: the first n CPUs of allowed into out; -1 when allowed holds fewer than n. */
int confine_affinity_pick(const cpu_set_t *allowed, unsigned n, cpu_set_t *out);

/* Refuse a CPU limit above the CPUs this process may run on, naming both. */
int confine_check_cpu_count(double cpus, struct cordon_error **err);

/* The first n CPUs this process may run on as a cpuset list ("0,1"), for an engine's
 * CpusetCpus. */
int confine_cpuset_list(unsigned n, char *buf, size_t size, struct cordon_error **err);

/* Narrow the calling thread's affinity (inherited by its children) to n of its allowed CPUs.
 * glibc's wrappers are the bare system calls, safe in pid 1 of a one-shot sandbox, which shares
 * its caller's memory (holder.c). */
int confine_limit_affinity(unsigned n, struct cordon_error **err);

#endif
