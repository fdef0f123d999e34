/* A session as JSON (session-json.h): shared by the CLI's --json output and the HTTP API. */
#include <string.h>

#include "protocol/session-json.h"
#include "protocol/session-record.h"

json_t *session_json(const struct cordon_session *s) {
  const char *workspace = s->workspace;
  if (workspace && !strncmp(workspace, "/proc/", strlen("/proc/")))
    workspace = NULL;
  return json_pack("{s:s, s:s, s:s?, s:s?, s:b, s:s?}", "id", s->id, "backend", s->backend->name,
                   "workspace", workspace, "root", s->root, "shut_down", s->shut_down, "created",
                   session_created(s));
}

json_t *session_json_unreadable(const char *id, const struct cordon_error *why) {
  return json_pack("{s:s, s:s}", "id", id, "error",
                   why && why->message ? why->message : "unreadable");
}

json_t *session_json_detail(const struct cordon_session *s) {
  json_t *j = session_json(s);
  const json_t *policy = session_recorded_policy(s);
  if (j && json_object_set_new(j, "policy", policy ? json_deep_copy(policy) : json_null()) < 0)
    json_decref(j), j = NULL;
  return j;
}
