/* PLACEHOLDER, replaced by the engineer who builds the gvisor mechanism in this session. */
#include "agent/mechanism.h"

static int gvisor_unavailable(const struct agent_policy *policy, struct cordon_error **err) {
  (void)policy;
  return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0,
                          "agent mechanism gvisor is not built yet");
}

static int gvisor_run(const struct agent_launch *launch, int *exit_code,
                      struct cordon_error **err) {
  (void)exit_code;
  return gvisor_unavailable(launch->policy, err);
}

const struct agent_mechanism agent_mechanism_gvisor = {
    .name = "gvisor", .preflight = gvisor_unavailable, .run = gvisor_run};
