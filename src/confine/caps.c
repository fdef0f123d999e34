/* Credentials, capabilities and rlimits (see caps.h). Raw system calls only: rlimits are
 * applied between fork and execve. */
#include <errno.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/syscalls.h"
#include "confine/caps.h"

#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif

/* Raw system calls, not glibc's wrappers: in a multi-threaded program those broadcast the change
 * to every thread, and a process cloned with CLONE_VM (ns one-shot) must change only itself. */
static int set_ids(const struct confine_identity *id) {
  if (id->can_setgroups && sys_setgroups(0, NULL) < 0)
    return -errno;
  if (sys_setresgid(id->gid, id->gid, id->gid) < 0)
    return -errno;
  if (sys_setresuid(id->uid, id->uid, id->uid) < 0)
    return -errno;
  return 0;
}

int confine_become_keeping_caps(const struct confine_identity *id) {
  if (prctl(PR_SET_SECUREBITS, SECBIT_NO_SETUID_FIXUP, 0, 0, 0) < 0)
    return -errno;
  return set_ids(id);
}

int confine_drop_capabilities(void) {
  /* The bounding set needs CAP_SETPCAP, so it goes while we still have it. */
  for (unsigned long cap = 0; cap <= 63; cap++)
    if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0) {
      if (errno == EINVAL)
        break; /* past the last capability this kernel knows */
      return -errno;
    }
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
    return -errno;
  /* Locked securebits: no root-uid magic, no keep-caps, no ambient raise, ever again. */
  unsigned long bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
                       SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
                       SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
  if (prctl(PR_SET_SECUREBITS, bits, 0, 0, 0) < 0)
    return -errno;
  struct __user_cap_header_struct header = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
  struct __user_cap_data_struct data[2] = {{0, 0, 0}, {0, 0, 0}};
  if (sys_capset(&header, data) < 0)
    return -errno;
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
    return -errno;
  return 0;
}

/* Set soft = hard = value, but never above the current hard limit: raising it needs a
 * capability in the initial namespace, and a limit above it is no limit anyway. */
static int lower_limit(int resource, uint64_t value) {
  struct rlimit cur;
  if (getrlimit(resource, &cur) < 0)
    return -1;
  rlim_t v = (rlim_t)value;
  if (cur.rlim_max != RLIM_INFINITY && v > cur.rlim_max)
    v = cur.rlim_max;
  struct rlimit l = {v, v};
  return setrlimit(resource, &l);
}

int confine_apply_rlimits(const struct confine_rlimits *limits) {
  struct rlimit zero = {0, 0};
  if (setrlimit(RLIMIT_CORE, &zero) < 0)
    return -errno;
  if (limits->nofile && lower_limit(RLIMIT_NOFILE, limits->nofile) < 0)
    return -errno;
  if (limits->fsize && lower_limit(RLIMIT_FSIZE, limits->fsize) < 0)
    return -errno;
  return 0;
}
