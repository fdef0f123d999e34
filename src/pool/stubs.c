/* Placeholders while the pool module is written: every call fails with CORDON_ERR_UNSUPPORTED.
 * Replaced file by file by manifest.c, override.c, registry.c, receipt.c, session.c, store.c
 * and verify.c. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pool/pool.h"

#define STUB(err) cordon_error_set(err, CORDON_ERR_UNSUPPORTED, 0, "pools: not implemented yet")

const char *const pool_override_keys[] = {NULL};
bool pool_override_key_known(const char *key) {
  (void)key;
  return false;
}
int pool_manifest_parse(const char *text, size_t length, struct pool_manifest *out,
                        struct cordon_error **err) {
  (void)text;
  (void)length;
  (void)out;
  return STUB(err);
}
void pool_manifest_clear(struct pool_manifest *m) {
  (void)m;
}
json_t *pool_manifest_json(const struct pool_manifest *m) {
  (void)m;
  return NULL;
}
bool pool_name_valid(const char *name) {
  (void)name;
  return false;
}
const char *pool_rule_name(enum pool_rule rule) {
  (void)rule;
  return "none";
}
void pool_refusal_clear(struct pool_refusal *r) {
  (void)r;
}
int pool_recipe_parse(const char *text, size_t length, struct pool_recipe *out,
                      struct cordon_error **err) {
  (void)text;
  (void)length;
  (void)out;
  return STUB(err);
}
int pool_recipe_empty(const char *pool, struct pool_recipe *out, struct cordon_error **err) {
  (void)pool;
  (void)out;
  return STUB(err);
}
void pool_recipe_clear(struct pool_recipe *r) {
  (void)r;
}
void pool_effective_clear(struct pool_effective *e) {
  (void)e;
}
int pool_merge(const struct pool_manifest *m, const struct pool_recipe *recipe,
               struct pool_effective *out, struct pool_refusal *refusal,
               struct cordon_error **err) {
  (void)m;
  (void)recipe;
  (void)out;
  (void)refusal;
  return STUB(err);
}
int pool_selector_inputs(const json_t *effective, const struct pool_backend_status *status,
                         size_t n_status, json_t **inputs, const char **chosen,
                         struct cordon_error **err) {
  (void)effective;
  (void)status;
  (void)n_status;
  (void)inputs;
  (void)chosen;
  return STUB(err);
}
int pool_seal_placement(const struct cordon_signing_key *key, const struct pool_manifest *m,
                        const struct pool_recipe *recipe, const struct pool_effective *effective,
                        const json_t *selector_inputs, const char *chosen_backend, char **document,
                        size_t *document_length, struct cordon_error **err) {
  (void)key;
  (void)m;
  (void)recipe;
  (void)effective;
  (void)selector_inputs;
  (void)chosen_backend;
  (void)document;
  (void)document_length;
  return STUB(err);
}
int pool_seal_refusal(const struct cordon_signing_key *key, const char *pool_name,
                      const struct pool_manifest *m, const struct pool_recipe *recipe,
                      const struct pool_refusal *refusal, char **document, size_t *document_length,
                      struct cordon_error **err) {
  (void)key;
  (void)pool_name;
  (void)m;
  (void)recipe;
  (void)refusal;
  (void)document;
  (void)document_length;
  return STUB(err);
}
int pool_receipt_check(const char *document, size_t length, const char *expected_kid, json_t **body,
                       char **reason, struct cordon_error **err) {
  (void)document;
  (void)length;
  (void)expected_kid;
  (void)body;
  (void)reason;
  return STUB(err);
}
int pool_registry_apply(struct pool_registry *reg, uint64_t index, const char *event,
                        const char *details_json, struct cordon_error **err) {
  (void)reg;
  (void)index;
  (void)event;
  (void)details_json;
  return STUB(err);
}
const struct pool_entry *pool_registry_find(const struct pool_registry *reg, const char *name) {
  (void)reg;
  (void)name;
  return NULL;
}
void pool_registry_clear(struct pool_registry *reg) {
  (void)reg;
}
int pool_registry_load(struct cordon_audit_log *log, struct pool_registry *reg,
                       struct cordon_error **err) {
  (void)log;
  (void)reg;
  return STUB(err);
}
int pool_session_inputs_build(const json_t *effective, const char *chosen_backend,
                              char *const *envp, struct pool_session_inputs *out,
                              struct cordon_error **err) {
  (void)effective;
  (void)chosen_backend;
  (void)envp;
  (void)out;
  return STUB(err);
}
void pool_session_inputs_clear(struct pool_session_inputs *in) {
  (void)in;
}
int pool_register(struct cordon_context *ctx, const struct pool_manifest *m, const char *actor,
                  enum pool_register_outcome *outcome, struct cordon_error **err) {
  (void)ctx;
  (void)m;
  (void)actor;
  (void)outcome;
  return STUB(err);
}
int pool_retire(struct cordon_context *ctx, const char *name, const char *actor,
                struct cordon_error **err) {
  (void)ctx;
  (void)name;
  (void)actor;
  return STUB(err);
}
int pool_lookup(struct cordon_context *ctx, const char *name, struct pool_manifest *out,
                struct cordon_error **err) {
  (void)ctx;
  (void)name;
  (void)out;
  return STUB(err);
}
void pool_placement_clear(struct pool_placement *p) {
  (void)p;
}
int pool_place(struct cordon_context *ctx, const struct pool_recipe *recipe,
               const struct pool_backend_status *status, size_t n_status, const char *actor,
               struct pool_placement *p, struct cordon_error **err) {
  (void)ctx;
  (void)recipe;
  (void)status;
  (void)n_status;
  (void)actor;
  (void)p;
  return STUB(err);
}
void pool_verify_report_clear(struct pool_verify_report *r) {
  (void)r;
}
int pool_verify(struct cordon_context *ctx, const char *expected_kid,
                struct pool_verify_report *report, struct cordon_error **err) {
  (void)ctx;
  (void)expected_kid;
  (void)report;
  return STUB(err);
}
