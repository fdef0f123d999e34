/* What a session's state file records beyond struct cordon_session: the policy its manifest
 * gave it (what it may touch), and when it was made. */
#ifndef CORDON_PROTOCOL_SESSION_RECORD_H
#define CORDON_PROTOCOL_SESSION_RECORD_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include <cordon/backend.h>

/* What a manifest lets the session touch, as its state file records it (`session inspect`,
 * GET /v1/sessions/ID): {"net", "read_only", "hidden", "allow_ro", "devices" (lists, maybe
 * empty), "limits" {memory_bytes, pids, cpus, nofile, fsize_bytes, tmp_bytes: 0 is the
 * backend's default; fsize_bytes "unlimited" when no limit was asked for}, "user" ("sandbox" or
 * "root"), "require_enforcement", "waived" (the features the backend does not enforce that were
 * waived), and "egress" (--net restricted's rules), "image" and "monitor" when given}. Host paths
 * are kept: the state lives in .cordon/, which no sandbox sees. Pure; NULL on ENOMEM. */
json_t *session_policy_json(const struct cordon_manifest *m, uint32_t waived);

/* Whether a state file's "policy" has the form session_policy_json gives (every key known, of
 * its type; the lists of strings): what a reader of it may rely on. Pure. */
bool session_policy_valid(const json_t *policy);

/* The session's recorded policy, or NULL: made before it was kept (session.c). */
const json_t *session_recorded_policy(const struct cordon_session *s);
/* When the session was made, UTC ("2026-12-03T23:15:02.120Z"), or NULL (session.c). */
const char *session_created(const struct cordon_session *s);

#endif
