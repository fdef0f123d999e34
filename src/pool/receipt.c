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

#include <cordon/select.h>
#include <cordon/signed.h>

#include "base/cleanup.h"
#include "crypto/digest.h"
#include "crypto/jcs.h"
#include "pool/internal.h"
#include "pool/pool.h"

#define PLACEMENT_TYPE "cordon.pool.placement"
#define REFUSAL_TYPE "cordon.pool.refusal"

static int fail(char **reason, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static const struct pool_backend_status *status_of(const struct pool_backend_status *status,
                                                   size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(status[i].name, name) == 0)
      return &status[i];
  return NULL;
}

int pool_requirements(const json_t *effective, struct cordon_select_requirements *out,
                      struct cordon_error **err) {
  memset(out, 0, sizeof(*out));
  uint32_t caps = 0;
  const char *bad = NULL;
  uint64_t memory = 0, pids = 0;
  const char *net = json_string_value(json_object_get(effective, "net"));
  enum cordon_egress egress = CORDON_EGRESS_NONE;
  const json_t *read_only = json_object_get(effective, "read_only");
  const json_t *hidden = json_object_get(effective, "hidden");
  if (pool_json_capabilities(json_object_get(effective, "capabilities"), &caps, &bad) < 0 || !net ||
      cordon_egress_parse(net, &egress) < 0 ||
      !pool_json_uint(json_object_get(effective, "memory"), &memory) ||
      !pool_json_uint(json_object_get(effective, "pids"), &pids) || !json_is_array(read_only) ||
      !json_is_array(hidden))
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "effective manifest: malformed");
  /* The policy the session will be created with (pool/session.c), so the selector asks for
   * exactly the confinement the session layer will require. */
  const char *one[] = {"", NULL};
  struct cordon_policy policy = {.egress = egress};
  policy.read_only = json_array_size(read_only) ? one : NULL;
  policy.hidden = json_array_size(hidden) ? one : NULL;
  policy.limits.memory_bytes = memory;
  policy.limits.pids = pids;
  out->capabilities = caps | CORDON_CAP_EXEC;
  out->features = cordon_policy_features(&policy);
  out->min_tier = CORDON_TIER_NONE;
  out->net_set = true;
  out->net = egress;
  out->allow_unverifiable = true;
  return 0;
}

int pool_selector_inputs(const json_t *effective, const struct pool_backend_status *status,
                         size_t n_status, const struct pool_attestation *attestation,
                         json_t **inputs, const char **chosen, char **reasons,
                         struct cordon_error **err) {
  *inputs = NULL;
  *chosen = NULL;
  *reasons = NULL;
  const json_t *allow = json_object_get(effective, "backend_allowlist");
  struct cordon_select_input in = {0};
  if (!json_is_array(allow))
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "effective manifest: malformed");
  if (pool_requirements(effective, &in.requirements, err) < 0)
    return -1;
  _cleanup_free_ struct cordon_select_candidate *candidates =
      calloc(json_array_size(allow) + 1, sizeof(*candidates));
  if (!candidates)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "selector inputs");
  size_t i;
  json_t *name;
  json_array_foreach(allow, i, name) {
    const char *n = json_string_value(name);
    if (!n)
      return cordon_error_set(err, CORDON_ERR_INVALID, 0, "effective manifest: malformed");
    struct cordon_select_candidate *c = &candidates[i];
    const struct pool_backend_status *s = status_of(status, n_status, n);
    c->name = n;
    if (s) {
      c->available = s->available;
      c->declared = s->capabilities;
      c->enforces = s->enforces;
      c->tier = s->tier;
      c->egress = s->egress;
    }
    for (size_t r = 0; attestation && attestation->sha256 && r < attestation->n_rows; r++)
      if (attestation->rows[r].name && !strcmp(attestation->rows[r].name, n))
        c->attested = &attestation->rows[r];
  }
  in.candidates = candidates;
  in.n_candidates = json_array_size(allow);
  if (attestation && attestation->sha256) {
    in.attestation_sha256 = attestation->sha256;
    in.attestation_kid = attestation->kid;
  }
  struct cordon_select_result result = {0};
  if (cordon_select(&in, &result, err) < 0)
    return -1;
  int r =
      jcs_parse(result.inputs_json, strlen(result.inputs_json), 0, "selector inputs", inputs, err);
  for (size_t k = 0; r == 0 && !result.chosen && k < result.n_rejections; k++) {
    char *joined = NULL;
    if (asprintf(&joined, "%s%s%s: %s", *reasons ? *reasons : "", *reasons ? "; " : "",
                 result.rejections[k].backend, result.rejections[k].reason) < 0)
      r = cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "selector reasons");
    else {
      free(*reasons);
      *reasons = joined;
    }
  }
  if (r == 0 && result.chosen) {
    json_array_foreach(allow, i, name) {
      if (!strcmp(json_string_value(name), result.chosen))
        *chosen = json_string_value(name); /* borrowed from effective */
    }
  }
  cordon_select_result_clear(&result);
  if (r < 0) {
    json_decref(*inputs);
    *inputs = NULL;
    free(*reasons);
    *reasons = NULL;
  }
  return r;
}

int pool_selector_inputs_match(const json_t *effective, const json_t *inputs, char **why,
                               struct cordon_error **err) {
  *why = NULL;
  struct cordon_select_input in = {0};
  if (pool_requirements(effective, &in.requirements, err) < 0)
    return -1;
  struct cordon_select_result result = {0};
  if (cordon_select(&in, &result, err) < 0)
    return -1;
  json_auto_t *expected = NULL;
  int r = jcs_parse(result.inputs_json, strlen(result.inputs_json), 0, "selector inputs", &expected,
                    err);
  cordon_select_result_clear(&result);
  if (r < 0)
    return -1;
  if (!json_equal(json_object_get(expected, "requirements"),
                  json_object_get(inputs, "requirements")))
    return fail(why, "selector_inputs: requirements are not the effective manifest's");
  const json_t *allow = json_object_get(effective, "backend_allowlist");
  const json_t *candidates = json_object_get(inputs, "candidates");
  bool same = json_is_array(allow) && json_is_array(candidates) &&
              json_array_size(allow) == json_array_size(candidates);
  for (size_t i = 0; same && i < json_array_size(allow); i++)
    same = json_equal(json_array_get(allow, i),
                      json_object_get(json_array_get(candidates, i), "name"));
  return same ? 0 : fail(why, "selector_inputs: candidates are not the allowlist, in its order");
}

/* ---- replay: a recorded selector_inputs object back into cordon_select's inputs ---------- */

static bool capabilities_of(const json_t *a, uint32_t *out) {
  *out = 0;
  if (!json_is_array(a))
    return false;
  size_t i;
  json_t *v;
  json_array_foreach(a, i, v) {
    uint32_t bit = 0;
    struct cordon_error *e = NULL;
    if (!json_is_string(v) || strchr(json_string_value(v), ',') ||
        cordon_capabilities_parse(json_string_value(v), &bit, &e) < 0) {
      cordon_error_free(e);
      return false;
    }
    *out |= bit;
  }
  return true;
}

static bool features_of(const json_t *a, uint32_t *out) {
  *out = 0;
  if (!json_is_array(a))
    return false;
  size_t i;
  json_t *v;
  json_array_foreach(a, i, v) {
    uint32_t bit = 0;
    for (unsigned f = 0; f < CORDON_FEATURE_COUNT && !bit; f++)
      if (json_is_string(v) && !strcmp(json_string_value(v), cordon_feature_name(1u << f)))
        bit = 1u << f;
    if (!bit)
      return false;
    *out |= bit;
  }
  return true;
}

static bool egress_of(const json_t *a, uint32_t *out) {
  *out = 0;
  if (!json_is_array(a))
    return false;
  size_t i;
  json_t *v;
  json_array_foreach(a, i, v) {
    enum cordon_egress e;
    if (!json_is_string(v) || cordon_egress_parse(json_string_value(v), &e) < 0)
      return false;
    *out |= 1u << e;
  }
  return true;
}

static bool tier_of(const json_t *v, enum cordon_isolation_tier *out) {
  return json_is_string(v) && cordon_tier_parse(json_string_value(v), out) == 0;
}

int pool_selection_replay(const json_t *inputs, char **chosen, struct cordon_error **err) {
  *chosen = NULL;
  const json_t *req = json_object_get(inputs, "requirements");
  const json_t *att = json_object_get(inputs, "attestation");
  const json_t *list = json_object_get(inputs, "candidates");
  const char *type = json_string_value(json_object_get(inputs, "type"));
  struct cordon_select_input in = {0};
  struct cordon_select_requirements *r = &in.requirements;
  const json_t *net = json_object_get(req, "net");
  if (!type || strcmp(type, CORDON_SELECTOR_INPUTS_TYPE) || !json_is_array(list) ||
      !capabilities_of(json_object_get(req, "capabilities"), &r->capabilities) ||
      !features_of(json_object_get(req, "features"), &r->features) ||
      !tier_of(json_object_get(req, "min_tier"), &r->min_tier) ||
      !json_is_boolean(json_object_get(req, "allow_unverifiable")) ||
      !(json_is_null(net) ||
        (json_is_string(net) && cordon_egress_parse(json_string_value(net), &r->net) == 0)) ||
      !(json_is_null(att) || (json_is_string(json_object_get(att, "sha256")) &&
                              json_is_string(json_object_get(att, "kid")))))
    return 1;
  r->net_set = json_is_string(net);
  r->allow_unverifiable = json_is_true(json_object_get(req, "allow_unverifiable"));
  if (!json_is_null(att)) {
    in.attestation_sha256 = json_string_value(json_object_get(att, "sha256"));
    in.attestation_kid = json_string_value(json_object_get(att, "kid"));
  }
  size_t n = json_array_size(list);
  _cleanup_free_ struct cordon_select_candidate *candidates = calloc(n + 1, sizeof(*candidates));
  _cleanup_free_ struct cordon_select_attested *rows = calloc(n + 1, sizeof(*rows));
  if (!candidates || !rows)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "selector replay");
  size_t i;
  json_t *c;
  json_array_foreach(list, i, c) {
    struct cordon_select_candidate *k = &candidates[i];
    const json_t *a = json_object_get(c, "attested");
    k->name = json_string_value(json_object_get(c, "name"));
    if (!k->name || !json_is_boolean(json_object_get(c, "available")) ||
        !capabilities_of(json_object_get(c, "declared"), &k->declared) ||
        !features_of(json_object_get(c, "enforces"), &k->enforces) ||
        !tier_of(json_object_get(c, "tier"), &k->tier) ||
        !egress_of(json_object_get(c, "egress"), &k->egress))
      return 1;
    k->available = json_is_true(json_object_get(c, "available"));
    if (json_is_null(a))
      continue;
    struct cordon_select_attested *row = &rows[i];
    if (!capabilities_of(json_object_get(a, "observed"), &row->observed) ||
        !capabilities_of(json_object_get(a, "refuted"), &row->refuted) ||
        !capabilities_of(json_object_get(a, "unverifiable"), &row->unverifiable) ||
        !tier_of(json_object_get(a, "tier"), &row->tier) ||
        !json_is_boolean(json_object_get(a, "boundary_measured")))
      return 1;
    row->boundary_measured = json_is_true(json_object_get(a, "boundary_measured"));
    row->name = (char *)k->name; /* not freed: rows are freed as one block */
    k->attested = row;
  }
  in.candidates = candidates;
  in.n_candidates = n;
  struct cordon_select_result result = {0};
  struct cordon_error *bad = NULL;
  if (cordon_select(&in, &result, &bad) < 0) {
    bool usage = bad && bad->kind == CORDON_ERR_USAGE; /* a duplicate or empty name */
    if (!usage) {
      if (err && !*err)
        *err = bad;
      else
        cordon_error_free(bad);
      return -1;
    }
    cordon_error_free(bad);
    return 1;
  }
  /* Whatever the parse let through or dropped, the recorded bytes must be exactly what these
   * inputs give. */
  _cleanup_free_ char *recorded = NULL;
  size_t length = 0;
  int rc = jcs_dump(inputs, &recorded, &length, err);
  if (rc == 0 &&
      (length != strlen(result.inputs_json) || memcmp(recorded, result.inputs_json, length)))
    rc = 1;
  if (rc == 0 && result.chosen)
    *chosen = steal_ptr(&result.chosen);
  cordon_select_result_clear(&result);
  return rc;
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
    _cleanup_free_ char *implied = NULL;
    int replayed = pool_selection_replay(json_object_get(body, "selector_inputs"), &implied, err);
    if (replayed < 0)
      return -1;
    if (replayed == 1)
      return fail(reason, "placement receipt: selector_inputs is not a selector inputs object");
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
