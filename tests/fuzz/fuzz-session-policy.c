/* libFuzzer target for a session's recorded policy (src/protocol/session-record.c): the "policy"
 * of a state file in .cordon/sessions/ID/, which whoever can write the project can edit, and
 * which `session inspect` and GET /v1/sessions/ID read. What session_policy_valid accepts is
 * what a reader relies on: every key it reads present and of its type, the lists of strings,
 * fsize_bytes an integer or "unlimited". */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/session-record.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void strings_or_abort(const json_t *list) {
  size_t i;
  json_t *v;
  if (!json_is_array(list))
    abort();
  json_array_foreach(list, i, v) if (!json_string_value(v)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  json_t *policy = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
  if (!policy || !session_policy_valid(policy)) {
    json_decref(policy);
    return 0;
  }
  static const char *const lists[] = {"read_only", "hidden", "allow_ro", "devices", "waived"};
  for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++)
    strings_or_abort(json_object_get(policy, lists[i]));
  const char *user = json_string_value(json_object_get(policy, "user"));
  if (!json_string_value(json_object_get(policy, "net")) || !user ||
      (strcmp(user, "sandbox") && strcmp(user, "root")))
    abort();
  const json_t *limits = json_object_get(policy, "limits");
  const json_t *fsize = json_object_get(limits, "fsize_bytes");
  if (!json_is_integer(json_object_get(limits, "pids")) ||
      !json_is_number(json_object_get(limits, "cpus")) ||
      !(json_is_integer(fsize) || json_is_string(fsize)))
    abort();
  const json_t *egress = json_object_get(policy, "egress");
  if (egress) {
    strings_or_abort(json_object_get(egress, "allow_domains"));
    strings_or_abort(json_object_get(egress, "allow_cidrs"));
    strings_or_abort(json_object_get(egress, "resolve"));
  }
  json_decref(policy);
  return 0;
}
