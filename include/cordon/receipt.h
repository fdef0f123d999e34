/* cordon — selection receipts: verifying the signed document a race seals (src/race/receipt.c).
 * Documents, canonical JSON and verdicts are in include/cordon/signed.h. */
#ifndef CORDON_RECEIPT_H
#define CORDON_RECEIPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cordon/error.h>
#include <cordon/keys.h>
#include <cordon/signed.h>

#ifdef __cplusplus
extern "C" {
#endif

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
  /* CORDON_RACE_OUTCOME_WINNER or _NO_PASS (winner_task then stays NULL); NULL until the body
   * was read. A receipt written before outcomes existed reads as a winner, every candidate
   * ranked, as allow_no_pass. */
  const char *outcome;
  bool allow_no_pass;
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
