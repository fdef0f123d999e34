/* Signed documents (include/cordon/signed.h): sealing a canonical body with the install key,
 * and checking a document's exact form, signer and signature. Also the verdict precedence
 * shared by every verifier. A document is untrusted input: it is read here, bounded, and
 * nothing in it is trusted before its bytes have been shown to be the one canonical spelling
 * and its signature to hold. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cordon/signed.h>

#include "base/cleanup.h"
#include "crypto/digest.h"
#include "crypto/jcs.h"
#include "crypto/keys.h"
#include "crypto/signed.h"

const char *cordon_verdict_name(enum cordon_verdict verdict) {
  switch (verdict) {
  case CORDON_VERDICT_VERIFIED: return "verified";
  case CORDON_VERDICT_FAILED: return "failed";
  case CORDON_VERDICT_INCOMPLETE: return "incomplete";
  case CORDON_VERDICT_UNANCHORED: return "unanchored";
  case CORDON_VERDICT_UNREADABLE: return "unreadable";
  }
  return "unknown";
}

static int verdict_rank(enum cordon_verdict v) {
  switch (v) {
  case CORDON_VERDICT_VERIFIED: return 0;
  case CORDON_VERDICT_UNANCHORED: return 1;
  case CORDON_VERDICT_INCOMPLETE: return 2;
  case CORDON_VERDICT_UNREADABLE: return 3;
  case CORDON_VERDICT_FAILED: return 4;
  }
  return 4; /* an unknown verdict is a failure */
}

enum cordon_verdict cordon_verdict_worse(enum cordon_verdict a, enum cordon_verdict b) {
  int ra = verdict_rank(a), rb = verdict_rank(b);
  if (ra == 4 && a != CORDON_VERDICT_FAILED)
    a = CORDON_VERDICT_FAILED;
  if (rb == 4 && b != CORDON_VERDICT_FAILED)
    b = CORDON_VERDICT_FAILED;
  return ra >= rb ? a : b;
}

int cordon_json_canonicalize(const char *text, size_t length, char **out, size_t *out_length,
                             struct cordon_error **err) {
  return jcs_canonicalize(text, length, CORDON_DOCUMENT_MAX, "JSON", out, out_length, err);
}

int cordon_document_sign(const struct cordon_signing_key *key, const char *body_json, size_t length,
                         char **document, size_t *document_length, struct cordon_error **err) {
  json_t *body = NULL;
  if (jcs_parse(body_json, length, CORDON_DOCUMENT_MAX, "document body", &body, err) < 0)
    return -1;
  int r = -1;
  json_t *doc = NULL;
  char *body_bytes = NULL;
  size_t body_length = 0;
  if (!json_is_object(body) || json_object_get(body, "signer")) {
    cordon_error_set(err, CORDON_ERR_INVALID, 0,
                     "document body must be a JSON object without a \"signer\" member");
    goto out;
  }
  json_t *jwk = keys_public_jwk(cordon_signing_key_public(key));
  if (!jwk || json_object_set_new(
                  body, "signer",
                  json_pack("{s:o, s:s}", "jwk", jwk, "kid", cordon_signing_key_id(key))) < 0) {
    cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "document");
    goto out;
  }
  if (jcs_dump(body, &body_bytes, &body_length, err) < 0)
    goto out;
  uint8_t sig[CORDON_ED25519_SIGNATURE_LEN];
  if (cordon_signing_key_sign(key, body_bytes, body_length, sig, err) < 0)
    goto out;
  char value[128];
  crypto_base64url_encode(sig, sizeof(sig), value);
  doc = json_pack("{s:O, s:{s:s, s:s, s:s}}", "body", body, "signature", "alg", "EdDSA", "kid",
                  cordon_signing_key_id(key), "value", value);
  if (!doc) {
    cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "document");
    goto out;
  }
  struct jcs_buf b = {0};
  if (jcs_serialize(doc, &b, err) < 0 || jcs_buf_append(&b, "\n", 1) < 0) {
    jcs_buf_free(&b);
    cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "document");
    goto out;
  }
  if (document_length)
    *document_length = b.length;
  *document = jcs_buf_steal(&b);
  r = 0;
out:
  free(body_bytes);
  json_decref(doc);
  json_decref(body);
  return r;
}

void cordon_document_check_clear(struct cordon_document_check *check) {
  if (!check)
    return;
  free(check->body_json);
  free(check->reason);
  memset(check, 0, sizeof(*check));
}

static int reject(struct cordon_document_check *check, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int reject(struct cordon_document_check *check, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *reason = NULL;
  if (vasprintf(&reason, fmt, ap) < 0)
    reason = NULL;
  va_end(ap);
  check->verdict = CORDON_VERDICT_FAILED;
  free(check->body_json);
  check->body_json = NULL;
  free(check->reason);
  check->reason = reason ? reason : strdup("document rejected");
  return check->reason ? 0 : -1;
}

static bool exact_members(const json_t *object, size_t n, ...) {
  if (!json_is_object(object) || json_object_size(object) != n)
    return false;
  va_list ap;
  va_start(ap, n);
  bool ok = true;
  for (size_t i = 0; i < n && ok; i++)
    ok = json_object_get(object, va_arg(ap, const char *)) != NULL;
  va_end(ap);
  return ok;
}

/* The body's canonical bytes, cut from the canonical document they were just shown to be part
 * of: {"body":BODY,"signature":SIG} ("body" sorts first), SIG dumped again (a few hundred
 * bytes) rather than BODY (all the rest). */
static int canonical_body(const char *canonical, size_t length, json_t *sig, char **out,
                          size_t *out_length, struct cordon_error **err) {
  static const char head[] = "{\"body\":", middle[] = ",\"signature\":";
  _cleanup_free_ char *sig_bytes = NULL;
  size_t sig_length = 0;
  if (jcs_dump(sig, &sig_bytes, &sig_length, err) < 0)
    return -1;
  size_t fixed = strlen(head) + strlen(middle) + sig_length + 1;
  if (length <= fixed || memcmp(canonical, head, strlen(head)) ||
      memcmp(canonical + length - 1 - sig_length - strlen(middle), middle, strlen(middle)) ||
      memcmp(canonical + length - 1 - sig_length, sig_bytes, sig_length) ||
      canonical[length - 1] != '}')
    return cordon_error_set(err, CORDON_ERR_SYSTEM, EINVAL, "document: body not found");
  *out_length = length - fixed;
  if (!(*out = strndup(canonical + strlen(head), *out_length)))
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "document");
  return 0;
}

int cordon_document_verify(const char *document, size_t length, const char *expected_kid,
                           struct cordon_document_check *check, struct cordon_error **err) {
  return crypto_document_verify_tree(document, length, expected_kid, check, NULL, err);
}

int crypto_document_verify_tree(const char *document, size_t length, const char *expected_kid,
                                struct cordon_document_check *check, json_t **body_tree,
                                struct cordon_error **err) {
  memset(check, 0, sizeof(*check));
  if (body_tree)
    *body_tree = NULL;
  if (length == 0 || document[length - 1] != '\n')
    return reject(check, "not a signed document: it must be one line ending in a newline");
  json_t *doc = NULL;
  struct cordon_error *perr = NULL;
  if (jcs_parse(document, length - 1, CORDON_DOCUMENT_MAX, "document", &doc, &perr) < 0) {
    int r = reject(check, "%s", perr ? perr->message : "not JSON");
    cordon_error_free(perr);
    return r;
  }
  int r = -1;
  _cleanup_free_ char *canonical = NULL, *body_bytes = NULL;
  size_t canonical_length = 0, body_length = 0;
  json_t *body = json_object_get(doc, "body"), *sig = json_object_get(doc, "signature");
  if (!exact_members(doc, 2, "body", "signature") || !json_is_object(body) ||
      !exact_members(sig, 3, "alg", "kid", "value")) {
    r = reject(check, "not a signed document: expected {\"body\":{...},\"signature\":"
                      "{\"alg\",\"kid\",\"value\"}}");
    goto out;
  }
  if (jcs_dump(doc, &canonical, &canonical_length, &perr) < 0 || canonical_length != length - 1 ||
      memcmp(canonical, document, canonical_length)) {
    r = reject(check, "%s", perr ? perr->message : "the document is not in canonical form");
    cordon_error_free(perr);
    goto out;
  }
  json_t *signer = json_object_get(body, "signer");
  if (!exact_members(signer, 2, "jwk", "kid") || !json_is_string(json_object_get(signer, "kid"))) {
    r = reject(check, "the body names no signer ({\"jwk\",\"kid\"})");
    goto out;
  }
  uint8_t public_key[CORDON_ED25519_PUBLIC_LEN];
  if (keys_parse_public_jwk(json_object_get(signer, "jwk"), public_key, check->kid, &perr) < 0) {
    r = reject(check, "signer: %s", perr ? perr->message : "bad JWK");
    cordon_error_free(perr);
    goto out;
  }
  const char *alg = json_string_value(json_object_get(sig, "alg"));
  const char *sig_kid = json_string_value(json_object_get(sig, "kid"));
  const char *value = json_string_value(json_object_get(sig, "value"));
  if (strcmp(json_string_value(json_object_get(signer, "kid")), check->kid) || !sig_kid ||
      strcmp(sig_kid, check->kid)) {
    r = reject(check, "the key ids do not match the signer's key %s", check->kid);
    goto out;
  }
  uint8_t signature[CORDON_ED25519_SIGNATURE_LEN];
  if (!alg || strcmp(alg, "EdDSA") || !value ||
      crypto_base64url_decode(value, strlen(value), signature, sizeof(signature)) !=
          CORDON_ED25519_SIGNATURE_LEN) {
    r = reject(check, "the signature is not an EdDSA signature in base64url");
    goto out;
  }
  if (canonical_body(document, length - 1, sig, &body_bytes, &body_length, err) < 0)
    goto out;
  if (cordon_ed25519_verify(public_key, body_bytes, body_length, signature, &perr) < 0) {
    r = reject(check, "bad signature by %s", check->kid);
    cordon_error_free(perr);
    goto out;
  }
  if (expected_kid && strcmp(expected_kid, check->kid)) {
    r = reject(check, "signed by %s, not by the expected key %s", check->kid, expected_kid);
    goto out;
  }
  check->verdict = expected_kid ? CORDON_VERDICT_VERIFIED : CORDON_VERDICT_UNANCHORED;
  check->body_json = steal_ptr(&body_bytes);
  if (body_tree)
    *body_tree = json_incref(body);
  r = 0;
out:
  json_decref(doc);
  if (r < 0 && err && !*err)
    cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "document");
  return r;
}
