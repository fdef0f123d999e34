/* A session as JSON, the one shape `cordon session create|list|inspect --json` and the HTTP
 * API (`cordon serve`: create, list, show) give, so the two surfaces cannot disagree. */
#ifndef CORDON_PROTOCOL_SESSION_JSON_H
#define CORDON_PROTOCOL_SESSION_JSON_H

#include <jansson.h>

#include <cordon/backend.h>

/* {"id", "backend", "workspace", "root", "shut_down", "created"}. created is null for a session
 * made before it was recorded. workspace is the host path, or null when there is none a reader
 * could use: an ns session on an overlay has its merged view only in the sandbox's mount
 * namespace, through /proc/PID/root, a name that means nothing once that process is gone
 * (docs/formats.md: no /proc paths in --json). NULL on ENOMEM. */
json_t *session_json(const struct cordon_session *s);

/* A listed session whose state cannot be read: {"id", "error"}. NULL on ENOMEM. */
json_t *session_json_unreadable(const char *id, const struct cordon_error *why);

/* session_json and "policy" (session-record.h), or null for a session made before it was
 * kept. NULL on ENOMEM. */
json_t *session_json_detail(const struct cordon_session *s);

#endif
