/* A session as JSON, the one shape `cordon session create|list --json` and the HTTP API
 * (`cordon serve`: create, list, show) give, so the two surfaces cannot disagree. Pure. */
#ifndef CORDON_PROTOCOL_SESSION_JSON_H
#define CORDON_PROTOCOL_SESSION_JSON_H

#include <stdbool.h>

#include <jansson.h>

#include <cordon/backend.h>

/* {"id", "backend", "workspace", "root", "shut_down", "created"}. created is null for a session
 * made before it was recorded. workspace is the host path, or null when
 * there is none a reader could use: an ns session on an overlay has its merged view only in the
 * sandbox's mount namespace, through /proc/PID/root, a name that means nothing once that
 * process is gone (docs/formats.md: no /proc paths in --json). NULL on ENOMEM. */
json_t *session_json(const struct cordon_session *s);

/* A listed session whose state cannot be read: {"id", "error"}. NULL on ENOMEM. */
json_t *session_json_unreadable(const char *id, const struct cordon_error *why);

/* What a manifest lets the session touch, as its state file records it (`session inspect`,
 * GET /v1/sessions/ID): {"net", "read_only", "hidden", "allow_ro", "devices" (lists, maybe
 * empty), "limits" {memory_bytes, pids, cpus, nofile, fsize_bytes, tmp_bytes: 0 is the
 * backend's default; fsize_bytes "unlimited" when no limit was asked for}, "user" ("sandbox" or
 * "root"), "require_enforcement", "waived" (the features the backend does not enforce that were
 * waived), and "egress" (--net restricted's rules), "image" and "monitor" when given}. Host paths
 * are kept: the state lives in .cordon/, which no sandbox sees. NULL on ENOMEM. */
json_t *session_policy_json(const struct cordon_manifest *m, uint32_t waived);

/* Whether a state file's "policy" has the form session_policy_json gives (every key known, of
 * its type; the lists of strings): what a reader of it may rely on. Pure. */
bool session_policy_valid(const json_t *policy);

/* session_json and "policy", the record above, or null for a session made before it was kept.
 * NULL on ENOMEM. */
json_t *session_json_detail(const struct cordon_session *s);

/* The session's recorded policy, or NULL (session.c). */
const json_t *session_recorded_policy(const struct cordon_session *s);
/* When the session was made, UTC ("2026-12-03T23:15:02.120Z"), or NULL (session.c). */
const char *session_created(const struct cordon_session *s);

#endif
