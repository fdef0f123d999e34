/* The mechanisms that confine an agent, behind one interface: each takes the validated policy
 * (policy.h) and lowers it into its own terms. A mechanism never runs the agent unconfined and
 * never weakens what it was asked for: what it cannot enforce it either refuses or lists in
 * unenforced(), which the caller prints and records in the audit chain. */
#ifndef CORDON_AGENT_MECHANISM_H
#define CORDON_AGENT_MECHANISM_H

#include <stdbool.h>

#include <cordon/error.h>

#include "agent/policy.h"

enum agent_mechanism_kind {
  AGENT_MECHANISM_AUTO = 0,
  AGENT_MECHANISM_NS,
  AGENT_MECHANISM_BWRAP,
  AGENT_MECHANISM_LANDLOCK,
  AGENT_MECHANISM_GVISOR,
  AGENT_MECHANISM_SEATBELT, /* macOS only: here its profile can be printed, never run */
  AGENT_MECHANISM_OFF,
};

struct agent_launch {
  const struct agent_policy *policy;
  const char *const *argv; /* never a shell */
  bool tty;                /* the caller's stdin and stdout are a terminal: run in a pty */
};

struct agent_mechanism {
  const char *name;
  /* 0 when the mechanism can run here; else CORDON_ERR_UNAVAILABLE naming what is missing.
   * No side effects. */
  int (*preflight)(const struct agent_policy *policy, struct cordon_error **err);
  /* NULL, or the policy lines this mechanism does not enforce (NULL-terminated, one line each,
   * e.g. "hidden path .env is NOT enforced under landlock"); *out freed with strv_free. */
  int (*unenforced)(const struct agent_policy *policy, char ***out, struct cordon_error **err);
  /* Run the agent confined and wait for it; *exit_code is its status (128+signal when killed). */
  int (*run)(const struct agent_launch *launch, int *exit_code, struct cordon_error **err);
};

extern const struct agent_mechanism agent_mechanism_ns;
extern const struct agent_mechanism agent_mechanism_bwrap;
extern const struct agent_mechanism agent_mechanism_landlock;
extern const struct agent_mechanism agent_mechanism_gvisor;

/* "auto", "ns", "bwrap", "landlock", "gvisor", "seatbelt", "off" (also "0", "false", "no");
 * anything else is CORDON_ERR_USAGE naming the accepted values (pure). */
int agent_mechanism_parse(const char *name, enum agent_mechanism_kind *out,
                          struct cordon_error **err);
const char *agent_mechanism_kind_name(enum agent_mechanism_kind kind);
/* The mechanism of a kind; NULL for AUTO, SEATBELT and OFF. */
const struct agent_mechanism *agent_mechanism_of(enum agent_mechanism_kind kind);

/* The mechanism that runs a policy: the one named by *kind (its preflight must pass), or under
 * AUTO ns, else bwrap (*kind set to the one chosen). OFF and SEATBELT confine nothing here:
 * CORDON_ERR_UNAVAILABLE, as is a failed preflight (naming what is missing). */
int agent_mechanism_choose(enum agent_mechanism_kind *kind, const struct agent_policy *policy,
                           const struct agent_mechanism **out, struct cordon_error **err);

/* The printed forms of a policy (pure): the bubblewrap argv that enforces it (bwrap.c) and the
 * macOS seatbelt profile (seatbelt.c). */
int agent_bwrap_argv(const struct agent_launch *launch, char ***out, struct cordon_error **err);
int agent_seatbelt_profile(const struct agent_policy *policy, char **out,
                           struct cordon_error **err);

#endif
