/* The gvisor mechanism's pure half: the OCI runtime spec (config.json) that carries the agent's
 * policy into `runsc`, kept apart from running it so tests can check it without gVisor. */
#ifndef CORDON_AGENT_GVISOR_H
#define CORDON_AGENT_GVISOR_H

#include <sys/types.h>

#include <jansson.h>

#include <cordon/error.h>

#include "agent/mechanism.h"

struct agent_gvisor_params {
  uid_t uid; /* the agent's user and group inside the sandbox: the caller's */
  gid_t gid;
  /* An empty, unreadable host file bound over each hidden file. */
  const char *empty_file;
  /* Host trees covered by an empty tmpfs before the grants and the project are bound back in
   * (NULL-terminated; existing directories: agent_gvisor_mask_candidates filtered). */
  char *const *masks;
};

/* The trees of the host the agent should not read although the root is visible read-only:
 * the homes, /run, /srv, /mnt, /media, /var/tmp, and the top-level directory of the project and of
 * each grant unless it is a system tree or /tmp (so sibling projects stay out of sight). Pure; *out
 * NULL-terminated, without duplicates. */
int agent_gvisor_mask_candidates(const struct agent_policy *policy, char ***out,
                                 struct cordon_error **err);

/* The spec: the host's root read-only, the project read-write at its own path, read-only
 * paths re-bound read-only, hidden directories as empty unreadable tmpfs, hidden files as
 * empty_file, agent_visible read-only, allow_ro / allow_rw, a size-capped tmpfs at /tmp
 * (TMPDIR, TMP, TEMP point at it), the policy's environment and cwd, no capabilities,
 * no_new_privs, and its own network namespace unless the network is open. Pure. */
int agent_gvisor_spec(const struct agent_launch *launch, const struct agent_gvisor_params *params,
                      json_t **out, struct cordon_error **err);

/* runsc's --network value for a policy's network: "host" when open, else "none" (gVisor's
 * own stack with loopback only). */
const char *agent_gvisor_network(const char *net);

#endif
