/* libFuzzer target for the other untrusted inputs of this module: audit log lines (the fast
 * checker and the parser behind `audit show`, which must agree on well-formed lines), signed
 * documents, and ranking profiles. The audit key and signer are fixed so that the HMAC and
 * signature paths are reached too. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cordon/race.h>
#include <cordon/receipt.h>

#include "audit/entry.h"
#include "crypto/digest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static struct crypto_hmac *key;
  if (!key &&
      crypto_hmac_new((const uint8_t *)"fuzz-audit-key-0123456789abcdef!", 32, &key, NULL) < 0)
    abort();
  const char *text = (const char *)data;

  char prev[65], hmac[65], reason[AUDIT_REASON_MAX];
  enum cordon_audit_problem p = audit_line_check(key, text, size, prev, hmac, reason);
  enum cordon_audit_problem shape = audit_line_check(NULL, text, size, prev, hmac, reason);
  if (p == CORDON_AUDIT_OK && shape != CORDON_AUDIT_OK)
    abort();
  json_t *entry = audit_line_parse(text, size, reason);
  /* A line the verifier accepts is a line `show` can read. */
  if (shape == CORDON_AUDIT_OK && !entry)
    abort();
  json_decref(entry);

  struct cordon_document_check check;
  if (cordon_document_verify(text, size, NULL, &check, NULL) == 0) {
    if (check.verdict == CORDON_VERDICT_UNANCHORED && !check.body_json)
      abort();
    cordon_document_check_clear(&check);
  }

  struct cordon_rank_profile *profile = NULL;
  if (cordon_rank_profile_parse(text, size, &profile, NULL) == 0) {
    char *json = NULL;
    if (cordon_rank_profile_to_json(profile, &json, NULL) < 0)
      abort();
    free(json);
    cordon_rank_profile_free(profile);
  }
  return 0;
}
