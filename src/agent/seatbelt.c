/* PLACEHOLDER, replaced by the engineer who builds the seatbelt profile in this session. */
#include "agent/mechanism.h"

int agent_seatbelt_profile(const struct agent_policy *policy, char **out,
                           struct cordon_error **err) {
  (void)policy;
  (void)out;
  return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0, "the seatbelt profile is not built yet");
}
