/* What signed.c offers the library beside its public API (include/cordon/signed.h). */
#ifndef CORDON_CRYPTO_SIGNED_H
#define CORDON_CRYPTO_SIGNED_H

#include <jansson.h>

#include <cordon/signed.h>

/* cordon_document_verify, and when a verdict other than FAILED was reached and body_tree is
 * not NULL, the body as parsed (a reference the caller drops), so a verifier that reads the
 * body does not parse check->body_json again. */
int crypto_document_verify_tree(const char *document, size_t length, const char *expected_kid,
                                struct cordon_document_check *check, json_t **body_tree,
                                struct cordon_error **err);

#endif
