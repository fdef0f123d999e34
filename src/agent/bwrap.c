/* PLACEHOLDER, replaced by the engineer who builds the bwrap mechanism in this session. */
#include "agent/mechanism.h"

static int bwrap_unavailable(const struct agent_policy *policy, struct cordon_error **err) {
  (void)policy;
  return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0, "agent mechanism bwrap is not built yet");
}

static int bwrap_run(const struct agent_launch *launch, int *exit_code, struct cordon_error **err) {
  (void)exit_code;
  return bwrap_unavailable(launch->policy, err);
}

const struct agent_mechanism agent_mechanism_bwrap = {
    .name = "bwrap", .preflight = bwrap_unavailable, .run = bwrap_run};

int agent_bwrap_argv(const struct agent_launch *launch, char ***out, struct cordon_error **err) {
  (void)out;
  return bwrap_unavailable(launch->policy, err);
}
