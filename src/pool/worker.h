/* The dispatch side's signed documents and audit events (issue 23, items 5 and 6):
 *
 *   enrolment   cordon.pool.enrolment   {"pool","pool_hash","type","version"}: this install's key
 *               (the signer) is a worker of the pool with that body. Chained as worker.enrolled
 *               {"kid","pool","pool_hash","receipt"}.
 *   claim       cordon.pool.claim       {"dispatch_id","effective_manifest_hash","enrolment",
 *               "placement","pool","pool_hash","type","version"}: the signer took the dispatch
 *               and ran it under that effective manifest, placed by the placement receipt
 *               (digest), as the worker enrolled by the enrolment receipt (digest). Chained as
 *               worker.claimed {"dispatch_id","effective_manifest_hash","kid","pool","receipt"};
 *               the result as worker.result {"dispatch_id","exit_code","kid","pool",
 *               "stderr_sha256","stdout_sha256","warm"}.
 *   quarantine  cordon.pool.warm_quarantine {"effective_manifest_hash","overrides_hash","pool",
 *               "pool_hash","session","slot_effective_manifest_hash","slot_pool_hash","type",
 *               "version"}: a warm slot whose manifest drifted, set aside unused. Chained as
 *               pool.warm_quarantined {"pool","receipt","session"}.
 *
 * Every document is signed canonical JSON (include/cordon/signed.h) stored in the project's CAS;
 * no body holds a clock, a pid or a host name. */
#ifndef CORDON_POOL_WORKER_H
#define CORDON_POOL_WORKER_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include <cordon/audit.h>
#include <cordon/cas.h>
#include <cordon/error.h>
#include <cordon/keys.h>

#define POOL_ENROLMENT_TYPE "cordon.pool.enrolment"
#define POOL_CLAIM_TYPE "cordon.pool.claim"
#define POOL_QUARANTINE_TYPE "cordon.pool.warm_quarantine"

struct cordon_context;

/* ---- pure ---- */

int pool_seal_enrolment(const struct cordon_signing_key *key, const char *pool,
                        const char *pool_hash, char **document, size_t *length,
                        struct cordon_error **err);

struct pool_claim_fields {
  const char *pool, *pool_hash, *dispatch_id, *effective_manifest_hash;
  const char *placement; /* digest of the placement receipt */
  const char *enrolment; /* digest of the enrolment receipt */
};
int pool_seal_claim(const struct cordon_signing_key *key, const struct pool_claim_fields *f,
                    char **document, size_t *length, struct cordon_error **err);

struct pool_quarantine_fields {
  const char *pool, *session;
  const char *pool_hash, *effective_manifest_hash, *overrides_hash; /* the dispatch's */
  const char *slot_pool_hash, *slot_effective_manifest_hash;        /* the slot's */
};
int pool_seal_quarantine(const struct cordon_signing_key *key,
                         const struct pool_quarantine_fields *f, char **document, size_t *length,
                         struct cordon_error **err);

/* Check one of these documents: its signature (by expected_kid when not NULL), its type, and
 * that its body holds exactly the members of that type, each a string (version 1). Returns 0
 * with *body (owned) and kid (CORDON_KEY_ID_LEN + 1) when it holds, 1 with *reason (malloc'd)
 * when it does not, < 0 on error. */
int pool_worker_document_check(const char *document, size_t length, const char *type,
                               const char *expected_kid, json_t **body, char *kid, char **reason,
                               struct cordon_error **err);

/* ---- effects ---- */

/* Enrol this install's key as a worker of the pool whose current body is pool_hash: seal, store,
 * chain worker.enrolled. receipt_digest gets 65 bytes. */
int pool_worker_enrol(struct cordon_context *ctx, const char *pool, const char *pool_hash,
                      const char *actor, char *receipt_digest, struct cordon_error **err);
/* The digest of this key's latest enrolment in pool at pool_hash, from the chain: 1 found, 0
 * none. */
int pool_worker_find_enrolment(struct cordon_context *ctx, const char *kid, const char *pool,
                               const char *pool_hash, char *receipt_digest,
                               struct cordon_error **err);
/* Seal, store and chain a claim (worker.claimed); claim_digest gets 65 bytes. */
int pool_worker_record_claim(struct cordon_context *ctx, const struct cordon_signing_key *key,
                             const struct pool_claim_fields *f, const char *actor,
                             char *claim_digest, struct cordon_error **err);
/* Chain worker.result. */
int pool_worker_record_result(struct cordon_context *ctx, const char *kid, const char *pool,
                              const char *dispatch_id, int exit_code, const char *stdout_sha256,
                              const char *stderr_sha256, bool warm, const char *actor,
                              struct cordon_error **err);
/* Seal, store and chain a quarantine (pool.warm_quarantined). */
int pool_worker_record_quarantine(struct cordon_context *ctx,
                                  const struct pool_quarantine_fields *f, const char *actor,
                                  struct cordon_error **err);

#endif
