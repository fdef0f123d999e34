/* The table of agent mechanisms and their names (pure). */
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
