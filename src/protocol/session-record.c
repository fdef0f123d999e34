/* What a session's state records beyond struct cordon_session (session-record.h): the policy
 * its manifest gave it, in one form, and the check of that form. Pure; the accessors are
 * session.c's, which owns the state. */
#include <string.h>

#include "base/strv-json.h"
#include "protocol/session-record.h"

static json_t *features_json(uint32_t features) {
  json_t *a = json_array();
  for (unsigned i = 0; a && i < CORDON_FEATURE_COUNT; i++)
    if ((features & (1u << i)) &&
        json_array_append_new(a, json_string(cordon_feature_name(1u << i))) < 0) {
      json_decref(a);
      return NULL;
    }
  return a;
}

json_t *session_policy_json(const struct cordon_manifest *m, uint32_t waived) {
  const struct cordon_policy *p = &m->policy;
  const struct cordon_limits *l = &p->limits;
  json_t *j =
      json_pack("{s:s, s:o, s:o, s:o, s:o, s:{s:I, s:I, s:f, s:I, s:I, s:I}, s:s, s:b, s:o}", "net",
                cordon_egress_name(p->egress), "read_only", strv_to_json(p->read_only), "hidden",
                strv_to_json(p->hidden), "allow_ro", strv_to_json(p->allow_ro), "devices",
                strv_to_json(m->devices), "limits", "memory_bytes", (json_int_t)l->memory_bytes,
                "pids", (json_int_t)l->pids, "cpus", l->cpus, "nofile", (json_int_t)l->nofile,
                "fsize_bytes", (json_int_t)l->fsize_bytes, "tmp_bytes", (json_int_t)l->tmp_bytes,
                "user", m->user_root ? "root" : "sandbox", "require_enforcement",
                p->require_enforcement, "waived", features_json(waived));
  /* No limit on a file's size, asked for: "unlimited" (0 is the backend's default). */
  if (j && l->fsize_bytes == CORDON_LIMIT_UNLIMITED &&
      json_object_set_new(json_object_get(j, "limits"), "fsize_bytes", json_string("unlimited")) <
          0)
    json_decref(j), j = NULL;
  if (j && m->egress_rules) {
    const struct cordon_egress_rules *r = m->egress_rules;
    json_t *egress =
        json_pack("{s:o, s:o, s:o}", "allow_domains", strv_to_json(r->allow_domains), "allow_cidrs",
                  strv_to_json(r->allow_cidrs), "resolve", strv_to_json(r->resolve));
    if (!egress || json_object_set_new(j, "egress", egress) < 0)
      json_decref(j), j = NULL;
  }
  if (j && ((m->image && json_object_set_new(j, "image", json_string(m->image)) < 0) ||
            (m->monitor && json_object_set_new(j, "monitor", json_string(m->monitor)) < 0)))
    json_decref(j), j = NULL;
  return j;
}

static bool strings_valid(const json_t *list) {
  size_t i;
  json_t *v;
  if (!json_is_array(list))
    return false;
  json_array_foreach(list, i, v) if (!json_is_string(v)) return false;
  return true;
}

static bool limits_valid(const json_t *limits) {
  static const char *const counts[] = {"memory_bytes", "pids", "nofile", "tmp_bytes"};
  if (!json_is_object(limits) || json_object_size(limits) != 6 ||
      !json_is_number(json_object_get(limits, "cpus")))
    return false;
  for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++)
    if (!json_is_integer(json_object_get(limits, counts[i])))
      return false;
  const json_t *fsize = json_object_get(limits, "fsize_bytes");
  return json_is_integer(fsize) ||
         (json_is_string(fsize) && !strcmp(json_string_value(fsize), "unlimited"));
}

bool session_policy_valid(const json_t *policy) {
  static const char *const lists[] = {"read_only", "hidden", "allow_ro", "devices", "waived"};
  if (!json_is_object(policy))
    return false;
  size_t known = 0;
  for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++, known++)
    if (!strings_valid(json_object_get(policy, lists[i])))
      return false;
  const json_t *net = json_object_get(policy, "net"), *user = json_object_get(policy, "user");
  const json_t *egress = json_object_get(policy, "egress");
  if (!json_is_string(net) || !json_is_string(user) ||
      (strcmp(json_string_value(user), "sandbox") && strcmp(json_string_value(user), "root")) ||
      !json_is_boolean(json_object_get(policy, "require_enforcement")) ||
      !limits_valid(json_object_get(policy, "limits")))
    return false;
  known += 4;
  if (egress) {
    if (!json_is_object(egress) || json_object_size(egress) != 3 ||
        !strings_valid(json_object_get(egress, "allow_domains")) ||
        !strings_valid(json_object_get(egress, "allow_cidrs")) ||
        !strings_valid(json_object_get(egress, "resolve")))
      return false;
    known++;
  }
  static const char *const optional[] = {"image", "monitor"};
  for (size_t i = 0; i < sizeof(optional) / sizeof(optional[0]); i++) {
    const json_t *v = json_object_get(policy, optional[i]);
    if (v && !json_is_string(v))
      return false;
    known += v != NULL;
  }
  return json_object_size(policy) == known;
}
