/* cordon — isolation attestations (src/attest/): what each backend was seen to do on this host.
 *
 * `cordon attest` drives every backend it is given through the session API and probes, from
 * inside, each capability the backend declares (exec, file_rw, snapshot, network, gpu,
 * persistent_volumes) and the boundary around it (host processes and files invisible, not root
 * on the host, seccomp in force, no route off with egress none, memory and pids limits, its own
 * kernel). Each declared capability ends in exactly one of observed, refuted or unverifiable;
 * the boundary probes give the measured isolation tier. The result is a signed document
 * (include/cordon/signed.h; format in docs/formats.md) whose body has no wall-clock, run id or
 * chain position: attesting an unchanged host twice gives the same bytes. */
#ifndef CORDON_ATTEST_H
#define CORDON_ATTEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cordon/backend.h>
#include <cordon/error.h>
#include <cordon/keys.h>
#include <cordon/select.h>
#include <cordon/signed.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CORDON_ATTESTATION_TYPE "cordon.isolation-attestation.v1"

/* The capabilities an attestation partitions (caller_stdio is an interface detail, not
 * attested). */
#define CORDON_ATTEST_CAPABILITIES                                              \
  (CORDON_CAP_FILE_RW | CORDON_CAP_EXEC | CORDON_CAP_NETWORK | CORDON_CAP_GPU | \
   CORDON_CAP_SNAPSHOT | CORDON_CAP_PERSISTENT_VOLUMES)

struct cordon_context;
struct cordon_registry;

struct cordon_attest_options {
  const char *const *backends; /* names, NULL-terminated; NULL: every backend of the registry */
  /* A JSON object of host facts laid over the ones measured here; only names of the fixed
   * allowlist (docs/formats.md), string values. NULL: none. */
  const char *host_facts_json;
  const char *cordon_version; /* the "cordon_version" host fact; NULL: "unknown" */
  const char *key_dir;        /* NULL: cordon_key_dir() */
  const char *out_path;       /* NULL: not written (the document is returned) */
  bool no_audit;              /* do not append the sandbox.attested event */
};

struct cordon_attest_result {
  char *document; /* the signed document, newline-terminated */
  size_t length;
  char digest[65];                 /* SHA-256 of the document's bytes */
  char kid[CORDON_KEY_ID_LEN + 1]; /* the signer */
};

/* Probe, build, sign, write (atomically, when out_path is set) and record the attestation. */
CORDON_API int cordon_attest_run(struct cordon_context *ctx, const struct cordon_registry *reg,
                                 const struct cordon_attest_options *options,
                                 struct cordon_attest_result *result, struct cordon_error **err);
CORDON_API void cordon_attest_result_clear(struct cordon_attest_result *result);

struct cordon_attest_report {
  enum cordon_verdict verdict;
  char kid[CORDON_KEY_ID_LEN + 1]; /* the signer, when the document could be read */
  char *reason;                    /* one line; NULL when verified */
  char host_facts_digest[65];      /* "" until the body was read */
  size_t n_backends;
};

/* The one verdict of an attestation, shared by `cordon attest verify` and the library: the
 * signed document (cordon_document_verify), then its body: the exact members and type, host
 * facts from the allowlist and their digest, backends sorted by name, each with declared,
 * observed, refuted and unverifiable sorted, disjoint and together exactly declared, each
 * capability's class re-derived from its probes, probes sorted, and the tier re-derived from
 * the boundary probes. Returns 0 when a verdict was reached, < 0 only when the check could not
 * run. */
CORDON_API int cordon_attest_verify(const char *document, size_t length, const char *expected_kid,
                                    struct cordon_attest_report *report, struct cordon_error **err);
/* The same for a file: absent INCOMPLETE, not a readable regular file UNREADABLE, larger than
 * CORDON_DOCUMENT_MAX FAILED. */
CORDON_API int cordon_attest_verify_file(const char *path, const char *expected_kid,
                                         struct cordon_attest_report *report,
                                         struct cordon_error **err);
CORDON_API void cordon_attest_report_clear(struct cordon_attest_report *report);

/* The selector's view of an attestation file: cordon_attest_verify_file's verdict in report,
 * and only when it is VERIFIED, the document's SHA-256 and one row per backend
 * (cordon_select_attested_free). */
CORDON_API int cordon_attest_select_rows(const char *path, const char *expected_kid,
                                         struct cordon_attest_report *report, char sha256[65],
                                         struct cordon_select_attested **rows, size_t *n,
                                         struct cordon_error **err);

#ifdef __cplusplus
}
#endif
#endif
