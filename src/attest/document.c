/* The attestation's document, pure: probes as values, the partition of declared capabilities
 * their verdicts imply, the tier the boundary probes imply, the canonical body, and the check
 * of a body read back from a signed document. Every rule that decides what a capability is
 * lives here once, so the builder and the verifier cannot disagree. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attest/document.h"
#include "base/cleanup.h"
#include "crypto/digest.h"
#include "crypto/jcs.h"

static const char *const verdict_names[] = {
    [ATTEST_OBSERVED] = "observed",
    [ATTEST_REFUTED] = "refuted",
    [ATTEST_UNVERIFIABLE] = "unverifiable",
};

const char *attest_verdict_name(enum attest_verdict verdict) {
  return (unsigned)verdict < 3 ? verdict_names[verdict] : "unknown";
}

/* Sorted by name, so the arrays in the body come out sorted. */
static const struct {
  const char *name;
  uint32_t cap;
} capabilities[] = {
    {"exec", CORDON_CAP_EXEC},
    {"file_rw", CORDON_CAP_FILE_RW},
    {"gpu", CORDON_CAP_GPU},
    {"network", CORDON_CAP_NETWORK},
    {"persistent_volumes", CORDON_CAP_PERSISTENT_VOLUMES},
    {"snapshot", CORDON_CAP_SNAPSHOT},
};
#define N_CAPABILITIES (sizeof(capabilities) / sizeof(capabilities[0]))

static uint32_t capability_bit(const char *name) {
  for (size_t i = 0; name && i < N_CAPABILITIES; i++)
    if (!strcmp(name, capabilities[i].name))
      return capabilities[i].cap;
  return 0;
}

const char *const attest_host_fact_names[] = {
    "architecture", "cgroup_layout", "cordon_version", "kernel_release",
    "kvm",          "landlock_abi",  "seccomp",        "user_namespaces",
    NULL,
};

bool attest_host_fact_allowed(const char *name) {
  for (size_t i = 0; attest_host_fact_names[i]; i++)
    if (!strcmp(name, attest_host_fact_names[i]))
      return true;
  return false;
}

static bool reason_code_valid(const char *s) {
  if (!s || !*s || strlen(s) > 64)
    return false;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_'))
      return false;
  return true;
}

int attest_probe_add(struct attest_backend *b, const char *name, const char *capability,
                     enum attest_verdict verdict, const char *reason, const char *fmt, ...) {
  struct attest_probe *grown = realloc(b->probes, (b->n_probes + 1) * sizeof(*grown));
  if (!grown)
    return -1;
  b->probes = grown;
  struct attest_probe *p = &b->probes[b->n_probes];
  memset(p, 0, sizeof(*p));
  va_list ap;
  va_start(ap, fmt);
  int n = vasprintf(&p->evidence, fmt, ap);
  va_end(ap);
  if (n < 0) {
    p->evidence = NULL;
    return -1;
  }
  if (strlen(p->evidence) > ATTEST_EVIDENCE_MAX)
    p->evidence[ATTEST_EVIDENCE_MAX] = '\0';
  /* Command output may end in a newline or carry control bytes: one printable line. */
  for (char *c = p->evidence; *c; c++)
    if ((unsigned char)*c < 0x20 || *c == 0x7f)
      *c = ' ';
  p->name = strdup(name);
  p->capability = strdup(capability);
  p->reason = strdup(reason);
  p->verdict = verdict;
  b->n_probes++;
  return p->name && p->capability && p->reason ? 0 : -1;
}

void attest_backend_clear(struct attest_backend *b) {
  for (size_t i = 0; i < b->n_probes; i++) {
    free(b->probes[i].name);
    free(b->probes[i].capability);
    free(b->probes[i].reason);
    free(b->probes[i].evidence);
  }
  free(b->probes);
  free(b->name);
  memset(b, 0, sizeof(*b));
}

void attest_partition(const struct attest_backend *b, uint32_t *observed, uint32_t *refuted,
                      uint32_t *unverifiable) {
  *observed = *refuted = *unverifiable = 0;
  for (size_t c = 0; c < N_CAPABILITIES; c++) {
    uint32_t cap = capabilities[c].cap;
    if (!(b->declared & cap))
      continue;
    size_t seen = 0, ok = 0, bad = 0;
    for (size_t i = 0; i < b->n_probes; i++) {
      if (strcmp(b->probes[i].capability, capabilities[c].name))
        continue;
      seen++;
      ok += b->probes[i].verdict == ATTEST_OBSERVED;
      bad += b->probes[i].verdict == ATTEST_REFUTED;
    }
    /* Observed needs a probe that observed it, and no probe of it may disagree. */
    if (bad)
      *refuted |= cap;
    else if (seen && ok == seen)
      *observed |= cap;
    else
      *unverifiable |= cap;
  }
}

int attest_partition_check(uint32_t declared, uint32_t observed, uint32_t refuted,
                           uint32_t unverifiable) {
  if ((observed & refuted) || (observed & unverifiable) || (refuted & unverifiable))
    return -1;
  return (observed | refuted | unverifiable) == declared ? 0 : -1;
}

static bool boundary_observed(const struct attest_probe *probes, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(probes[i].capability, ATTEST_BOUNDARY) && !strcmp(probes[i].name, name))
      return probes[i].verdict == ATTEST_OBSERVED;
  return false;
}

/* The cap a declared_tier record puts on the tier; CORDON_TIER_VM when there is none. */
static enum cordon_isolation_tier declared_cap(const struct attest_probe *probes, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(probes[i].capability, ATTEST_BOUNDARY) &&
        !strcmp(probes[i].name, ATTEST_DECLARED_TIER) && !strncmp(probes[i].reason, "tier_", 5))
      for (int t = CORDON_TIER_NONE; t <= CORDON_TIER_VM; t++)
        if (!strcmp(probes[i].reason + 5, cordon_tier_name((enum cordon_isolation_tier)t)))
          return (enum cordon_isolation_tier)t;
  return CORDON_TIER_VM;
}

enum cordon_isolation_tier attest_tier(const struct attest_probe *probes, size_t n) {
  bool processes = boundary_observed(probes, n, ATTEST_HOST_PROCESSES_INVISIBLE);
  bool files = boundary_observed(probes, n, ATTEST_HOST_FILES_INVISIBLE);
  bool not_root = boundary_observed(probes, n, ATTEST_NOT_ROOT_ON_HOST);
  bool own_kernel = boundary_observed(probes, n, ATTEST_OWN_KERNEL);
  enum cordon_isolation_tier tier = CORDON_TIER_NONE;
  if (processes && files && not_root && own_kernel)
    tier = CORDON_TIER_VM;
  /* The host kernel's surface narrowed by a filter, or not the host kernel at all. */
  else if (processes && files && not_root &&
           (boundary_observed(probes, n, ATTEST_SECCOMP_IN_FORCE) || own_kernel))
    tier = CORDON_TIER_CONTAINER;
  else if (files && not_root)
    tier = CORDON_TIER_PROCESS;
  /* A probe from inside can show a boundary missing, not that a kernel of its own sits behind
   * hardware virtualisation (gVisor's Sentry has one too): never above the declared tier. */
  enum cordon_isolation_tier cap = declared_cap(probes, n);
  return tier < cap ? tier : cap;
}

static int probe_order(const void *a, const void *b) {
  const struct attest_probe *x = a, *y = b;
  int c = strcmp(x->capability, y->capability);
  return c ? c : strcmp(x->name, y->name);
}

static int backend_order(const void *a, const void *b) {
  return strcmp(((const struct attest_backend *)a)->name, ((const struct attest_backend *)b)->name);
}

static json_t *capability_list(uint32_t mask) {
  json_t *list = json_array();
  for (size_t i = 0; list && i < N_CAPABILITIES; i++)
    if (mask & capabilities[i].cap)
      json_array_append_new(list, json_string(capabilities[i].name));
  return list;
}

static int host_facts_digest(const json_t *facts, char out[65], struct cordon_error **err) {
  _cleanup_free_ char *bytes = NULL;
  size_t length = 0;
  if (jcs_dump(facts, &bytes, &length, err) < 0)
    return -1;
  return crypto_sha256_hex(bytes, length, out, err);
}

/* One backend's checks before it goes into a body. */
static int backend_check(const struct attest_backend *b, struct cordon_error **err) {
  if (!b->name || !*b->name || (b->declared & ~(uint32_t)CORDON_ATTEST_CAPABILITIES))
    return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                            "attestation: a backend without a name "
                            "or with an unknown capability");
  for (size_t i = 0; i < b->n_probes; i++) {
    const struct attest_probe *p = &b->probes[i];
    if (!reason_code_valid(p->reason) || !*p->name ||
        (strcmp(p->capability, ATTEST_BOUNDARY) && !(capability_bit(p->capability) & b->declared)))
      return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                              "attestation of %s: probe %s (%s) is not of a declared capability "
                              "or has a malformed reason",
                              b->name, p->name, p->capability);
    if (i > 0 && probe_order(&b->probes[i - 1], p) == 0)
      return cordon_error_set(err, CORDON_ERR_INVALID, 0, "attestation of %s: probe %s twice",
                              b->name, p->name);
  }
  uint32_t observed, refuted, unverifiable;
  attest_partition(b, &observed, &refuted, &unverifiable);
  for (size_t c = 0; c < N_CAPABILITIES; c++) {
    bool probed = false;
    for (size_t i = 0; i < b->n_probes && !probed; i++)
      probed = !strcmp(b->probes[i].capability, capabilities[c].name);
    if ((b->declared & capabilities[c].cap) && !probed)
      return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                              "attestation of %s: declared capability %s has no probe", b->name,
                              capabilities[c].name);
  }
  if (attest_partition_check(b->declared, observed, refuted, unverifiable) < 0)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                            "attestation of %s: observed, refuted and unverifiable are not a "
                            "partition of declared",
                            b->name);
  return 0;
}

int attest_body_build(json_t *host_facts, struct attest_backend *backends, size_t n,
                      char **body_json, struct cordon_error **err) {
  qsort(backends, n, sizeof(*backends), backend_order);
  for (size_t i = 0; i < n; i++) {
    qsort(backends[i].probes, backends[i].n_probes, sizeof(*backends[i].probes), probe_order);
    if (i > 0 && !strcmp(backends[i - 1].name, backends[i].name))
      return cordon_error_set(err, CORDON_ERR_INVALID, 0, "attestation: backend %s twice",
                              backends[i].name);
    if (backend_check(&backends[i], err) < 0)
      return -1;
  }
  char digest[65];
  if (host_facts_digest(host_facts, digest, err) < 0)
    return -1;
  json_t *list = json_array();
  for (size_t i = 0; list && i < n; i++) {
    const struct attest_backend *b = &backends[i];
    uint32_t observed, refuted, unverifiable;
    attest_partition(b, &observed, &refuted, &unverifiable);
    json_t *probes = json_array();
    for (size_t k = 0; probes && k < b->n_probes; k++) {
      const struct attest_probe *p = &b->probes[k];
      json_array_append_new(probes,
                            json_pack("{s:s, s:s, s:s, s:s, s:s}", "name", p->name, "capability",
                                      p->capability, "verdict", attest_verdict_name(p->verdict),
                                      "reason", p->reason, "evidence", p->evidence));
    }
    json_array_append_new(
        list,
        json_pack("{s:s, s:o, s:o, s:o, s:o, s:s, s:o}", "name", b->name, "declared",
                  capability_list(b->declared), "observed", capability_list(observed), "refuted",
                  capability_list(refuted), "unverifiable", capability_list(unverifiable), "tier",
                  cordon_tier_name(attest_tier(b->probes, b->n_probes)), "probes", probes));
  }
  json_t *body =
      list ? json_pack("{s:s, s:O, s:s, s:o}", "type", CORDON_ATTESTATION_TYPE, "host_facts",
                       host_facts, "host_facts_digest", digest, "backends", list)
           : NULL;
  if (!body)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "attestation");
  int r = jcs_dump(body, body_json, NULL, err);
  json_decref(body);
  return r;
}

/* ---- reading a body back ------------------------------------------------------------------ */

static int bad(char **reason, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(char **reason, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (vasprintf(reason, fmt, ap) < 0)
    *reason = NULL;
  va_end(ap);
  return -1;
}

static bool members_exactly(const json_t *o, const char *const *names) {
  size_t n = 0;
  for (; names[n]; n++)
    if (!json_object_get(o, names[n]))
      return false;
  return json_is_object(o) && json_object_size(o) == n;
}

/* A sorted list of distinct capability names → its mask; -1 when it is not one. */
static int capability_mask(const json_t *list, uint32_t *mask) {
  *mask = 0;
  if (!json_is_array(list))
    return -1;
  const char *previous = NULL;
  for (size_t i = 0; i < json_array_size(list); i++) {
    const char *name = json_string_value(json_array_get(list, i));
    uint32_t bit = capability_bit(name);
    if (!bit || (previous && strcmp(previous, name) >= 0))
      return -1;
    *mask |= bit;
    previous = name;
  }
  return 0;
}

static int probe_read(const json_t *o, struct attest_probe *p) {
  static const char *const names[] = {"capability", "evidence", "name", "reason", "verdict", NULL};
  if (!members_exactly(o, names))
    return -1;
  p->name = (char *)json_string_value(json_object_get(o, "name"));
  p->capability = (char *)json_string_value(json_object_get(o, "capability"));
  p->reason = (char *)json_string_value(json_object_get(o, "reason"));
  p->evidence = (char *)json_string_value(json_object_get(o, "evidence"));
  const char *verdict = json_string_value(json_object_get(o, "verdict"));
  if (!p->name || !p->capability || !p->reason || !p->evidence || !verdict ||
      strlen(p->evidence) > ATTEST_EVIDENCE_MAX)
    return -1;
  for (int v = ATTEST_OBSERVED; v <= ATTEST_UNVERIFIABLE; v++)
    if (!strcmp(verdict, verdict_names[v])) {
      p->verdict = (enum attest_verdict)v;
      return 0;
    }
  return -1;
}

static int backend_read(const json_t *o, const char *previous, char **reason) {
  static const char *const names[] = {"declared", "name", "observed",     "probes",
                                      "refuted",  "tier", "unverifiable", NULL};
  const char *name = json_string_value(json_object_get(o, "name"));
  if (!members_exactly(o, names) || !name)
    return bad(reason, "a backend entry is not {name, declared, observed, refuted, "
                       "unverifiable, tier, probes}");
  if (previous && strcmp(previous, name) >= 0)
    return bad(reason, "backends are not sorted by name (or %s is there twice)", name);
  uint32_t declared, observed, refuted, unverifiable;
  if (capability_mask(json_object_get(o, "declared"), &declared) < 0 ||
      capability_mask(json_object_get(o, "observed"), &observed) < 0 ||
      capability_mask(json_object_get(o, "refuted"), &refuted) < 0 ||
      capability_mask(json_object_get(o, "unverifiable"), &unverifiable) < 0)
    return bad(reason, "backend %s: a capability list is not sorted, distinct, known names", name);
  if (attest_partition_check(declared, observed, refuted, unverifiable) < 0)
    return bad(reason,
               "backend %s: observed, refuted and unverifiable are not a partition of "
               "declared",
               name);
  const json_t *list = json_object_get(o, "probes");
  if (!json_is_array(list))
    return bad(reason, "backend %s: probes is not a list", name);
  struct attest_backend b = {.name = (char *)name, .declared = declared};
  b.n_probes = json_array_size(list);
  _cleanup_free_ struct attest_probe *probes = calloc(b.n_probes ? b.n_probes : 1, sizeof(*probes));
  if (!probes)
    return bad(reason, "out of memory");
  b.probes = probes;
  for (size_t i = 0; i < b.n_probes; i++) {
    if (probe_read(json_array_get(list, i), &probes[i]) < 0)
      return bad(reason, "backend %s: probe %zu is malformed", name, i);
    if (i > 0 && probe_order(&probes[i - 1], &probes[i]) >= 0)
      return bad(reason, "backend %s: probes are not sorted (or one is there twice)", name);
  }
  struct cordon_error *err = NULL;
  if (backend_check(&b, &err) < 0) {
    int r = bad(reason, "%s", err ? err->message : "backend malformed");
    cordon_error_free(err);
    return r;
  }
  uint32_t o_observed, o_refuted, o_unverifiable;
  attest_partition(&b, &o_observed, &o_refuted, &o_unverifiable);
  if (o_observed != observed || o_refuted != refuted || o_unverifiable != unverifiable)
    return bad(reason, "backend %s: the capability classes are not what its probes show", name);
  const char *tier = json_string_value(json_object_get(o, "tier"));
  if (!tier || strcmp(tier, cordon_tier_name(attest_tier(probes, b.n_probes))))
    return bad(reason, "backend %s: the tier is not what its boundary probes show", name);
  return 0;
}

int attest_body_check(const json_t *body, char host_facts_digest_out[65], size_t *n_backends,
                      char **reason) {
  static const char *const names[] = {"backends", "host_facts", "host_facts_digest",
                                      "signer",   "type",       NULL};
  *reason = NULL;
  if (!members_exactly(body, names))
    return bad(reason, "the body is not {type, signer, host_facts, host_facts_digest, backends}");
  const char *type = json_string_value(json_object_get(body, "type"));
  if (!type || strcmp(type, CORDON_ATTESTATION_TYPE))
    return bad(reason, "not an isolation attestation (type is not %s)", CORDON_ATTESTATION_TYPE);
  const json_t *facts = json_object_get(body, "host_facts");
  if (!json_is_object(facts))
    return bad(reason, "host_facts is not an object");
  const char *key;
  json_t *value;
  json_object_foreach((json_t *)facts, key, value) {
    if (!attest_host_fact_allowed(key) || !json_is_string(value))
      return bad(reason, "host fact %s is not on the allowlist or not a string", key);
  }
  char digest[65];
  struct cordon_error *err = NULL;
  if (host_facts_digest(facts, digest, &err) < 0) {
    cordon_error_free(err);
    return bad(reason, "host_facts cannot be hashed");
  }
  const char *recorded = json_string_value(json_object_get(body, "host_facts_digest"));
  if (!recorded || strcmp(recorded, digest))
    return bad(reason, "host_facts_digest is not the digest of host_facts");
  memcpy(host_facts_digest_out, digest, 65);
  const json_t *list = json_object_get(body, "backends");
  if (!json_is_array(list))
    return bad(reason, "backends is not a list");
  const char *previous = NULL;
  for (size_t i = 0; i < json_array_size(list); i++) {
    const json_t *b = json_array_get(list, i);
    if (backend_read(b, previous, reason) < 0)
      return -1;
    previous = json_string_value(json_object_get(b, "name"));
  }
  *n_backends = json_array_size(list);
  return 0;
}

int attest_body_rows(const json_t *body, struct cordon_select_attested **rows, size_t *n) {
  const json_t *list = json_object_get(body, "backends");
  size_t count = json_array_size(list);
  *rows = calloc(count ? count : 1, sizeof(**rows));
  *n = 0;
  if (!*rows)
    return -1;
  for (size_t i = 0; i < count; i++) {
    const json_t *o = json_array_get(list, i);
    struct cordon_select_attested *row = &(*rows)[i];
    if (!(row->name = strdup(json_string_value(json_object_get(o, "name")))))
      return -1;
    (*n)++;
    if (capability_mask(json_object_get(o, "observed"), &row->observed) < 0 ||
        capability_mask(json_object_get(o, "refuted"), &row->refuted) < 0 ||
        capability_mask(json_object_get(o, "unverifiable"), &row->unverifiable) < 0 ||
        cordon_tier_parse(json_string_value(json_object_get(o, "tier")), &row->tier) < 0)
      return -1;
    const json_t *probes = json_object_get(o, "probes");
    for (size_t p = 0; p < json_array_size(probes); p++) {
      const json_t *probe = json_array_get(probes, p);
      const char *capability = json_string_value(json_object_get(probe, "capability"));
      const char *name = json_string_value(json_object_get(probe, "name"));
      const char *verdict = json_string_value(json_object_get(probe, "verdict"));
      if (capability && name && verdict && !strcmp(capability, ATTEST_BOUNDARY) &&
          strcmp(name, ATTEST_DECLARED_TIER) && strcmp(verdict, verdict_names[ATTEST_UNVERIFIABLE]))
        row->boundary_measured = true;
    }
  }
  return 0;
}
