/* The project's list of revoked API tokens (`cordon token revoke JTI`, read by `cordon serve`):
 * .cordon/revoked-tokens.json, {"revoked": [JTI, ...]} sorted, replaced atomically under a
 * lock so that two revocations at once both land. */
#ifndef CORDON_PROTOCOL_TOKENS_H
#define CORDON_PROTOCOL_TOKENS_H

#include <stdbool.h>

#include <cordon/error.h>

#define TOKENS_REVOKED_FILE "revoked-tokens.json"
/* A jti: 1..128 bytes of [A-Za-z0-9_-]. */
bool tokens_jti_valid(const char *jti);
/* Add jti to the list in state_dir (the project's .cordon/); *added false when it was there. */
int tokens_revoke(const char *state_dir, const char *jti, bool *added, struct cordon_error **err);
/* Whether jti is on the list; a missing list revokes nothing, a malformed one is an error
 * (the server then refuses every token: fail closed). */
int tokens_is_revoked(const char *state_dir, const char *jti, bool *revoked,
                      struct cordon_error **err);

#endif
