/* The agent's confinement policy (`cordon agent`): one pure value, built and validated once
 * (policy.c: flags, the policy file, the environment allowlist), then lowered by each mechanism
 * (mechanism.h) into its own terms: ns mounts, a bubblewrap argv, Landlock rules, an OCI spec,
 * a seatbelt profile. Every path is resolved before a mechanism sees it, so no mechanism looks a
 * path up twice or decides policy on its own. */
#ifndef CORDON_AGENT_POLICY_H
#define CORDON_AGENT_POLICY_H

#include <stdbool.h>
#include <stdint.h>

#include <cordon/error.h>

/* Where the agent sees cordon's own state: `.cordon/` is always hidden, except this directory
 * (when it exists), which the agent sees read-only: documents the orchestrator leaves for it. */
#define AGENT_STATE_DIR ".cordon"
#define AGENT_VISIBLE_DIR ".cordon/agent-visible"

struct agent_policy {
  char *project; /* absolute, canonical host path of the project root */
  char *cwd;     /* absolute host path the agent starts in: the project or beneath it */
  /* Project-relative, normalised, NULL-terminated; overlaps checked (confine/policy.c rules). */
  char **read_only;
  char **hidden_dirs;  /* existing directories; always holds AGENT_STATE_DIR */
  char **hidden_files; /* existing non-directories */
  char *agent_visible; /* AGENT_VISIBLE_DIR when it exists (read-only for the agent), else NULL */
  /* Absolute canonical host paths outside the project, NULL-terminated. */
  char **allow_ro;
  char **allow_rw;
  char **env;         /* the agent's whole environment, NAME=VALUE, already filtered */
  char *net;          /* "none", "loopback" or "open" */
  uint64_t tmp_bytes; /* the private /tmp's size */
};

void agent_policy_free(struct agent_policy *policy);

#endif
