/* cordon — the selector: which backend a piece of work runs on, as a pure function.
 *
 * Inputs: the requirements (capabilities, policy features, a minimum isolation tier, an egress
 * class, whether unverifiable claims are accepted), the candidate backends in cost order
 * (cheapest first) with their declarations, and, for each, its row of a verified isolation
 * attestation (include/cordon/attest.h) or none. Output: the first candidate that fits, the
 * canonical JSON of the inputs (`selector_inputs`, RFC 8785, format in docs/formats.md) and its
 * SHA-256, and one reason per rejected candidate. Same inputs, same bytes, same digest: a
 * placement receipt seals the digest.
 *
 * Rules, per candidate: it must be available; declare every required capability and enforce
 * every required feature; offer the egress class asked (`net` also requires the `network`
 * capability, whose probe is what tests a class); declare at least the minimum tier. Then the
 * evidence: a required capability the attestation refuted excludes the candidate, as does a
 * measured tier below the minimum where the boundary was measured; a required capability that
 * is unverifiable (or a candidate absent from the attestation, or no attestation at all: every
 * declared claim is then unverifiable), and a tier the boundary probes could not measure, are
 * accepted only with allow_unverifiable. */
#ifndef CORDON_SELECT_H
#define CORDON_SELECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cordon/backend.h>
#include <cordon/error.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CORDON_SELECTOR_INPUTS_TYPE "cordon.selector-inputs.v1"

struct cordon_select_requirements {
  uint32_t capabilities; /* CORDON_CAP_* the work needs */
  uint32_t features;     /* CORDON_FEATURE_* the work asks to be enforced */
  enum cordon_isolation_tier min_tier;
  bool net_set; /* an egress class is asked for (net) */
  enum cordon_egress net;
  bool allow_unverifiable;
};

/* One backend's row of a verified attestation. */
struct cordon_select_attested {
  char *name;
  uint32_t observed, refuted, unverifiable; /* CORDON_CAP_* */
  enum cordon_isolation_tier tier;          /* measured */
  bool boundary_measured; /* a boundary probe other than the declared-tier record was observed
                             or refuted: the tier is a measurement, not a default */
};

struct cordon_select_candidate {
  const char *name;
  bool available;
  uint32_t declared; /* capabilities on this host (cordon_backend_capabilities) */
  uint32_t enforces; /* CORDON_FEATURE_* */
  enum cordon_isolation_tier tier;
  uint32_t egress;                               /* (1u << class) for each class it offers */
  const struct cordon_select_attested *attested; /* NULL: no row (or no attestation) */
};

struct cordon_select_input {
  struct cordon_select_requirements requirements;
  const struct cordon_select_candidate *candidates; /* in cost order, cheapest first */
  size_t n_candidates;
  const char *attestation_sha256; /* the attestation document's digest; NULL: none */
  const char *attestation_kid;    /* its signer */
};

struct cordon_select_rejection {
  char *backend;
  char *reason; /* one line */
};

struct cordon_select_result {
  char *chosen;      /* NULL when no candidate fits */
  char *inputs_json; /* canonical selector_inputs */
  char inputs_digest[65];
  struct cordon_select_rejection *rejections; /* every candidate that does not fit */
  size_t n_rejections;
};

/* The selection (pure). Returns 0 when it was made (chosen may be NULL), < 0 on bad input
 * (a duplicate or empty name, an unknown tier or class) or ENOMEM. */
CORDON_API int cordon_select(const struct cordon_select_input *input,
                             struct cordon_select_result *result, struct cordon_error **err);
CORDON_API void cordon_select_result_clear(struct cordon_select_result *result);

/* A capability list "exec,file_rw" → mask; -1 naming the unknown one in *err. */
CORDON_API int cordon_capabilities_parse(const char *list, uint32_t *mask,
                                         struct cordon_error **err);
/* "none", "process", "container", "vm"; -1 when unknown. */
CORDON_API int cordon_tier_parse(const char *name, enum cordon_isolation_tier *out);

struct cordon_registry;
/* The registry's loaded backends as candidates in cost order: declared tier, lowest first,
 * then registry order (built-ins in their table order, then plugins); availability asked of
 * each backend; attested rows matched by name. The array is malloc'd; names point into the
 * registry and the rows. */
CORDON_API int cordon_select_candidates(const struct cordon_registry *reg,
                                        const struct cordon_select_attested *rows, size_t n_rows,
                                        struct cordon_select_candidate **out, size_t *n,
                                        struct cordon_error **err);
CORDON_API void cordon_select_attested_free(struct cordon_select_attested *rows, size_t n);

#ifdef __cplusplus
}
#endif
#endif
