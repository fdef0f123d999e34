/* Named sandbox pools (issue 23): the manifest an operator registers, the pure merge of a
 * recipe's overrides into its template, the registry projected from the audit chain, placement
 * and refusal receipts, and the bridge from an effective manifest to the inputs of session
 * creation. Formats: docs/formats.md ("Pools"); a guide: docs/pools.md.
 *
 *   manifest.c   parse + validate a pool manifest (JSON -> struct), canonical form, pool_hash
 *   override.c   the pure override merge and its refusal rules; the effective manifest
 *   registry.c   the projection of pool.registered / pool.updated / pool.retired events
 *   receipt.c    sealing and checking placement and refusal receipts; selector inputs
 *   session.c    effective manifest -> struct cordon_manifest (and the chosen backend)
 *   store.c      the effects: register/retire (audit + CAS), place (seal, store, chain)
 *   verify.c     `pool verify`: replay, re-hash every body, re-check every receipt; a hook
 *                table (pool_verify_checkers in verify-dispatch.c) for enrolment and claims
 *
 * Everything but store.c and verify.c is pure: no file, clock or environment is read. */
#ifndef CORDON_POOL_POOL_H
#define CORDON_POOL_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include <cordon/audit.h>
#include <cordon/backend.h>
#include <cordon/cas.h>
#include <cordon/error.h>
#include <cordon/keys.h>
#include <cordon/select.h>
#include <cordon/signed.h>

struct cordon_context;

/* ---- the manifest ---------------------------------------------------------------------------- */

#define POOL_NAME_MAX 64             /* [A-Za-z0-9_.-], the first alphanumeric */
#define POOL_MANIFEST_MAX (1u << 20) /* bytes of a manifest or recipe file */
#define POOL_LIST_MAX 256            /* entries of any list in a manifest or recipe */

/* The override keys, in the order `pool show` prints them. A manifest's exposed_fields and a
 * recipe's overrides use exactly these names. */
extern const char *const pool_override_keys[]; /* NULL-terminated */
bool pool_override_key_known(const char *key);

/* The template: what a session gets when a recipe overrides nothing. Absent members are
 * zero/NULL and stay absent from the canonical form. */
struct pool_template {
  char *root;             /* NULL: "/workspace" */
  char **env;             /* "KEY=VALUE", sorted by KEY, NULL-terminated (never NULL) */
  double timeout_seconds; /* 0: none */
  char *image;            /* NULL: the backend's default */
  enum cordon_egress net; /* "net": the egress class (default loopback) */
  uint64_t memory;        /* bytes; 0: no limit */
  uint64_t pids;          /* 0: no limit */
  char **read_only;       /* workspace paths, sorted, unique (never NULL) */
  char **hidden;          /* workspace paths, sorted, unique (never NULL) */
  uint32_t capabilities;  /* CORDON_CAP_* the work requires */
  char **credential_env;  /* variable names passed from the caller's environment */
};

struct pool_manifest {
  char *name;
  char **backend_allowlist; /* preference order, unique, non-empty */
  struct pool_template template_;
  char **exposed_fields;    /* sorted, unique, each in pool_override_keys */
  uint64_t max_concurrency; /* >= 1 */
  uint32_t capability_ceiling;
  enum cordon_egress network_egress_class;
  char **credential_env_allowlist; /* sorted, unique */
  /* Derived: */
  char *canonical; /* canonical JSON of the manifest (without pool_hash) */
  size_t canonical_length;
  char pool_hash[65];     /* SHA-256 of canonical: also its digest in the CAS */
  char template_hash[65]; /* SHA-256 of the canonical template */
};

/* Parse and validate a manifest (untrusted JSON text). Unknown members, wrong types, bad names,
 * and a ceiling narrower than the template (a template capability above capability_ceiling,
 * its net wider than network_egress_class, a template credential_env outside the allowlist)
 * are refused with CORDON_ERR_INVALID naming the field ("template.net: ..."). A "pool_hash"
 * member is accepted only when it equals the hash of the rest. */
int pool_manifest_parse(const char *text, size_t length, struct pool_manifest *out,
                        struct cordon_error **err);
void pool_manifest_clear(struct pool_manifest *m);
/* The manifest as a JSON object with its pool_hash (for `pool show --json`). */
json_t *pool_manifest_json(const struct pool_manifest *m);

bool pool_name_valid(const char *name);

/* ---- overrides and the effective manifest (pure) ----------------------------------------------
 */

/* The refusal rules, as recorded in refusal receipts ("rule"). */
enum pool_rule {
  POOL_RULE_NONE = 0,
  POOL_RULE_INVALID_OVERRIDE,         /* "invalid_override": unknown key or wrong type/value */
  POOL_RULE_FIELD_NOT_EXPOSED,        /* "field_not_exposed" */
  POOL_RULE_CAPABILITY_ABOVE_CEILING, /* "capability_above_ceiling" */
  POOL_RULE_EGRESS_ABOVE_CEILING,     /* "egress_above_ceiling" */
  POOL_RULE_CREDENTIAL_NOT_ALLOWED,   /* "credential_not_allowed" */
  POOL_RULE_BACKEND_NOT_ALLOWED,      /* "backend_not_allowed" */
  POOL_RULE_POOL_MISMATCH,            /* "pool_mismatch": the recipe names another pool */
  POOL_RULE_POOL_RETIRED,             /* "pool_retired" */
  POOL_RULE_NO_BACKEND_AVAILABLE,     /* "no_backend_available" (selection, not the merge) */
};
const char *pool_rule_name(enum pool_rule rule);

struct pool_refusal {
  enum pool_rule rule;
  char *field;   /* the override key (or "pool"), malloc'd */
  char *message; /* one line, malloc'd */
};
void pool_refusal_clear(struct pool_refusal *r);
/* Fill r (formatting the message); returns 1, or -ENOMEM with r cleared. */
int pool_refusal_set(struct pool_refusal *r, enum pool_rule rule, const char *field,
                     const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* A parsed recipe: {"pool": NAME, "overrides": {...}} (overrides optional: {}). */
struct pool_recipe {
  char *pool;
  json_t *overrides;       /* an object, owned */
  char overrides_hash[65]; /* SHA-256 of the canonical overrides object */
};
/* Parse a recipe; a malformed one (not an object, unknown member, pool missing) is
 * CORDON_ERR_INVALID. Override values are checked by the merge, not here. */
int pool_recipe_parse(const char *text, size_t length, struct pool_recipe *out,
                      struct cordon_error **err);
/* A recipe for pool with no overrides (`run --pool NAME` without --recipe). */
int pool_recipe_empty(const char *pool, struct pool_recipe *out, struct cordon_error **err);
void pool_recipe_clear(struct pool_recipe *r);

struct pool_effective {
  json_t *manifest; /* the effective manifest, a JSON object (docs/formats.md) */
  char *canonical;  /* its canonical bytes */
  size_t canonical_length;
  char hash[65]; /* effective_manifest_hash: SHA-256 of canonical */
};
void pool_effective_clear(struct pool_effective *e);

/* Merge the recipe's overrides into the pool's template. Pure: the same manifest and recipe give
 * the same bytes anywhere. Returns 0 with *out filled, 1 with *refusal filled (the first rule
 * broken, in key order), < 0 on error (ENOMEM). The recipe's pool must be m->name. */
int pool_merge(const struct pool_manifest *m, const struct pool_recipe *recipe,
               struct pool_effective *out, struct pool_refusal *refusal, struct cordon_error **err);

/* ---- selection and receipts --------------------------------------------------------------------
 */

/* One allowed backend as the selector sees it on this host (include/cordon/select.h). */
struct pool_backend_status {
  const char *name;
  bool available;
  uint32_t capabilities; /* CORDON_CAP_* the backend declares */
  uint32_t enforces;     /* CORDON_FEATURE_* */
  enum cordon_isolation_tier tier;
  uint32_t egress; /* (1u << class) for each class it offers */
};

/* A verified isolation attestation, as the selector reads it; NULL or sha256 NULL: none given
 * (every declared capability is then unverifiable, which a pool accepts: its allowlist is the
 * operator's trust; an attestation can only take a backend away). */
struct pool_attestation {
  const char *sha256; /* the document's digest */
  const char *kid;    /* its signer */
  const struct cordon_select_attested *rows;
  size_t n_rows;
};

/* The selector's requirements an effective manifest implies (pure): its capabilities plus
 * exec, the policy features its confinement asks for (read_only, hidden, memory, pids, the
 * egress class), its net class, no minimum tier, and unverifiable claims accepted. */
int pool_requirements(const json_t *effective, struct cordon_select_requirements *out,
                      struct cordon_error **err);

/* The selection for an effective manifest: candidates are the allowlist's backends in the
 * pool's order (its cost order; a name status does not list is unavailable), run through
 * cordon_select. *inputs is the selector's canonical inputs object (selector_inputs), *chosen
 * the first that fits (NULL: none; borrowed from effective), *reasons (malloc'd, NULL when a
 * backend was chosen) "BACKEND: reason; ..." for every rejected one. */
int pool_selector_inputs(const json_t *effective, const struct pool_backend_status *status,
                         size_t n_status, const struct pool_attestation *attestation,
                         json_t **inputs, const char **chosen, char **reasons,
                         struct cordon_error **err);

/* Re-derive a selection from a recorded selector_inputs object (pure): parsed back into
 * cordon_select's inputs, which must give the same canonical bytes, then selected. Returns 0
 * with *chosen (malloc'd, NULL: nothing fits), 1 when the object is not a selector inputs
 * object, < 0 on error. */
int pool_selection_replay(const json_t *inputs, char **chosen, struct cordon_error **err);

/* Whether recorded selector inputs belong to an effective manifest (pure): their requirements
 * are the ones it implies and their candidates are its allowlist, in order. Returns 0 when they
 * do, 1 with *why (malloc'd) when not, < 0 on error. */
int pool_selector_inputs_match(const json_t *effective, const json_t *inputs, char **why,
                               struct cordon_error **err);

/* Seal a placement receipt: a signed document (include/cordon/signed.h) whose body is
 * {"chosen_backend","effective_manifest_hash","overrides_hash","pool","pool_hash",
 *  "selector_inputs","template_hash","type":"cordon.pool.placement","version":1}. */
int pool_seal_placement(const struct cordon_signing_key *key, const struct pool_manifest *m,
                        const struct pool_recipe *recipe, const struct pool_effective *effective,
                        const json_t *selector_inputs, const char *chosen_backend, char **document,
                        size_t *document_length, struct cordon_error **err);
/* Seal a refusal receipt: body {"field","message","overrides_hash","pool","pool_hash","rule",
 * "template_hash","type":"cordon.pool.refusal","version":1}. m may be NULL (unknown or retired
 * pool): the hashes are then "" . */
int pool_seal_refusal(const struct cordon_signing_key *key, const char *pool_name,
                      const struct pool_manifest *m, const struct pool_recipe *recipe,
                      const struct pool_refusal *refusal, char **document, size_t *document_length,
                      struct cordon_error **err);

/* Check a placement or refusal receipt: the signature (expected_kid may be NULL), the exact
 * body members and forms. Returns 0 with *body (the parsed body, owned by the caller) when it
 * holds, 1 with *reason (malloc'd) when it does not, < 0 on error. */
int pool_receipt_check(const char *document, size_t length, const char *expected_kid, json_t **body,
                       char **reason, struct cordon_error **err);

/* ---- the registry (pure projection) ------------------------------------------------------------
 */

enum pool_state { POOL_ACTIVE = 0, POOL_RETIRED };

struct pool_entry {
  char *name;
  char pool_hash[65]; /* the current body */
  enum pool_state state;
  uint64_t version;     /* registrations and updates seen */
  uint64_t audit_index; /* the chain position of the last event */
};

struct pool_registry {
  struct pool_entry *entries; /* sorted by name */
  size_t n_entries;
};

/* Feed one audit event; events other than pool.registered, pool.updated and pool.retired are
 * ignored. An event inconsistent with the projection (update of an unknown pool, retire of a
 * retired one, a malformed details object) is CORDON_ERR_INTEGRITY naming the entry. */
int pool_registry_apply(struct pool_registry *reg, uint64_t index, const char *event,
                        const char *details_json, struct cordon_error **err);
const struct pool_entry *pool_registry_find(const struct pool_registry *reg, const char *name);
void pool_registry_clear(struct pool_registry *reg);

/* Replay the project's audit chain into reg (no HMAC check: pool_verify does that). */
int pool_registry_load(struct cordon_audit_log *log, struct pool_registry *reg,
                       struct cordon_error **err);

/* ---- session inputs -----------------------------------------------------------------------------
 */

/* What `run --pool` and `session create --pool` hand to session creation. */
struct pool_session_inputs {
  struct cordon_manifest manifest; /* points into the storage below */
  char *backend;                   /* the chosen backend */
  /* storage */
  char *root;
  char *image;
  char **env; /* template env + credential values from envp */
  char **read_only;
  char **hidden;
};

/* Turn an effective manifest into a manifest for cordon_session_create. credential_env names are
 * looked up in envp (pure: the caller passes environ); a name absent there is refused
 * (CORDON_ERR_INVALID naming it): a credential is never silently dropped. */
int pool_session_inputs_build(const json_t *effective, const char *chosen_backend,
                              char *const *envp, struct pool_session_inputs *out,
                              struct cordon_error **err);
void pool_session_inputs_clear(struct pool_session_inputs *in);

/* ---- effects: register, retire, place, verify (store.c, verify.c) ------------------------------
 */

enum pool_register_outcome { POOL_REGISTERED = 0, POOL_UPDATED, POOL_UNCHANGED };

/* Store the body in the CAS and append pool.registered (a new or retired name) or pool.updated
 * (a known active name with a different body); the same body again appends nothing. Audit
 * details: {"name":N,"pool_hash":H}. */
int pool_register(struct cordon_context *ctx, const struct pool_manifest *m, const char *actor,
                  enum pool_register_outcome *outcome, struct cordon_error **err);
/* Append pool.retired ({"name","pool_hash"}); an unknown or retired name: CORDON_ERR_NOT_FOUND. */
int pool_retire(struct cordon_context *ctx, const char *name, const char *actor,
                struct cordon_error **err);
/* The current manifest of an active pool (read from the CAS, re-hashed, re-parsed).
 * An unknown pool: CORDON_ERR_NOT_FOUND; a retired one: CORDON_ERR_DENIED. */
int pool_lookup(struct cordon_context *ctx, const char *name, struct pool_manifest *out,
                struct cordon_error **err);

/* Keep blobs through the store's gc: write digests (a JSON object whose string members are
 * digests) to .cordon/receipts/pools/NAME.json, whose digests gc takes as roots. Every event
 * that stores a blob (register, place, and the dispatch side's receipts) records one. */
int pool_keep_blobs(struct cordon_context *ctx, const char *name, json_t *digests,
                    struct cordon_error **err);

/* The current body of a pool, active or retired (`pool show`); *state receives which. */
int pool_lookup_any(struct cordon_context *ctx, const char *name, struct pool_manifest *out,
                    enum pool_state *state, struct cordon_error **err);

struct pool_placement {
  bool refused;
  struct pool_refusal refusal;     /* when refused */
  struct pool_effective effective; /* when placed */
  char *chosen_backend;            /* when placed */
  json_t *selector_inputs;         /* when placed */
  char *receipt;                   /* the signed document, newline-terminated */
  size_t receipt_length;
  char receipt_digest[65]; /* its digest in the CAS */
  char pool_hash[65];
  uint64_t max_concurrency; /* the placing body's ceiling (a dispatch's slot table needs it) */
};
void pool_placement_clear(struct pool_placement *p);

/* Place a recipe: look the pool up, merge, select among the available backends of the
 * allowlist (status from the registry of backends when status is NULL), seal, store the
 * receipt (and the effective manifest) in the CAS, and chain pool.placed or
 * pool.override_refused ({"effective_manifest_hash"|"rule","pool","pool_hash","receipt"}).
 * Creates no session. Returns 0 (placed or refused: see p->refused), < 0 on error. */
int pool_place(struct cordon_context *ctx, const struct pool_recipe *recipe,
               const struct pool_backend_status *status, size_t n_status,
               const struct pool_attestation *attestation, const char *actor,
               struct pool_placement *p, struct cordon_error **err);

/* `pool verify` */
struct pool_verify_report {
  bool ok;
  uint64_t entries;  /* audit entries replayed */
  uint64_t bodies;   /* pool bodies re-hashed */
  uint64_t receipts; /* receipts re-checked */
  char *reason;      /* the first break, one line; NULL when ok */
  char *object;      /* what broke: "audit chain" or "audit entry N"; NULL when ok */
};
void pool_verify_report_clear(struct pool_verify_report *r);

/* A checker for one audit event kind: returns 0 when the entry holds, 1 with *reason (malloc'd)
 * when it breaks, < 0 on error. The dispatch side (enrolment, claims) adds its own rows in
 * verify-dispatch.c. */
struct pool_event_checker {
  const char *event;
  int (*check)(struct cordon_cas *cas, const struct cordon_audit_entry *entry,
               const char *expected_kid, struct pool_verify_report *report, char **reason,
               struct cordon_error **err);
};
extern const struct pool_event_checker pool_dispatch_checkers[]; /* ends with {NULL, NULL} */

/* Verify the chain (HMACs), replay the registry, re-hash every stored body, re-check every
 * receipt the chain names. expected_kid NULL: this install's key. */
int pool_verify(struct cordon_context *ctx, const char *expected_kid,
                struct pool_verify_report *report, struct cordon_error **err);

#endif
