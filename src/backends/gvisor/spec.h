/* The gvisor backend's pure half: the OCI runtime spec (config.json) of a session's sandbox,
 * built from the session's policy, so tests can check it without runsc. */
#ifndef CORDON_BACKENDS_GVISOR_SPEC_H
#define CORDON_BACKENDS_GVISOR_SPEC_H

#include <stdbool.h>
#include <stdint.h>

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
  char *const *hidden_dirs; /* workspace-relative hidden paths split by kind */
  char *const *hidden_files;
};

/* runsc's --network for an egress class: "host" for open, else "none" (gVisor's own network
 * stack with loopback only: nothing leaves the sandbox). */
const char *gvisor_network(enum cordon_egress egress);

/* The spec: pid 1 the wrapper's "pause", the sandbox user, no capabilities, no_new_privs. */
int gvisor_spec(const struct gvisor_spec_params *p, json_t **out, struct cordon_error **err);

#endif
