/* A session as JSON (session-json.h): shared by the CLI's --json output and the HTTP API. */
#include <string.h>

#include "protocol/session-json.h"

json_t *session_json(const struct cordon_session *s) {
  const char *workspace = s->workspace;
  if (workspace && !strncmp(workspace, "/proc/", strlen("/proc/")))
    workspace = NULL;
  return json_pack("{s:s, s:s, s:s?, s:s?, s:b}", "id", s->id, "backend", s->backend->name,
                   "workspace", workspace, "root", s->root, "shut_down", s->shut_down);
}

json_t *session_json_unreadable(const char *id, const struct cordon_error *why) {
  return json_pack("{s:s, s:s}", "id", id, "error",
                   why && why->message ? why->message : "unreadable");
}

static json_t *strings_json(const char *const *list) {
  json_t *a = json_array();
  for (size_t i = 0; a && list && list[i]; i++)
    if (json_array_append_new(a, json_string(list[i])) < 0) {
      json_decref(a);
      return NULL;
    }
  return a;
}

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
                cordon_egress_name(p->egress), "read_only", strings_json(p->read_only), "hidden",
                strings_json(p->hidden), "allow_ro", strings_json(p->allow_ro), "devices",
                strings_json(m->devices), "limits", "memory_bytes", (json_int_t)l->memory_bytes,
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
        json_pack("{s:o, s:o, s:o}", "allow_domains", strings_json(r->allow_domains), "allow_cidrs",
                  strings_json(r->allow_cidrs), "resolve", strings_json(r->resolve));
    if (!egress || json_object_set_new(j, "egress", egress) < 0)
      json_decref(j), j = NULL;
  }
  if (j && ((m->image && json_object_set_new(j, "image", json_string(m->image)) < 0) ||
            (m->monitor && json_object_set_new(j, "monitor", json_string(m->monitor)) < 0)))
    json_decref(j), j = NULL;
  return j;
}

json_t *session_json_detail(const struct cordon_session *s) {
  json_t *j = session_json(s);
  const json_t *policy = session_recorded_policy(s);
  if (j && json_object_set_new(j, "policy", policy ? json_deep_copy(policy) : json_null()) < 0)
    json_decref(j), j = NULL;
  return j;
}
