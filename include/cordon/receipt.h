/* cordon — canonical JSON, signed documents and the verification verdict.
 *
 * Everything cordon hashes or signs is canonical JSON (RFC 8785). A signed document (a
 * selection receipt is one) is one line of canonical JSON followed by a newline:
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
#ifndef CORDON_RECEIPT_H
#define CORDON_RECEIPT_H

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

/* ---- selection receipts ------------------------------------------------------------------ */

/* A selection receipt (written by cordon_race_run, format in docs/formats.md) is a signed
 * document whose body binds a base snapshot, every candidate's terminal snapshot and scores,
 * the ranking profile and the winner. Verifying one checks, in this order: the document and
 * its signature (cordon_document_verify); the body's internal consistency (exact members,
 * well-formed digests, unique sorted task ids, the winner among the candidates, the losers
 * exactly the other candidates, the recorded closeness and the winner re-derived from the
 * scores and the profile); then, in the store, the base's and every candidate's manifest and
 * every blob they reference, each read without following links and re-hashed. A blob that is
 * absent makes the verdict INCOMPLETE, one that is present but not a readable regular file
 * (a symlink, a FIFO, a directory, an I/O error) UNREADABLE, one whose bytes do not hash to
 * its name FAILED. The verdict combines all of them by precedence. */

struct cordon_cas;

struct cordon_receipt_problem {
  enum cordon_verdict verdict;
  char *object;  /* a digest, or "receipt" */
  char *message; /* one line */
};

struct cordon_receipt_report {
  enum cordon_verdict verdict;
  char kid[CORDON_KEY_ID_LEN + 1]; /* the signer, when the document could be read */
  char *reason;                    /* one line: the first problem of the verdict; NULL when
                                      verified (unanchored: why it is not verified) */
  char base[65];                   /* "" until the body was read */
  char winner_snapshot[65];
  char *winner_task; /* NULL until the body was read */
  size_t n_candidates;
  uint64_t snapshots_checked; /* distinct manifests re-hashed */
  uint64_t blobs_checked;     /* distinct file blobs re-hashed */
  uint64_t bytes_checked;
  struct cordon_receipt_problem *problems; /* at most CORDON_RECEIPT_MAX_PROBLEMS kept */
  size_t n_problems;
  uint64_t problems_total;
};

#define CORDON_RECEIPT_MAX_PROBLEMS 64u

/* Verify a receipt held in memory against the store (which may be NULL only to check the
 * document alone: the verdict is then at best INCOMPLETE). Returns 0 when a verdict was reached
 * (a bad receipt is a verdict, not an error), < 0 only when the check could not run. */
CORDON_API int cordon_receipt_verify(struct cordon_cas *cas, const char *document, size_t length,
                                     const char *expected_kid, struct cordon_receipt_report *report,
                                     struct cordon_error **err);
/* The same for a file, opened without blocking: an absent file is INCOMPLETE, one that is not a
 * readable regular file UNREADABLE, one larger than CORDON_DOCUMENT_MAX FAILED, with
 * report->reason naming it. */
CORDON_API int cordon_receipt_verify_file(struct cordon_cas *cas, const char *path,
                                          const char *expected_kid,
                                          struct cordon_receipt_report *report,
                                          struct cordon_error **err);
CORDON_API void cordon_receipt_report_clear(struct cordon_receipt_report *report);

#ifdef __cplusplus
}
#endif
#endif
