/* PLACEHOLDER, replaced by the engineer who builds the ns mechanism in this session. */
#include "agent/mechanism.h"

static int ns_unavailable(const struct agent_policy *policy, struct cordon_error **err) {
  (void)policy;
  return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0, "agent mechanism ns is not built yet");
}

static int ns_run(const struct agent_launch *launch, int *exit_code, struct cordon_error **err) {
  (void)exit_code;
  return ns_unavailable(launch->policy, err);
}

const struct agent_mechanism agent_mechanism_ns = {
    .name = "ns", .preflight = ns_unavailable, .run = ns_run};
