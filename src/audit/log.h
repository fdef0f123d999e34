/* Opening a log whose genesis is learnt when first needed (log.c): the way a layer above binds
 * a log to something the audit module does not know, such as a project. */
#ifndef CORDON_AUDIT_LOG_H
#define CORDON_AUDIT_LOG_H

#include <stdbool.h>

#include <cordon/audit.h>

/* Reads the genesis named by source into out (CORDON_AUDIT_HMAC_HEX_LEN + 1 bytes); create:
 * make it when there is none. Returns 1 when out holds it, 0 when there is none yet (only when
 * create is false), -1 on error. */
typedef int (*audit_genesis_fn)(const char *source, bool create, char *out,
                                struct cordon_error **err);

/* cordon_audit_open, with the chain bound to the genesis genesis_fn(genesis_source, ...) gives
 * the first time an append (create true), a verification or a repair needs it. When
 * opts->project_id is set, that binds the chain instead and genesis_fn is never called. */
int audit_open_bound(const char *dir, const struct cordon_audit_options *opts,
                     audit_genesis_fn genesis_fn, const char *genesis_source,
                     struct cordon_audit_log **out, struct cordon_error **err);

#endif
