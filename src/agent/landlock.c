/* PLACEHOLDER, replaced by the engineer who builds the landlock mechanism in this session. */
#include "agent/mechanism.h"

static int landlock_unavailable(const struct agent_policy *policy, struct cordon_error **err) {
  (void)policy;
  return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0,
                          "agent mechanism landlock is not built yet");
}

static int landlock_run(const struct agent_launch *launch, int *exit_code,
                        struct cordon_error **err) {
  (void)exit_code;
  return landlock_unavailable(launch->policy, err);
}

const struct agent_mechanism agent_mechanism_landlock = {
    .name = "landlock", .preflight = landlock_unavailable, .run = landlock_run};
