/* The CPUs a sandbox's command sees (see cpus.h). */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "confine/cpus.h"

unsigned confine_cpus_visible(double cpus) {
  if (!(cpus >= 1) || cpus > CPU_SETSIZE || cpus != (double)(unsigned)cpus)
    return 0;
  return (unsigned)cpus;
}

int confine_affinity_pick(const cpu_set_t *allowed, unsigned n, cpu_set_t *out) {
  CPU_ZERO(out);
  unsigned taken = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE && taken < n; cpu++)
    if (CPU_ISSET(cpu, allowed)) {
      CPU_SET(cpu, out);
      taken++;
    }
  return taken == n ? 0 : -1;
}

int confine_check_cpu_count(double cpus, struct cordon_error **err) {
  cpu_set_t allowed;
  if (cpus <= 0)
    return 0;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot read the CPUs this host offers");
  int count = CPU_COUNT(&allowed);
  if (cpus > count)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                            "--cpus %g is more than the %d CPU%s this host offers", cpus, count,
                            count == 1 ? "" : "s");
  return 0;
}

int confine_limit_affinity(unsigned n, struct cordon_error **err) {
  cpu_set_t allowed, chosen;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot read the CPU affinity");
  if (confine_affinity_pick(&allowed, n, &chosen) < 0)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "--cpus %u is more than the CPUs allowed", n);
  if (sched_setaffinity(0, sizeof(chosen), &chosen) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot limit the CPU affinity");
  return 0;
}

int confine_cpuset_list(unsigned n, char *buf, size_t size, struct cordon_error **err) {
  cpu_set_t allowed, chosen;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot read the CPU affinity");
  if (confine_affinity_pick(&allowed, n, &chosen) < 0)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "--cpus %u is more than the CPUs allowed", n);
  size_t o = 0;
  buf[0] = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
    if (!CPU_ISSET(cpu, &chosen))
      continue;
    int w = snprintf(buf + o, size - o, "%s%d", o ? "," : "", cpu);
    if (w < 0 || (size_t)w >= size - o)
      return cordon_error_set(err, CORDON_ERR_USAGE, E2BIG, "--cpus %u: too many CPUs", n);
    o += (size_t)w;
  }
  return 0;
}
