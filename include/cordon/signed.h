/* cordon — canonical JSON, signed documents and the verification verdict (src/crypto/signed.c).
 *
 * Everything cordon hashes or signs is canonical JSON (RFC 8785). A signed document (a
 * selection receipt is one, include/cordon/receipt.h) is one line of canonical JSON followed by
 * a newline:
 *
 *   {"body":BODY,"signature":{"alg":"EdDSA","kid":KID,"value":SIG}}
 *
 * BODY is a JSON object that carries its signer, "signer":{"jwk":JWK,"kid":KID} (the public
 * JWK and its RFC 7638 thumbprint), so the signer is covered by the signature; SIG is the
 * base64url Ed25519 signature of the canonical bytes of BODY. A document has exactly one valid
 * spelling: any other bytes (whitespace, member order, escapes, base64 padding bits) fail.
 *
 * Verdicts, one computed once and shared by the CLI and the library, double as exit codes, and
 * combine by precedence failed > unreadable > incomplete > unanchored > verified. */
#ifndef CORDON_SIGNED_H
#define CORDON_SIGNED_H

#include <stddef.h>
#include <stdint.h>

#include <cordon/error.h>
#include <cordon/keys.h>

#ifdef __cplusplus
extern "C" {
#endif

enum cordon_verdict {
  CORDON_VERDICT_VERIFIED = 0,   /* everything checks and the signer is the expected key */
  CORDON_VERDICT_FAILED = 1,     /* bad signature, tampered or inconsistent content */
  CORDON_VERDICT_INCOMPLETE = 2, /* something the document names is absent */
  CORDON_VERDICT_UNANCHORED = 3, /* everything checks but no expected key id was given */
  CORDON_VERDICT_UNREADABLE = 4, /* something is present but cannot be read safely */
};

CORDON_API const char *cordon_verdict_name(enum cordon_verdict verdict);
/* The verdict that wins by precedence: failed > unreadable > incomplete > unanchored >
 * verified. */
CORDON_API enum cordon_verdict cordon_verdict_worse(enum cordon_verdict a, enum cordon_verdict b);

#define CORDON_DOCUMENT_MAX (16u * 1024u * 1024u)

/* JSON text → its canonical bytes (RFC 8785; malloc'd, NUL-terminated). Input is bounded by
 * CORDON_DOCUMENT_MAX; duplicate names and integers beyond ±2^53 are refused. */
CORDON_API int cordon_json_canonicalize(const char *text, size_t length, char **out,
                                        size_t *out_length, struct cordon_error **err);

/* Sign body_json (a JSON object without a "signer" member) with key: the signer is added to
 * the body, and the document (newline-terminated) returned in *document. */
CORDON_API int cordon_document_sign(const struct cordon_signing_key *key, const char *body_json,
                                    size_t length, char **document, size_t *document_length,
                                    struct cordon_error **err);

struct cordon_document_check {
  enum cordon_verdict verdict;     /* VERIFIED, UNANCHORED or FAILED */
  char kid[CORDON_KEY_ID_LEN + 1]; /* the signer, when the document could be read */
  char *body_json;                 /* the canonical body when the signature is valid, else NULL */
  char *reason;                    /* one line; NULL when verified or unanchored */
};

/* Check a document's form and signature. expected_kid NULL gives UNANCHORED at best. Returns
 * 0 when a verdict was reached (a malformed document is a FAILED verdict, not an error), < 0
 * only when the check itself could not run. */
CORDON_API int cordon_document_verify(const char *document, size_t length, const char *expected_kid,
                                      struct cordon_document_check *check,
                                      struct cordon_error **err);
CORDON_API void cordon_document_check_clear(struct cordon_document_check *check);

#ifdef __cplusplus
}
#endif

#endif
