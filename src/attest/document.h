/* The attestation as a value (document.c, pure): probes, the partition of a backend's declared
 * capabilities that its probes imply, the measured tier, the body as canonical JSON, and the
 * check of a body read back. */
#ifndef CORDON_ATTEST_DOCUMENT_H
#define CORDON_ATTEST_DOCUMENT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include <cordon/attest.h>
#include <cordon/select.h>

enum attest_verdict {
  ATTEST_OBSERVED = 0,
  ATTEST_REFUTED,
  ATTEST_UNVERIFIABLE,
};

/* The capability name of the probes that measure the boundary rather than a capability. */
#define ATTEST_BOUNDARY "boundary"

/* The boundary probes the tier is derived from (docs/formats.md). */
#define ATTEST_HOST_PROCESSES_INVISIBLE "host_processes_invisible"
#define ATTEST_HOST_FILES_INVISIBLE "host_files_invisible"
#define ATTEST_NOT_ROOT_ON_HOST "not_root_on_host"
#define ATTEST_SECCOMP_IN_FORCE "seccomp_in_force"
#define ATTEST_MEMORY_LIMIT "memory_limit_enforced"
#define ATTEST_PIDS_LIMIT "pids_limit_enforced"
#define ATTEST_OWN_KERNEL "own_kernel"
#define ATTEST_NO_ROUTE_OFF "no_route_off"
/* Not a probe but the record of the backend's declared tier (reason tier_NAME), the cap of the
 * measured one. */
#define ATTEST_DECLARED_TIER "declared_tier"

/* Evidence is short: longer text is cut. */
#define ATTEST_EVIDENCE_MAX 200

struct attest_probe {
  char *name;
  char *capability; /* a capability name, or ATTEST_BOUNDARY */
  enum attest_verdict verdict;
  char *reason;   /* a reason code: [a-z0-9_]+ */
  char *evidence; /* what was seen, deterministic */
};

struct attest_backend {
  char *name;
  uint32_t declared; /* CORDON_CAP_* within CORDON_ATTEST_CAPABILITIES */
  struct attest_probe *probes;
  size_t n_probes;
};

const char *attest_verdict_name(enum attest_verdict verdict);

/* Add a probe (evidence formatted, cut at ATTEST_EVIDENCE_MAX). -1 only on ENOMEM. */
int attest_probe_add(struct attest_backend *b, const char *name, const char *capability,
                     enum attest_verdict verdict, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
void attest_backend_clear(struct attest_backend *b);

/* What the probes say of each declared capability: refuted when any of its probes was
 * refuted, observed when every one (at least one) was observed, else unverifiable. */
void attest_partition(const struct attest_backend *b, uint32_t *observed, uint32_t *refuted,
                      uint32_t *unverifiable);
/* 0 when the three sets are disjoint and together exactly declared. */
int attest_partition_check(uint32_t declared, uint32_t observed, uint32_t refuted,
                           uint32_t unverifiable);
/* The tier the boundary probes show: vm (own kernel, host processes and files invisible, not
 * root on the host), container (host processes and files invisible, not root, and seccomp in
 * force or a kernel of its own), process (host files invisible, not root), else none; never
 * above the declared_tier record when there is one. Limits and no_route_off are recorded but
 * do not count: they bound resources and egress, not what the sandbox can reach. */
enum cordon_isolation_tier attest_tier(const struct attest_probe *probes, size_t n);

/* The body (without signer) as canonical JSON: backends and probes sorted, every probe's
 * capability declared (or boundary), every declared capability probed, the partition
 * checked. host_facts is a JSON object of strings. */
int attest_body_build(json_t *host_facts, struct attest_backend *backends, size_t n,
                      char **body_json, struct cordon_error **err);

/* Check a signed body (with signer) read back; 0 valid, else -1 with *reason (malloc'd). */
int attest_body_check(const json_t *body, char host_facts_digest[65], size_t *n_backends,
                      char **reason);

/* The selector's rows of a body attest_body_check accepted (malloc'd, names too); -1 on
 * ENOMEM or a body that was not checked. */
int attest_body_rows(const json_t *body, struct cordon_select_attested **rows, size_t *n);

/* The host facts' names, in order: the allowlist. */
extern const char *const attest_host_fact_names[];
bool attest_host_fact_allowed(const char *name);

#endif
