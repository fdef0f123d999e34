/* The selector (include/cordon/select.h): which backend fits a piece of work, decided by a pure
 * function of the requirements, the candidates' declarations in cost order and their rows of a
 * verified attestation; its inputs written as canonical JSON (selector_inputs) and hashed, so a
 * placement can seal them. The last section (cordon_select_candidates) is the thin effect that
 * reads the registry and asks each backend whether it is available. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <cordon/select.h>
#include <cordon/session.h>

#include "base/cleanup.h"
#include "crypto/digest.h"
#include "crypto/jcs.h"

/* Capabilities and features in the order their names sort, so lists are canonical. */
static const enum cordon_capability capability_order[] = {
    CORDON_CAP_CALLER_STDIO, CORDON_CAP_EXEC,    CORDON_CAP_FILE_RW,
    CORDON_CAP_GPU,          CORDON_CAP_NETWORK, CORDON_CAP_PERSISTENT_VOLUMES,
    CORDON_CAP_SNAPSHOT,
};
#define N_CAPABILITIES (sizeof(capability_order) / sizeof(capability_order[0]))

int cordon_tier_parse(const char *name, enum cordon_isolation_tier *out) {
  for (unsigned t = CORDON_TIER_NONE; t <= CORDON_TIER_VM; t++)
    if (name && !strcmp(name, cordon_tier_name((enum cordon_isolation_tier)t))) {
      *out = (enum cordon_isolation_tier)t;
      return 0;
    }
  return -1;
}

int cordon_capabilities_parse(const char *list, uint32_t *mask, struct cordon_error **err) {
  *mask = 0;
  if (!list || !*list)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "no capability named");
  for (const char *s = list;;) {
    size_t length = strcspn(s, ",");
    uint32_t bit = 0;
    for (size_t i = 0; i < N_CAPABILITIES && !bit; i++) {
      const char *name = cordon_capability_name(capability_order[i]);
      if (strlen(name) == length && !strncmp(s, name, length))
        bit = capability_order[i];
    }
    if (!bit)
      return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                              "unknown capability '%.*s' (known: exec, file_rw, network, gpu, "
                              "snapshot, persistent_volumes, caller_stdio)",
                              (int)length, s);
    *mask |= bit;
    if (!s[length])
      return 0;
    s += length + 1;
  }
}

/* ---- pure: the inputs as canonical JSON ---------------------------------------------------- */

static json_t *capability_list(uint32_t mask) {
  json_t *a = json_array();
  for (size_t i = 0; a && i < N_CAPABILITIES; i++)
    if (mask & capability_order[i])
      json_array_append_new(a, json_string(cordon_capability_name(capability_order[i])));
  return a;
}

static int compare_names(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static json_t *feature_list(uint32_t mask) {
  const char *names[CORDON_FEATURE_COUNT];
  size_t n = 0;
  for (unsigned i = 0; i < CORDON_FEATURE_COUNT; i++)
    if (mask & (1u << i))
      names[n++] = cordon_feature_name(1u << i);
  qsort(names, n, sizeof(names[0]), compare_names);
  json_t *a = json_array();
  for (size_t i = 0; a && i < n; i++)
    json_array_append_new(a, json_string(names[i]));
  return a;
}

static json_t *egress_list(uint32_t mask) {
  json_t *a = json_array();
  for (unsigned c = CORDON_EGRESS_NONE; a && c <= CORDON_EGRESS_OPEN; c++)
    if (mask & (1u << c))
      json_array_append_new(a, json_string(cordon_egress_name((enum cordon_egress)c)));
  return a;
}

static json_t *candidate_json(const struct cordon_select_candidate *c) {
  json_t *attested = json_null();
  if (c->attested)
    attested = json_pack(
        "{s:o, s:o, s:o, s:s, s:b}", "observed", capability_list(c->attested->observed), "refuted",
        capability_list(c->attested->refuted), "unverifiable",
        capability_list(c->attested->unverifiable), "tier", cordon_tier_name(c->attested->tier),
        "boundary_measured", c->attested->boundary_measured);
  return json_pack("{s:s, s:b, s:o, s:o, s:s, s:o, s:o*}", "name", c->name, "available",
                   c->available, "declared", capability_list(c->declared), "enforces",
                   feature_list(c->enforces), "tier", cordon_tier_name(c->tier), "egress",
                   egress_list(c->egress), "attested", attested);
}

static json_t *inputs_json(const struct cordon_select_input *in) {
  const struct cordon_select_requirements *r = &in->requirements;
  json_t *candidates = json_array();
  for (size_t i = 0; candidates && i < in->n_candidates; i++)
    if (json_array_append_new(candidates, candidate_json(&in->candidates[i])) < 0) {
      json_decref(candidates);
      return NULL;
    }
  json_t *attestation = in->attestation_sha256
                            ? json_pack("{s:s, s:s}", "sha256", in->attestation_sha256, "kid",
                                        in->attestation_kid ? in->attestation_kid : "")
                            : json_null();
  json_t *requirements =
      json_pack("{s:o, s:o, s:s, s:o, s:b}", "capabilities", capability_list(r->capabilities),
                "features", feature_list(r->features), "min_tier", cordon_tier_name(r->min_tier),
                "net", r->net_set ? json_string(cordon_egress_name(r->net)) : json_null(),
                "allow_unverifiable", r->allow_unverifiable);
  return json_pack("{s:s, s:o*, s:o*, s:o*}", "type", CORDON_SELECTOR_INPUTS_TYPE, "requirements",
                   requirements, "attestation", attestation, "candidates", candidates);
}

/* ---- pure: the rules ------------------------------------------------------------------------ */

/* A growing "; "-separated line. */
struct line {
  char *text;
  bool failed; /* ENOMEM */
};

static void line_add(struct line *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line_add(struct line *l, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *part = NULL;
  if (vasprintf(&part, fmt, ap) < 0)
    part = NULL;
  va_end(ap);
  char *joined = NULL;
  if (!part || asprintf(&joined, "%s%s%s", l->text ? l->text : "", l->text ? "; " : "", part) < 0)
    l->failed = true;
  else {
    free(l->text);
    l->text = joined;
  }
  free(part);
}

/* Names of the capabilities in mask, comma-separated, into buf. */
static const char *names_of(uint32_t mask, char *buf, size_t size) {
  buf[0] = '\0';
  for (size_t i = 0; i < N_CAPABILITIES; i++)
    if (mask & capability_order[i]) {
      size_t n = strlen(buf);
      snprintf(buf + n, size - n, "%s%s", n ? "," : "",
               cordon_capability_name(capability_order[i]));
    }
  return buf;
}

static const char *features_of(uint32_t mask, char *buf, size_t size) {
  buf[0] = '\0';
  for (unsigned i = 0; i < CORDON_FEATURE_COUNT; i++)
    if (mask & (1u << i)) {
      size_t n = strlen(buf);
      snprintf(buf + n, size - n, "%s%s", n ? "," : "", cordon_feature_name(1u << i));
    }
  return buf;
}

/* Why c does not fit (NULL text: it fits). Declarations first, then evidence; every reason
 * found is named, so one line says all that is wrong. */
static void judge(const struct cordon_select_input *in, const struct cordon_select_candidate *c,
                  struct line *why) {
  const struct cordon_select_requirements *r = &in->requirements;
  /* --net asks for the network capability, the backend's control of its egress, except `none`
   * from a backend that declares none (no network device at all: nothing to control, nothing an
   * attestation could refute); it must still offer the class (below). */
  bool net_needs_network =
      r->net_set && (r->net != CORDON_EGRESS_NONE || (c->declared & CORDON_CAP_NETWORK));
  uint32_t caps = r->capabilities | (net_needs_network ? CORDON_CAP_NETWORK : 0);
  char buf[256];
  if (!c->available)
    line_add(why, "unavailable on this host");
  if (caps & ~c->declared)
    line_add(why, "does not declare %s", names_of(caps & ~c->declared, buf, sizeof(buf)));
  if (r->features & ~c->enforces)
    line_add(why, "does not enforce %s", features_of(r->features & ~c->enforces, buf, sizeof(buf)));
  if (r->net_set && !(c->egress & (1u << r->net)))
    line_add(why, "does not offer egress %s", cordon_egress_name(r->net));
  if (c->tier < r->min_tier)
    line_add(why, "declares tier %s, below %s", cordon_tier_name(c->tier),
             cordon_tier_name(r->min_tier));
  if (why->text)
    return;
  /* The evidence. Only what was asked for counts. */
  const struct cordon_select_attested *a = c->attested;
  uint32_t refuted = a ? caps & a->refuted : 0;
  uint32_t unverifiable = a ? caps & ~a->observed & ~a->refuted : caps;
  if (refuted)
    line_add(why, "%s refuted by the attestation", names_of(refuted, buf, sizeof(buf)));
  bool tier_asked = r->min_tier > CORDON_TIER_NONE;
  bool tier_unverifiable = tier_asked && (!a || !a->boundary_measured);
  if (tier_asked && a && a->boundary_measured && a->tier < r->min_tier)
    line_add(why, "measured tier %s, below %s", cordon_tier_name(a->tier),
             cordon_tier_name(r->min_tier));
  if (why->text || r->allow_unverifiable || (!unverifiable && !tier_unverifiable))
    return;
  const char *source = !in->attestation_sha256 ? "no attestation was given"
                       : !a                    ? "the backend is not in the attestation"
                                               : "the attestation could not observe it";
  if (unverifiable && tier_unverifiable)
    line_add(why, "%s and tier %s unverifiable (%s; --allow-unverifiable accepts it)",
             names_of(unverifiable, buf, sizeof(buf)), cordon_tier_name(c->tier), source);
  else if (unverifiable)
    line_add(why, "%s unverifiable (%s; --allow-unverifiable accepts it)",
             names_of(unverifiable, buf, sizeof(buf)), source);
  else
    line_add(why, "tier %s unverifiable (%s; --allow-unverifiable accepts it)",
             cordon_tier_name(c->tier), source);
}

static int check_input(const struct cordon_select_input *in, struct cordon_error **err) {
  const struct cordon_select_requirements *r = &in->requirements;
  if ((unsigned)r->min_tier > CORDON_TIER_VM ||
      (r->net_set && (unsigned)r->net > CORDON_EGRESS_OPEN))
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "selector: unknown tier or egress class");
  for (size_t i = 0; i < in->n_candidates; i++) {
    const struct cordon_select_candidate *c = &in->candidates[i];
    if (!c->name || !*c->name || (unsigned)c->tier > CORDON_TIER_VM ||
        (c->attested && (unsigned)c->attested->tier > CORDON_TIER_VM))
      return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                              "selector: candidate %zu has no name or an unknown tier", i);
    for (size_t j = 0; j < i; j++)
      if (!strcmp(in->candidates[j].name, c->name))
        return cordon_error_set(err, CORDON_ERR_USAGE, 0, "selector: backend %s listed twice",
                                c->name);
  }
  return 0;
}

int cordon_select(const struct cordon_select_input *in, struct cordon_select_result *out,
                  struct cordon_error **err) {
  memset(out, 0, sizeof(*out));
  if (check_input(in, err) < 0)
    return -1;
  json_t *inputs = inputs_json(in);
  size_t length = 0;
  if (!inputs || jcs_dump(inputs, &out->inputs_json, &length, err) < 0 ||
      crypto_sha256_hex(out->inputs_json, length, out->inputs_digest, err) < 0) {
    json_decref(inputs);
    cordon_select_result_clear(out);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "selector inputs");
  }
  json_decref(inputs);
  out->rejections = calloc(in->n_candidates ? in->n_candidates : 1, sizeof(*out->rejections));
  if (!out->rejections)
    goto nomem;
  for (size_t i = 0; i < in->n_candidates; i++) {
    const struct cordon_select_candidate *c = &in->candidates[i];
    struct line why = {0};
    judge(in, c, &why);
    if (why.failed) {
      free(why.text);
      goto nomem;
    }
    if (!why.text) {
      if (!out->chosen && !(out->chosen = strdup(c->name)))
        goto nomem;
      continue;
    }
    struct cordon_select_rejection *rej = &out->rejections[out->n_rejections++];
    rej->reason = why.text;
    if (!(rej->backend = strdup(c->name)))
      goto nomem;
  }
  return 0;
nomem:
  cordon_select_result_clear(out);
  return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "selector");
}

void cordon_select_result_clear(struct cordon_select_result *r) {
  if (!r)
    return;
  for (size_t i = 0; i < r->n_rejections; i++) {
    free(r->rejections[i].backend);
    free(r->rejections[i].reason);
  }
  free(r->rejections);
  free(r->chosen);
  free(r->inputs_json);
  memset(r, 0, sizeof(*r));
}

void cordon_select_attested_free(struct cordon_select_attested *rows, size_t n) {
  for (size_t i = 0; rows && i < n; i++)
    free(rows[i].name);
  free(rows);
}

/* ---- effects: the registry as candidates -------------------------------------------------- */

int cordon_select_candidates(const struct cordon_registry *reg,
                             const struct cordon_select_attested *rows, size_t n_rows,
                             struct cordon_select_candidate **out, size_t *n,
                             struct cordon_error **err) {
  size_t count = cordon_registry_count(reg);
  struct cordon_select_candidate *list = calloc(count ? count : 1, sizeof(*list));
  if (!list)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "selector");
  size_t k = 0;
  /* Cost order: the tier a backend declares, lowest first (less isolation, less to start);
   * registry order within a tier. */
  for (unsigned tier = CORDON_TIER_NONE; tier <= CORDON_TIER_VM; tier++)
    for (size_t i = 0; i < count; i++) {
      const struct cordon_backend *b = cordon_registry_entry(reg, i)->backend;
      if (!b || (unsigned)b->tier != tier)
        continue;
      _cleanup_free_ char *reason = NULL;
      struct cordon_select_candidate *c = &list[k++];
      c->name = b->name;
      c->available = !b->available || b->available(b, &reason) == 1;
      c->declared = cordon_backend_capabilities(b);
      c->enforces = b->enforces;
      c->tier = b->tier;
      c->egress = cordon_backend_egress_offered(b);
      for (size_t r = 0; r < n_rows; r++)
        if (rows[r].name && !strcmp(rows[r].name, b->name))
          c->attested = &rows[r];
    }
  *out = list;
  *n = k;
  return 0;
}
