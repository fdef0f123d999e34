/* Credentials, capabilities and resource limits of a sandbox. The holder takes the sandbox
 * identity keeping its capabilities (it still has to mount), then drops every capability once
 * its setup is done, so the commands it forks start with none; rlimits are applied in each
 * command between fork and execve (async-signal-safe: raw system calls, no allocation). */
#ifndef CORDON_CONFINE_CAPS_H
#define CORDON_CONFINE_CAPS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct confine_identity {
  uid_t uid;
  gid_t gid;
  bool can_setgroups; /* false in a rootless namespace, where setgroups(2) is denied */
};

struct confine_rlimits {
  uint64_t nofile; /* 0: unchanged */
  uint64_t fsize;  /* 0: unchanged */
};

/* Empty every capability set (bounding and ambient included), lock the securebits so that no
 * execve can regain any, and set no_new_privs. Whatever this process forks afterwards starts
 * with nothing. Returns 0 or -errno. */
int confine_drop_capabilities(void);

/* Core dumps off; nofile and fsize as given (soft = hard). Returns 0 or -errno. */
int confine_apply_rlimits(const struct confine_rlimits *limits);

/* Keep capabilities across the holder's own switch to the sandbox uid (it still has to mount
 * and make cgroups): SECBIT_NO_SETUID_FIXUP, then setresgid/setgroups/setresuid. */
int confine_become_keeping_caps(const struct confine_identity *id);

#endif
