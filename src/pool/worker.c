/* Enrolment, claim and quarantine documents (worker.h): sealing and checking, pure; storing
 * them and chaining their events, thin. */
#include "pool/worker.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cordon/session.h>
#include <cordon/signed.h>

#include "base/cleanup.h"
#include "crypto/jcs.h"
#include "pool/internal.h"
#include "pool/pool.h"

/* Every type's body members besides signer, sorted. */
static const char *const enrolment_members[] = {"pool", "pool_hash", "type", "version", NULL};
static const char *const claim_members[] = {"dispatch_id", "effective_manifest_hash",
                                            "enrolment",   "placement",
                                            "pool",        "pool_hash",
                                            "type",        "version",
                                            NULL};
static const char *const quarantine_members[] = {
    "effective_manifest_hash",      "overrides_hash", "pool", "pool_hash", "session",
    "slot_effective_manifest_hash", "slot_pool_hash", "type", "version",   NULL};

static const char *const *members_of(const char *type) {
  if (!strcmp(type, POOL_ENROLMENT_TYPE))
    return enrolment_members;
  if (!strcmp(type, POOL_CLAIM_TYPE))
    return claim_members;
  if (!strcmp(type, POOL_QUARANTINE_TYPE))
    return quarantine_members;
  return NULL;
}

/* Sign a body given as alternating member names and string values (type and version added). */
static int seal(const struct cordon_signing_key *key, const char *type, const char *const *pairs,
                char **document, size_t *length, struct cordon_error **err) {
  json_auto_t *body = json_pack("{s:s,s:i}", "type", type, "version", 1);
  if (!body)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "%s", type);
  for (size_t i = 0; pairs[i]; i += 2) {
    if (!pairs[i + 1] || !*pairs[i + 1])
      return cordon_error_set(err, CORDON_ERR_INVALID, 0, "%s: %s is empty", type, pairs[i]);
    if (json_object_set_new(body, pairs[i], json_string(pairs[i + 1])) < 0)
      return cordon_error_set(err, CORDON_ERR_INVALID, 0, "%s: %s is not UTF-8", type, pairs[i]);
  }
  _cleanup_free_ char *text = NULL;
  size_t n = 0;
  if (jcs_dump(body, &text, &n, err) < 0)
    return -1;
  return cordon_document_sign(key, text, n, document, length, err);
}

int pool_seal_enrolment(const struct cordon_signing_key *key, const char *pool,
                        const char *pool_hash, char **document, size_t *length,
                        struct cordon_error **err) {
  const char *pairs[] = {"pool", pool, "pool_hash", pool_hash, NULL};
  return seal(key, POOL_ENROLMENT_TYPE, pairs, document, length, err);
}

int pool_seal_claim(const struct cordon_signing_key *key, const struct pool_claim_fields *f,
                    char **document, size_t *length, struct cordon_error **err) {
  const char *pairs[] = {"dispatch_id",
                         f->dispatch_id,
                         "effective_manifest_hash",
                         f->effective_manifest_hash,
                         "enrolment",
                         f->enrolment,
                         "placement",
                         f->placement,
                         "pool",
                         f->pool,
                         "pool_hash",
                         f->pool_hash,
                         NULL};
  return seal(key, POOL_CLAIM_TYPE, pairs, document, length, err);
}

int pool_seal_quarantine(const struct cordon_signing_key *key,
                         const struct pool_quarantine_fields *f, char **document, size_t *length,
                         struct cordon_error **err) {
  const char *pairs[] = {"effective_manifest_hash",
                         f->effective_manifest_hash,
                         "overrides_hash",
                         f->overrides_hash,
                         "pool",
                         f->pool,
                         "pool_hash",
                         f->pool_hash,
                         "session",
                         f->session,
                         "slot_effective_manifest_hash",
                         f->slot_effective_manifest_hash,
                         "slot_pool_hash",
                         f->slot_pool_hash,
                         NULL};
  return seal(key, POOL_QUARANTINE_TYPE, pairs, document, length, err);
}

__attribute__((format(printf, 2, 3))) static int broken(char **reason, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vasprintf(reason, fmt, ap);
  va_end(ap);
  if (n < 0)
    *reason = NULL;
  return 1;
}

int pool_worker_document_check(const char *document, size_t length, const char *type,
                               const char *expected_kid, json_t **body, char *kid, char **reason,
                               struct cordon_error **err) {
  *body = NULL;
  *reason = NULL;
  const char *const *members = members_of(type);
  if (!members)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "no document type %s", type);
  struct cordon_document_check check = {0};
  if (cordon_document_verify(document, length, expected_kid, &check, err) < 0)
    return -1;
  int r = 0;
  json_t *parsed = NULL;
  if (check.verdict != CORDON_VERDICT_VERIFIED && check.verdict != CORDON_VERDICT_UNANCHORED) {
    r = broken(reason, "%s: %s", type, check.reason ? check.reason : "signature does not verify");
    goto out;
  }
  struct cordon_error *perr = NULL;
  if (jcs_parse(check.body_json, strlen(check.body_json), 0, type, &parsed, &perr) < 0) {
    r = broken(reason, "%s: %s", type, perr ? perr->message : "body unreadable");
    cordon_error_free(perr);
    goto out;
  }
  size_t count = 0;
  for (; members[count]; count++) {
    json_t *v = json_object_get(parsed, members[count]);
    bool ok = !strcmp(members[count], "version") ? json_is_number(v) && json_number_value(v) == 1
                                                 : json_is_string(v) && json_string_length(v) > 0;
    if (!ok) {
      r = broken(reason, "%s: member %s missing or malformed", type, members[count]);
      goto out;
    }
  }
  if (json_object_size(parsed) != count + 1 || !json_object_get(parsed, "signer")) {
    r = broken(reason, "%s: body holds members besides its own and signer", type);
    goto out;
  }
  if (strcmp(json_string_value(json_object_get(parsed, "type")), type)) {
    r = broken(reason, "%s: body is of type %s", type,
               json_string_value(json_object_get(parsed, "type")));
    goto out;
  }
  snprintf(kid, CORDON_KEY_ID_LEN + 1, "%s", check.kid);
  *body = parsed;
  parsed = NULL;
out:
  json_decref(parsed);
  cordon_document_check_clear(&check);
  if (r == 1 && !*reason)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "%s", type);
  return r;
}

/* ---- effects ---- */

/* Store a document and chain event with details (stolen). */
static int store_and_chain(struct cordon_context *ctx, const char *event, const char *actor,
                           const char *resource_id, const char *document, size_t length,
                           json_t *details, char *digest, struct cordon_error **err) {
  _cleanup_(audit_closep) struct cordon_audit_log *log = NULL;
  _cleanup_(cas_closep) struct cordon_cas *cas = NULL;
  json_auto_t *owned = details;
  char d[CORDON_DIGEST_HEX_SIZE] = "";
  if (!owned)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "%s", event);
  if (document) {
    if (cordon_cas_open_project(ctx, &cas, err) < 0 ||
        cordon_cas_put(cas, document, length, "application/json", NULL, d, err) < 0)
      return -1;
    if (json_object_set_new(owned, "receipt", json_string(d)) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "%s", event);
    /* The store's gc keeps what a record under .cordon/receipts/ names. */
    if (pool_keep_blobs(ctx, d, owned, err) < 0)
      return -1;
  }
  _cleanup_free_ char *text = NULL;
  size_t n = 0;
  if (jcs_dump(owned, &text, &n, err) < 0 || cordon_audit_open_project(ctx, NULL, &log, err) < 0)
    return -1;
  struct cordon_audit_event ev = {.event = event,
                                  .actor = actor,
                                  .resource_type = "pool",
                                  .resource_id = resource_id,
                                  .details_json = text};
  if (cordon_audit_append(log, &ev, NULL, err) < 0)
    return -1;
  if (digest)
    memcpy(digest, d, sizeof(d));
  return 0;
}

int pool_worker_enrol(struct cordon_context *ctx, const char *pool, const char *pool_hash,
                      const char *actor, char *receipt_digest, struct cordon_error **err) {
  _cleanup_(cordon_signing_key_freep) struct cordon_signing_key *key = NULL;
  _cleanup_free_ char *doc = NULL;
  size_t n = 0;
  if (cordon_signing_key_load(NULL, &key, err) < 0 ||
      pool_seal_enrolment(key, pool, pool_hash, &doc, &n, err) < 0)
    return -1;
  return store_and_chain(ctx, "worker.enrolled", actor, pool, doc, n,
                         json_pack("{s:s,s:s,s:s}", "kid", cordon_signing_key_id(key), "pool", pool,
                                   "pool_hash", pool_hash),
                         receipt_digest, err);
}

struct find_enrolment {
  const char *kid, *pool, *pool_hash;
  char *digest;
  bool found;
};

static int find_enrolment_entry(const struct cordon_audit_entry *entry, void *data) {
  struct find_enrolment *f = data;
  if (strcmp(entry->event, "worker.enrolled"))
    return 0;
  json_t *d = json_loads(entry->details_json, 0, NULL);
  const char *kid = json_string_value(json_object_get(d, "kid")),
             *pool = json_string_value(json_object_get(d, "pool")),
             *hash = json_string_value(json_object_get(d, "pool_hash")),
             *receipt = json_string_value(json_object_get(d, "receipt"));
  if (kid && pool && hash && receipt && !strcmp(kid, f->kid) && !strcmp(pool, f->pool) &&
      !strcmp(hash, f->pool_hash) && cordon_digest_valid(receipt)) {
    snprintf(f->digest, 65, "%s", receipt);
    f->found = true;
  }
  json_decref(d);
  return 0;
}

int pool_worker_find_enrolment(struct cordon_context *ctx, const char *kid, const char *pool,
                               const char *pool_hash, char *receipt_digest,
                               struct cordon_error **err) {
  _cleanup_(audit_closep) struct cordon_audit_log *log = NULL;
  struct find_enrolment f = {kid, pool, pool_hash, receipt_digest, false};
  if (cordon_audit_open_project(ctx, NULL, &log, err) < 0 ||
      cordon_audit_foreach_event(log, "worker.enrolled", find_enrolment_entry, &f, err) < 0)
    return -1;
  return f.found ? 1 : 0;
}

int pool_worker_record_claim(struct cordon_context *ctx, const struct cordon_signing_key *key,
                             const struct pool_claim_fields *f, const char *actor,
                             char *claim_digest, struct cordon_error **err) {
  _cleanup_free_ char *doc = NULL;
  size_t n = 0;
  if (pool_seal_claim(key, f, &doc, &n, err) < 0)
    return -1;
  return store_and_chain(ctx, "worker.claimed", actor, f->pool, doc, n,
                         json_pack("{s:s,s:s,s:s,s:s}", "dispatch_id", f->dispatch_id,
                                   "effective_manifest_hash", f->effective_manifest_hash, "kid",
                                   cordon_signing_key_id(key), "pool", f->pool),
                         claim_digest, err);
}

int pool_worker_record_result(struct cordon_context *ctx, const char *kid, const char *pool,
                              const char *dispatch_id, int exit_code, const char *stdout_sha256,
                              const char *stderr_sha256, bool warm, const char *actor,
                              struct cordon_error **err) {
  return store_and_chain(ctx, "worker.result", actor, pool, NULL, 0,
                         json_pack("{s:s,s:i,s:s,s:s,s:s,s:s,s:b}", "dispatch_id", dispatch_id,
                                   "exit_code", exit_code, "kid", kid, "pool", pool,
                                   "stderr_sha256", stderr_sha256, "stdout_sha256", stdout_sha256,
                                   "warm", warm),
                         NULL, err);
}

int pool_worker_record_quarantine(struct cordon_context *ctx,
                                  const struct pool_quarantine_fields *f, const char *actor,
                                  struct cordon_error **err) {
  _cleanup_(cordon_signing_key_freep) struct cordon_signing_key *key = NULL;
  _cleanup_free_ char *doc = NULL;
  size_t n = 0;
  if (cordon_signing_key_load(NULL, &key, err) < 0 ||
      pool_seal_quarantine(key, f, &doc, &n, err) < 0)
    return -1;
  return store_and_chain(ctx, "pool.warm_quarantined", actor, f->pool, doc, n,
                         json_pack("{s:s,s:s}", "pool", f->pool, "session", f->session), NULL, err);
}
