/* libFuzzer target for `cordon agent --policy FILE` (src/agent/policy.c through yaml-read.c): a
 * policy file is YAML the operator hands in, often one a project ships. Parsing never crashes;
 * a refusal is a usage error with a message; what parses holds lists of non-empty strings and,
 * when given, a non-empty net. */
#include <stdint.h>
#include <stdlib.h>

#include "agent/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_list(char **list) {
  for (char **e = list; e && *e; e++)
    if (!**e)
      abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct agent_policy_file file;
  struct cordon_error *err = NULL;
  if (agent_policy_file_parse((const char *)data, size, "fuzz.yaml", &file, &err) < 0) {
    if (!err || !err->message || (err->kind != CORDON_ERR_USAGE && err->kind != CORDON_ERR_SYSTEM))
      abort();
    cordon_error_free(err);
    return 0;
  }
  check_list(file.read_only);
  check_list(file.hidden);
  check_list(file.allow_ro);
  check_list(file.allow_rw);
  check_list(file.env_allow);
  if (file.net && !file.net[0])
    abort();
  agent_policy_file_clear(&file);
  return 0;
}
