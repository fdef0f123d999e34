/* The gvisor backend's pure half: the OCI runtime spec (config.json) of a session's sandbox,
 * built from the session's policy, so tests can check it without runsc. */
#ifndef CORDON_BACKENDS_GVISOR_SPEC_H
#define CORDON_BACKENDS_GVISOR_SPEC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include <cordon/backend.h>

/* Where the control directory (status records) and the exec wrapper appear inside. */
#define GVISOR_CONTROL_TARGET "/.cordon-gvisor"
#define GVISOR_HELPER_TARGET "/.cordon-gvisor-exec"

struct gvisor_spec_params {
  const char *rootfs;        /* host directory of the (empty, read-only) root */
  const char *workspace;     /* host workspace, bound read-write at root */
  const char *root;          /* the workspace's path inside */
  const char *control;       /* host control directory, bound at GVISOR_CONTROL_TARGET */
  const char *helper;        /* host path of cordon-gvisor-exec */
  const char *empty_file;    /* bound over hidden files */
  char *const *system_binds; /* host system directories bound read-only at their own path */
  const struct cordon_policy *policy;
  /* Workspace-relative and canonical (resolved beneath the workspace): */
  char *const *pinned;      /* the protected paths' ancestors, bound onto themselves */
  char *const *read_only;   /* read-only paths */
  char *const *hidden_dirs; /* hidden paths split by kind */
  char *const *hidden_files;
  uid_t owner_uid; /* the workspace's owner on the host: the sandbox user (1000) inside */
  gid_t owner_gid;
  const char *passwd_file; /* host files bound over /etc/passwd and /etc/group */
  const char *group_file;
};

/* The host id that uid and gid 0 of the sandbox (the wrapper, and runsc's gofer) map to: the
 * overflow id, which owns nothing of the host's but the control directory. */
#define GVISOR_WRAPPER_HOST_ID 65534u

/* runsc's --network for an egress class: "host" for open, else "none" (gVisor's own network
 * stack with loopback only: nothing leaves the sandbox; lo stays up, which is why the backend
 * offers loopback but not none). */
const char *gvisor_network(enum cordon_egress egress);

/* The spec: pid 1 the wrapper's "pause" as uid 0 of the sandbox with no capabilities, a user
 * namespace mapping the sandbox user 1000 to the workspace's owner and 0 to the overflow id
 * (runsc's gofer joins it, so files are seen and made with those ids), no_new_privs. */
int gvisor_spec(const struct gvisor_spec_params *p, json_t **out, struct cordon_error **err);

#endif
