/* The table of agent mechanisms, their names (pure), and the choice of the one that runs. */
#include <string.h>

#include "agent/mechanism.h"

static const struct {
  const char *name;
  enum agent_mechanism_kind kind;
} mechanism_names[] = {
    {"auto", AGENT_MECHANISM_AUTO},     {"ns", AGENT_MECHANISM_NS},
    {"bwrap", AGENT_MECHANISM_BWRAP},   {"landlock", AGENT_MECHANISM_LANDLOCK},
    {"gvisor", AGENT_MECHANISM_GVISOR}, {"seatbelt", AGENT_MECHANISM_SEATBELT},
    {"off", AGENT_MECHANISM_OFF},       {"0", AGENT_MECHANISM_OFF},
    {"false", AGENT_MECHANISM_OFF},     {"no", AGENT_MECHANISM_OFF},
};

int agent_mechanism_parse(const char *name, enum agent_mechanism_kind *out,
                          struct cordon_error **err) {
  for (size_t i = 0; i < sizeof(mechanism_names) / sizeof(mechanism_names[0]); i++)
    if (name && !strcmp(name, mechanism_names[i].name)) {
      *out = mechanism_names[i].kind;
      return 0;
    }
  return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                          "unknown mechanism '%s' (accepted: auto, ns, bwrap, landlock, gvisor, "
                          "seatbelt, off, 0, false, no)",
                          name ? name : "");
}

const char *agent_mechanism_kind_name(enum agent_mechanism_kind kind) {
  for (size_t i = 0; i < sizeof(mechanism_names) / sizeof(mechanism_names[0]); i++)
    if (mechanism_names[i].kind == kind)
      return mechanism_names[i].name;
  return "unknown";
}

const struct agent_mechanism *agent_mechanism_of(enum agent_mechanism_kind kind) {
  switch (kind) {
  case AGENT_MECHANISM_NS: return &agent_mechanism_ns;
  case AGENT_MECHANISM_BWRAP: return &agent_mechanism_bwrap;
  case AGENT_MECHANISM_LANDLOCK: return &agent_mechanism_landlock;
  case AGENT_MECHANISM_GVISOR: return &agent_mechanism_gvisor;
  default: return NULL;
  }
}

int agent_mechanism_choose(enum agent_mechanism_kind *kind, const struct agent_policy *policy,
                           const struct agent_mechanism **out, struct cordon_error **err) {
  if (*kind == AGENT_MECHANISM_SEATBELT)
    return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0,
                            "agent mechanism seatbelt runs only on macOS (--print seatbelt shows "
                            "its profile)");
  if (*kind == AGENT_MECHANISM_OFF)
    return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0, "agent mechanism off confines nothing");
  /* restricted needs a network namespace and the host-side proxy, which only ns sets up. */
  bool restricted = policy->net && !strcmp(policy->net, "restricted");
  if (restricted && *kind != AGENT_MECHANISM_AUTO && *kind != AGENT_MECHANISM_NS)
    return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0,
                            "net restricted is enforced only by agent mechanism ns (its proxy "
                            "outside the sandbox), not by %s",
                            agent_mechanism_kind_name(*kind));
  if (restricted)
    *kind = AGENT_MECHANISM_NS;
  if (*kind != AGENT_MECHANISM_AUTO) {
    *out = agent_mechanism_of(*kind);
    return (*out)->preflight(policy, err);
  }
  struct cordon_error *ns_err = NULL, *bwrap_err = NULL;
  int r = 0;
  if (agent_mechanism_ns.preflight(policy, &ns_err) == 0)
    *out = &agent_mechanism_ns, *kind = AGENT_MECHANISM_NS;
  else if (agent_mechanism_bwrap.preflight(policy, &bwrap_err) == 0)
    *out = &agent_mechanism_bwrap, *kind = AGENT_MECHANISM_BWRAP;
  else
    r = cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0, "no agent confinement available: %s; %s",
                         ns_err && ns_err->message ? ns_err->message : "ns unavailable",
                         bwrap_err && bwrap_err->message ? bwrap_err->message
                                                         : "bwrap unavailable");
  cordon_error_free(ns_err);
  cordon_error_free(bwrap_err);
  return r;
}
