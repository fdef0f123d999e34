/* The audit events of the dispatch side of pools (enrolment, claims, warm slots) that
 * `pool verify` re-checks: one row per event kind, added by the code that appends it. The
 * core's own events (pool.registered, pool.updated, pool.retired, pool.placed,
 * pool.override_refused) are checked in verify.c.
 *
 * A claim is attributed to its worker offline: the claim receipt is signed by the key the entry
 * names, it names the enrolment receipt (signed by that same key, for the same pool body) and the
 * placement receipt whose effective manifest it ran; the effective manifest is read back from the
 * CAS and re-hashed, so one flipped byte in it breaks verification. */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "crypto/digest.h"
#include "pool/pool.h"
#include "pool/worker.h"

#define RECEIPT_MAX (1u << 20)

__attribute__((format(printf, 2, 3))) static int broken(char **reason, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (vasprintf(reason, fmt, ap) < 0)
    *reason = NULL;
  va_end(ap);
  return 1;
}

static const char *member(const json_t *o, const char *name) {
  const char *v = json_string_value(json_object_get(o, name));
  return v ? v : "";
}

/* Read the entry's details; 1 with reason when they lack a string member of names. */
static int details_of(const struct cordon_audit_entry *entry, const char *const *names,
                      json_t **out, char **reason) {
  *out = json_loads(entry->details_json, 0, NULL);
  for (size_t i = 0; names[i]; i++)
    if (!json_is_string(json_object_get(*out, names[i])))
      return broken(reason, "entry %llu (%s): details lack %s", (unsigned long long)entry->index,
                    entry->event, names[i]);
  return 0;
}

/* Load document digest from the CAS and check it as type, signed by kid. */
static int load_document(struct cordon_cas *cas, const struct cordon_audit_entry *entry,
                         const char *digest, const char *type, const char *kid, json_t **body,
                         char **reason, struct cordon_error **err) {
  _cleanup_free_ unsigned char *data = NULL;
  size_t length = 0;
  struct cordon_error *gerr = NULL;
  if (!cordon_digest_valid(digest) ||
      cordon_cas_get(cas, digest, RECEIPT_MAX, &data, &length, &gerr) < 0) {
    int r = broken(reason, "entry %llu (%s): %s %s cannot be read: %s",
                   (unsigned long long)entry->index, entry->event, type, digest,
                   gerr ? gerr->message : "not a digest");
    cordon_error_free(gerr);
    return r;
  }
  char signer[CORDON_KEY_ID_LEN + 1];
  _cleanup_free_ char *why = NULL;
  int r =
      pool_worker_document_check((const char *)data, length, type, kid, body, signer, &why, err);
  if (r == 1)
    return broken(reason, "entry %llu (%s): %s", (unsigned long long)entry->index, entry->event,
                  why);
  return r;
}

static int check_enrolled(struct cordon_cas *cas, const struct cordon_audit_entry *entry,
                          const char *expected_kid, struct pool_verify_report *report,
                          char **reason, struct cordon_error **err) {
  static const char *const names[] = {"kid", "pool", "pool_hash", "receipt", NULL};
  json_auto_t *d = NULL, *body = NULL;
  int r = details_of(entry, names, &d, reason);
  if (r == 0)
    r = load_document(cas, entry, member(d, "receipt"), POOL_ENROLMENT_TYPE, member(d, "kid"),
                      &body, reason, err);
  if (r != 0)
    return r;
  report->receipts++;
  if (strcmp(member(body, "pool"), member(d, "pool")) ||
      strcmp(member(body, "pool_hash"), member(d, "pool_hash")))
    return broken(reason, "entry %llu (worker.enrolled): the receipt names pool %s at %s",
                  (unsigned long long)entry->index, member(body, "pool"),
                  member(body, "pool_hash"));
  return 0;
}

static int check_claimed(struct cordon_cas *cas, const struct cordon_audit_entry *entry,
                         const char *expected_kid, struct pool_verify_report *report, char **reason,
                         struct cordon_error **err) {
  static const char *const names[] = {
      "dispatch_id", "effective_manifest_hash", "kid", "pool", "receipt", NULL};
  json_auto_t *d = NULL, *claim = NULL, *enrolment = NULL;
  const char *kid;
  int r = details_of(entry, names, &d, reason);
  if (r == 0)
    r = load_document(cas, entry, member(d, "receipt"), POOL_CLAIM_TYPE, (kid = member(d, "kid")),
                      &claim, reason, err);
  if (r != 0)
    return r;
  report->receipts++;
  unsigned long long at = (unsigned long long)entry->index;
  if (strcmp(member(claim, "dispatch_id"), member(d, "dispatch_id")) ||
      strcmp(member(claim, "effective_manifest_hash"), member(d, "effective_manifest_hash")) ||
      strcmp(member(claim, "pool"), member(d, "pool")))
    return broken(reason, "entry %llu (worker.claimed): the claim receipt disagrees with the entry",
                  at);
  /* Attribution: the enrolment is the same key's, for the same pool body. */
  if ((r = load_document(cas, entry, member(claim, "enrolment"), POOL_ENROLMENT_TYPE, kid,
                         &enrolment, reason, err)) != 0)
    return r;
  if (strcmp(member(enrolment, "pool"), member(claim, "pool")) ||
      strcmp(member(enrolment, "pool_hash"), member(claim, "pool_hash")))
    return broken(reason,
                  "entry %llu (worker.claimed): worker %s is enrolled in %s at %.12s, not at %.12s",
                  at, kid, member(enrolment, "pool"), member(enrolment, "pool_hash"),
                  member(claim, "pool_hash"));
  /* The placement it ran under, and the effective manifest, re-hashed. */
  _cleanup_free_ unsigned char *placement = NULL, *effective = NULL;
  size_t placement_length = 0, effective_length = 0;
  json_auto_t *placed = NULL;
  _cleanup_free_ char *why = NULL;
  struct cordon_error *gerr = NULL;
  const char *hash = member(claim, "effective_manifest_hash");
  char rehash[CRYPTO_SHA256_HEX_LEN + 1];
  if (cordon_cas_get(cas, member(claim, "placement"), RECEIPT_MAX, &placement, &placement_length,
                     &gerr) < 0 ||
      cordon_cas_get(cas, hash, POOL_MANIFEST_MAX, &effective, &effective_length, &gerr) < 0 ||
      crypto_sha256_hex(effective, effective_length, rehash, &gerr) < 0) {
    r = broken(reason, "entry %llu (worker.claimed): %s", at, gerr ? gerr->message : "?");
    cordon_error_free(gerr);
    return r;
  }
  if (strcmp(rehash, hash))
    return broken(reason, "entry %llu (worker.claimed): effective manifest %.12s hashes to %.12s",
                  at, hash, rehash);
  if ((r = pool_receipt_check((const char *)placement, placement_length, NULL, &placed, &why,
                              err)) != 0)
    return r < 0 ? r
                 : broken(reason, "entry %llu (worker.claimed): placement: %s", at,
                          why ? why : "does not verify");
  if (strcmp(member(placed, "effective_manifest_hash"), hash) ||
      strcmp(member(placed, "pool_hash"), member(claim, "pool_hash")))
    return broken(reason,
                  "entry %llu (worker.claimed): the placement receipt placed %.12s, not %.12s", at,
                  member(placed, "effective_manifest_hash"), hash);
  return 0;
}

static int check_result(struct cordon_cas *cas, const struct cordon_audit_entry *entry,
                        const char *expected_kid, struct pool_verify_report *report, char **reason,
                        struct cordon_error **err) {
  static const char *const names[] = {"dispatch_id",   "kid",           "pool",
                                      "stderr_sha256", "stdout_sha256", NULL};
  json_auto_t *d = NULL;
  int r = details_of(entry, names, &d, reason);
  if (r == 0 && !json_is_integer(json_object_get(d, "exit_code")))
    r = broken(reason, "entry %llu (worker.result): details lack exit_code",
               (unsigned long long)entry->index);
  return r;
}

static int check_quarantined(struct cordon_cas *cas, const struct cordon_audit_entry *entry,
                             const char *expected_kid, struct pool_verify_report *report,
                             char **reason, struct cordon_error **err) {
  static const char *const names[] = {"pool", "receipt", "session", NULL};
  json_auto_t *d = NULL, *body = NULL;
  int r = details_of(entry, names, &d, reason);
  if (r == 0)
    r = load_document(cas, entry, member(d, "receipt"), POOL_QUARANTINE_TYPE, expected_kid, &body,
                      reason, err);
  if (r != 0)
    return r;
  report->receipts++;
  if (strcmp(member(body, "session"), member(d, "session")) ||
      strcmp(member(body, "pool"), member(d, "pool")))
    return broken(reason, "entry %llu (pool.warm_quarantined): the receipt names another slot",
                  (unsigned long long)entry->index);
  return 0;
}

const struct pool_event_checker pool_dispatch_checkers[] = {
    {"worker.enrolled", check_enrolled},
    {"worker.claimed", check_claimed},
    {"worker.result", check_result},
    {"pool.warm_quarantined", check_quarantined},
    {NULL, NULL},
};
