/* One audit entry as a line: building it (canonical JSON plus its HMAC) and checking it. Pure:
 * no files, no locks; log.c does the I/O. */
#ifndef CORDON_AUDIT_ENTRY_H
#define CORDON_AUDIT_ENTRY_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include <cordon/audit.h>

#include "crypto/digest.h"
#include "crypto/jcs.h"

#define AUDIT_GENESIS "0000000000000000000000000000000000000000000000000000000000000000"
#define AUDIT_REASON_MAX 256

/* Validate the event's fields and parse its details (a JSON object; NULL means {}). */
int audit_event_check(const struct cordon_audit_event *event, json_t **details,
                      struct cordon_error **err);

/* Append the entry's line (canonical JSON and '\n') to out and put its HMAC in hmac (65 bytes).
 * details is the parsed object from audit_event_check. */
int audit_entry_build(struct crypto_hmac *key, const struct cordon_audit_event *event,
                      const json_t *details, const char *prev, struct jcs_buf *out, char *hmac,
                      struct cordon_error **err);

/* Parse a line (without its newline) into an entry object of the right shape. On failure
 * returns NULL and explains in reason. */
json_t *audit_line_parse(const char *line, size_t length, char reason[AUDIT_REASON_MAX]);

/* Check a line (without its newline): exactly the canonical JSON (RFC 8785) of one entry of
 * the right shape, whose HMAC matches (key NULL skips the HMAC). prev and hmac (65 bytes each)
 * receive the line's values when it could be read. */
enum cordon_audit_problem audit_line_check(struct crypto_hmac *key, const char *line, size_t length,
                                           char *prev, char *hmac, char reason[AUDIT_REASON_MAX]);

/* The first entry's prev against the chain's genesis (pure). genesis is the project id the log
 * is bound to, AUDIT_GENESIS for a log bound to none, "" for a project that has no id yet.
 * CORDON_AUDIT_OK when they match; else BROKEN_LINK for an unbound log (its first entry was
 * removed), UNBOUND when a project's chain begins from 64 '0', FOREIGN_PROJECT otherwise; the
 * reason names both ids. */
enum cordon_audit_problem audit_genesis_check(const char *first_prev, const char *genesis,
                                              char *reason, size_t reason_size);

#endif
