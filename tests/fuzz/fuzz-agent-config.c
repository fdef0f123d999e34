/* libFuzzer target for config.yaml's host isolation declaration (src/agent/tier.c through
 * yaml-read.c): the project's .cordon/config.yaml is in the workspace, so an agent of an earlier
 * run may have written it. Parsing never crashes; a file that declares gives one of the four
 * tiers; evidence comes only with a declaration. */
#include <stdint.h>
#include <stdlib.h>

#include "agent/tier.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  bool declared = true;
  enum cordon_isolation_tier tier = (enum cordon_isolation_tier) - 1;
  char *evidence = NULL;
  struct cordon_error *err = NULL;
  if (agent_tier_config_parse((const char *)data, size, "fuzz.yaml", &declared, &tier, &evidence,
                              &err) < 0) {
    if (!err || !err->message || evidence || declared)
      abort();
    cordon_error_free(err);
    return 0;
  }
  if (declared && (tier < CORDON_TIER_NONE || tier > CORDON_TIER_VM))
    abort();
  if (!declared && evidence)
    abort();
  free(evidence);
  return 0;
}
