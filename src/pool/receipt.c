/* Placement and refusal receipts (pure but for the signature): the selector's inputs, the
 * choice they imply, and the two signed bodies. Signing is Ed25519 over RFC 8785 bytes (the
 * signed-document form of include/cordon/signed.h), deterministic, and no body carries a
 * clock, a host name or a path: the same pool, recipe and selector inputs sealed by the same key
 * give the same bytes on any host. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <cordon/signed.h>

#include "base/cleanup.h"
#include "crypto/digest.h"
#include "crypto/jcs.h"
#include "pool/internal.h"
#include "pool/pool.h"

#define PLACEMENT_TYPE "cordon.pool.placement"
#define REFUSAL_TYPE "cordon.pool.refusal"

static const struct pool_backend_status *status_of(const struct pool_backend_status *status,
                                                   size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(status[i].name, name) == 0)
      return &status[i];
  return NULL;
}

int pool_selector_inputs(const json_t *effective, const struct pool_backend_status *status,
                         size_t n_status, json_t **inputs, const char **chosen,
                         struct cordon_error **err) {
  *inputs = NULL;
  *chosen = NULL;
  const json_t *allow = json_object_get(effective, "backend_allowlist");
  uint32_t required = 0;
  const char *bad = NULL;
  if (!json_is_array(allow) ||
      pool_json_capabilities(json_object_get(effective, "capabilities"), &required, &bad) < 0)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "effective manifest: malformed");
  json_auto_t *in = json_object();
  json_t *backends = json_object();
  if (!in || !backends || json_object_set_new(in, "backends", backends) < 0 ||
      json_object_set(in, "allowlist", (json_t *)allow) < 0 ||
      json_object_set_new(in, "required_capabilities", pool_capabilities_json(required)) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "selector inputs");
  size_t i;
  json_t *name;
  json_array_foreach(allow, i, name) {
    const char *n = json_string_value(name);
    if (!n)
      return cordon_error_set(err, CORDON_ERR_INVALID, 0, "effective manifest: malformed");
    const struct pool_backend_status *s = status_of(status, n_status, n);
    uint32_t caps = s ? s->capabilities & POOL_CAPABILITIES : 0;
    bool available = s && s->available;
    json_t *one = json_pack("{s:b,s:o}", "available", available, "capabilities",
                            pool_capabilities_json(caps));
    if (!one || json_object_set_new(backends, n, one) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "selector inputs");
    if (!*chosen && available && (caps & required) == required)
      *chosen = n; /* borrowed from effective */
  }
  *inputs = steal_ptr(&in);
  return 0;
}

/* The choice the recorded inputs imply (for verification): the first allowed backend that
 * was available and declared every required capability. */
static const char *choice_of(const json_t *inputs) {
  const json_t *allow = json_object_get(inputs, "allowlist");
  const json_t *backends = json_object_get(inputs, "backends");
  uint32_t required = 0;
  const char *bad = NULL;
  if (pool_json_capabilities(json_object_get(inputs, "required_capabilities"), &required, &bad) < 0)
    return NULL;
  size_t i;
  json_t *name;
  json_array_foreach(allow, i, name) {
    const json_t *b = json_object_get(backends, json_string_value(name));
    uint32_t caps = 0;
    if (!b || pool_json_capabilities(json_object_get(b, "capabilities"), &caps, &bad) < 0)
      return NULL;
    if (json_is_true(json_object_get(b, "available")) && (caps & required) == required)
      return json_string_value(name);
  }
  return NULL;
}

static int sign_body(const struct cordon_signing_key *key, json_t *body, char **document,
                     size_t *document_length, struct cordon_error **err) {
  _cleanup_free_ char *bytes = NULL;
  size_t n = 0;
  if (jcs_dump(body, &bytes, &n, err) < 0)
    return -1;
  return cordon_document_sign(key, bytes, n, document, document_length, err);
}

int pool_seal_placement(const struct cordon_signing_key *key, const struct pool_manifest *m,
                        const struct pool_recipe *recipe, const struct pool_effective *effective,
                        const json_t *selector_inputs, const char *chosen_backend, char **document,
                        size_t *document_length, struct cordon_error **err) {
  json_auto_t *body = json_pack(
      "{s:s,s:s,s:s,s:s,s:s,s:O,s:s,s:s,s:i}", "chosen_backend", chosen_backend,
      "effective_manifest_hash", effective->hash, "overrides_hash", recipe->overrides_hash, "pool",
      m->name, "pool_hash", m->pool_hash, "selector_inputs", selector_inputs, "template_hash",
      m->template_hash, "type", PLACEMENT_TYPE, "version", 1);
  if (!body)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "placement receipt");
  return sign_body(key, body, document, document_length, err);
}

int pool_seal_refusal(const struct cordon_signing_key *key, const char *pool_name,
                      const struct pool_manifest *m, const struct pool_recipe *recipe,
                      const struct pool_refusal *refusal, char **document, size_t *document_length,
                      struct cordon_error **err) {
  json_auto_t *body =
      json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:i}", "field", refusal->field, "message",
                refusal->message, "overrides_hash", recipe->overrides_hash, "pool", pool_name,
                "pool_hash", m ? m->pool_hash : "", "rule", pool_rule_name(refusal->rule),
                "template_hash", m ? m->template_hash : "", "type", REFUSAL_TYPE, "version", 1);
  if (!body)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "refusal receipt");
  return sign_body(key, body, document, document_length, err);
}

static bool digest_member(const json_t *body, const char *key, bool may_be_empty) {
  const json_t *v = json_object_get(body, key);
  if (!json_is_string(v))
    return false;
  return crypto_is_sha256_hex(json_string_value(v)) || (may_be_empty && json_string_length(v) == 0);
}

static bool string_member(const json_t *body, const char *key) {
  return pool_json_plain_string(json_object_get(body, key));
}

static int fail(char **reason, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(char **reason, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (vasprintf(reason, fmt, ap) < 0)
    *reason = NULL;
  va_end(ap);
  return 1;
}

int pool_receipt_check(const char *document, size_t length, const char *expected_kid,
                       json_t **body_out, char **reason, struct cordon_error **err) {
  *body_out = NULL;
  *reason = NULL;
  struct cordon_document_check check = {0};
  if (cordon_document_verify(document, length, expected_kid, &check, err) < 0)
    return -1;
  if (check.verdict == CORDON_VERDICT_FAILED) {
    int r = fail(reason, "%s", check.reason ? check.reason : "bad signature");
    cordon_document_check_clear(&check);
    return r;
  }
  json_auto_t *body = NULL;
  int r = jcs_parse(check.body_json, strlen(check.body_json), 0, "receipt body", &body, err);
  cordon_document_check_clear(&check);
  if (r < 0)
    return -1;
  const char *type = json_string_value(json_object_get(body, "type"));
  uint64_t version = 0;
  if (!pool_json_uint(json_object_get(body, "version"), &version) || version != 1)
    return fail(reason, "receipt: unknown version");
  if (type && strcmp(type, PLACEMENT_TYPE) == 0) {
    if (json_object_size(body) != 10 || !string_member(body, "chosen_backend") ||
        !digest_member(body, "effective_manifest_hash", false) ||
        !digest_member(body, "overrides_hash", false) || !string_member(body, "pool") ||
        !digest_member(body, "pool_hash", false) ||
        !json_is_object(json_object_get(body, "selector_inputs")) ||
        !digest_member(body, "template_hash", false) || !json_object_get(body, "signer"))
      return fail(reason, "placement receipt: unexpected members");
    const char *implied = choice_of(json_object_get(body, "selector_inputs"));
    if (!implied || strcmp(implied, json_string_value(json_object_get(body, "chosen_backend"))))
      return fail(reason,
                  "placement receipt: chosen_backend %s is not what its selector inputs "
                  "choose (%s)",
                  json_string_value(json_object_get(body, "chosen_backend")),
                  implied ? implied : "none");
  } else if (type && strcmp(type, REFUSAL_TYPE) == 0) {
    if (json_object_size(body) != 10 || !string_member(body, "field") ||
        !string_member(body, "message") || !digest_member(body, "overrides_hash", false) ||
        !string_member(body, "pool") || !digest_member(body, "pool_hash", true) ||
        !string_member(body, "rule") || !digest_member(body, "template_hash", true) ||
        !json_object_get(body, "signer"))
      return fail(reason, "refusal receipt: unexpected members");
  } else {
    return fail(reason, "receipt: not a pool receipt (type %s)", type ? type : "missing");
  }
  *body_out = steal_ptr(&body);
  return 0;
}
