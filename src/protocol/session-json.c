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
