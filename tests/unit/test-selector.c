/* Unit tests of the selector (src/protocol/selector.c), a pure function: every rule (available,
 * declared capabilities, enforced features, egress class, declared tier, refuted, measured
 * tier, unverifiable with and without --allow-unverifiable, no attestation, a backend absent
 * from it), cost order, the canonical inputs and their digest (same inputs, same digest; any
 * input changed, another), bad input refused; the parse of capability lists and tiers; and the
 * selector's rows read from an attestation body (src/attest/document.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <cordon/select.h>

#include "attest/document.h"
#include "crypto/jcs.h"

#define ALL_EGRESS 0xfu
#define BASE_CAPS (CORDON_CAP_EXEC | CORDON_CAP_FILE_RW | CORDON_CAP_NETWORK)

static struct cordon_select_attested row(uint32_t observed, uint32_t refuted, uint32_t unverifiable,
                                         enum cordon_isolation_tier tier, bool measured) {
  return (struct cordon_select_attested){.name = NULL,
                                         .observed = observed,
                                         .refuted = refuted,
                                         .unverifiable = unverifiable,
                                         .tier = tier,
                                         .boundary_measured = measured};
}

static struct cordon_select_candidate candidate(const char *name, enum cordon_isolation_tier tier,
                                                const struct cordon_select_attested *a) {
  return (struct cordon_select_candidate){.name = name,
                                          .available = true,
                                          .declared = BASE_CAPS,
                                          .enforces = CORDON_FEATURE_MEMORY,
                                          .tier = tier,
                                          .egress = ALL_EGRESS,
                                          .attested = a};
}

/* Select over one candidate; the reason it was rejected (malloc'd), or NULL when it fits. */
static char *one(const struct cordon_select_requirements *req,
                 const struct cordon_select_candidate *c, bool attested) {
  struct cordon_select_input in = {.requirements = *req,
                                   .candidates = c,
                                   .n_candidates = 1,
                                   .attestation_sha256 = attested ? "ab" : NULL,
                                   .attestation_kid = attested ? "kid" : NULL};
  struct cordon_select_result res;
  struct cordon_error *err = NULL;
  assert_int_equal(cordon_select(&in, &res, &err), 0);
  char *reason = NULL;
  if (res.chosen) {
    assert_string_equal(res.chosen, c->name);
    assert_int_equal(res.n_rejections, 0);
  } else {
    assert_int_equal(res.n_rejections, 1);
    assert_string_equal(res.rejections[0].backend, c->name);
    reason = strdup(res.rejections[0].reason);
  }
  assert_int_equal(strlen(res.inputs_digest), 64);
  cordon_select_result_clear(&res);
  return reason;
}

static void expect_rejected(const struct cordon_select_requirements *req,
                            const struct cordon_select_candidate *c, bool attested,
                            const char *words) {
  char *reason = one(req, c, attested);
  if (!reason)
    fail_msg("%s was chosen; expected a rejection with '%s'", c->name, words);
  if (!strstr(reason, words))
    fail_msg("reason '%s' does not say '%s'", reason, words);
  free(reason);
}

static void expect_chosen(const struct cordon_select_requirements *req,
                          const struct cordon_select_candidate *c, bool attested) {
  char *reason = one(req, c, attested);
  if (reason)
    fail_msg("%s rejected: %s", c->name, reason);
}

static void test_declarations(void **state) {
  (void)state;
  struct cordon_select_attested a = row(BASE_CAPS, 0, 0, CORDON_TIER_CONTAINER, true);
  struct cordon_select_candidate c = candidate("ns", CORDON_TIER_CONTAINER, &a);
  struct cordon_select_requirements req = {.capabilities = CORDON_CAP_EXEC};
  expect_chosen(&req, &c, true);
  c.available = false;
  expect_rejected(&req, &c, true, "unavailable on this host");
  c.available = true;
  req.capabilities = CORDON_CAP_EXEC | CORDON_CAP_GPU;
  expect_rejected(&req, &c, true, "does not declare gpu");
  req.capabilities = CORDON_CAP_EXEC;
  req.features = CORDON_FEATURE_PIDS | CORDON_FEATURE_MEMORY;
  expect_rejected(&req, &c, true, "does not enforce pids");
  req.features = CORDON_FEATURE_MEMORY;
  expect_chosen(&req, &c, true);
  req.net_set = true;
  req.net = CORDON_EGRESS_NONE;
  c.egress = 1u << CORDON_EGRESS_OPEN;
  expect_rejected(&req, &c, true, "does not offer egress none");
  c.egress = ALL_EGRESS;
  expect_chosen(&req, &c, true);
  /* --net implies network... */
  req.net = CORDON_EGRESS_LOOPBACK;
  c.declared = CORDON_CAP_EXEC;
  expect_rejected(&req, &c, true, "does not declare network");
  /* ...but `none` from a backend without network (no device: a microVM) needs only the class */
  req.net = CORDON_EGRESS_NONE;
  expect_chosen(&req, &c, true);
  c.egress = 1u << CORDON_EGRESS_OPEN;
  expect_rejected(&req, &c, true, "does not offer egress none");
  c.egress = ALL_EGRESS;
  c.declared = BASE_CAPS;
  req.net_set = false;
  req.min_tier = CORDON_TIER_VM;
  expect_rejected(&req, &c, true, "declares tier container, below vm");
}

static void test_evidence(void **state) {
  (void)state;
  struct cordon_select_requirements req = {.capabilities = CORDON_CAP_EXEC | CORDON_CAP_NETWORK};
  /* Refuted excludes, whatever allow_unverifiable says. */
  struct cordon_select_attested liar =
      row(CORDON_CAP_EXEC | CORDON_CAP_FILE_RW, CORDON_CAP_NETWORK, 0, CORDON_TIER_NONE, false);
  struct cordon_select_candidate c = candidate("liar", CORDON_TIER_CONTAINER, &liar);
  expect_rejected(&req, &c, true, "network refuted by the attestation");
  req.allow_unverifiable = true;
  expect_rejected(&req, &c, true, "network refuted by the attestation");
  /* A refuted capability not asked for does not count. */
  req.capabilities = CORDON_CAP_EXEC;
  req.allow_unverifiable = false;
  expect_chosen(&req, &c, true);
  /* Unverifiable: only with allow_unverifiable. */
  struct cordon_select_attested half =
      row(CORDON_CAP_EXEC, 0, CORDON_CAP_FILE_RW | CORDON_CAP_NETWORK, CORDON_TIER_NONE, true);
  c.attested = &half;
  req.capabilities = CORDON_CAP_EXEC | CORDON_CAP_FILE_RW;
  expect_rejected(&req, &c, true, "file_rw unverifiable (the attestation could not observe it");
  req.allow_unverifiable = true;
  expect_chosen(&req, &c, true);
  /* Absent from the attestation: unverifiable. */
  req.allow_unverifiable = false;
  c.attested = NULL;
  expect_rejected(&req, &c, true, "the backend is not in the attestation");
  /* No attestation at all: every declared claim unverifiable. */
  expect_rejected(&req, &c, false, "exec,file_rw unverifiable (no attestation was given");
  req.allow_unverifiable = true;
  expect_chosen(&req, &c, false);
}

static void test_tier_evidence(void **state) {
  (void)state;
  struct cordon_select_requirements req = {.capabilities = CORDON_CAP_EXEC,
                                           .min_tier = CORDON_TIER_CONTAINER};
  /* Measured below the minimum: refuted, not waivable. */
  struct cordon_select_attested low = row(BASE_CAPS, 0, 0, CORDON_TIER_NONE, true);
  struct cordon_select_candidate c = candidate("fakevm", CORDON_TIER_VM, &low);
  expect_rejected(&req, &c, true, "measured tier none, below container");
  req.allow_unverifiable = true;
  expect_rejected(&req, &c, true, "measured tier none, below container");
  /* Not measured (a plugin, an unavailable backend): unverifiable. */
  struct cordon_select_attested unmeasured = row(BASE_CAPS, 0, 0, CORDON_TIER_NONE, false);
  c.attested = &unmeasured;
  req.allow_unverifiable = false;
  expect_rejected(&req, &c, true, "tier vm unverifiable");
  req.allow_unverifiable = true;
  expect_chosen(&req, &c, true);
  /* Measured at or above: fits. */
  struct cordon_select_attested good = row(BASE_CAPS, 0, 0, CORDON_TIER_CONTAINER, true);
  c.attested = &good;
  req.allow_unverifiable = false;
  expect_chosen(&req, &c, true);
  /* No minimum asked: the tier is not evidence anyone needs. */
  req.min_tier = CORDON_TIER_NONE;
  c.attested = &unmeasured;
  expect_chosen(&req, &c, true);
}

static void test_cost_order_and_reasons(void **state) {
  (void)state;
  struct cordon_select_attested a = row(BASE_CAPS, 0, 0, CORDON_TIER_CONTAINER, true);
  struct cordon_select_candidate list[3] = {candidate("cheap", CORDON_TIER_NONE, &a),
                                            candidate("mid", CORDON_TIER_CONTAINER, &a),
                                            candidate("dear", CORDON_TIER_VM, &a)};
  list[0].available = false;
  struct cordon_select_input in = {.requirements = {.capabilities = CORDON_CAP_EXEC},
                                   .candidates = list,
                                   .n_candidates = 3,
                                   .attestation_sha256 = "ab",
                                   .attestation_kid = "kid"};
  struct cordon_select_result res;
  struct cordon_error *err = NULL;
  assert_int_equal(cordon_select(&in, &res, &err), 0);
  /* The first that fits in cost order, not the most isolated. */
  assert_string_equal(res.chosen, "mid");
  assert_int_equal(res.n_rejections, 1);
  assert_string_equal(res.rejections[0].backend, "cheap");
  cordon_select_result_clear(&res);
  /* Nothing fits: one reason per backend, in order. */
  in.requirements.capabilities = CORDON_CAP_GPU;
  assert_int_equal(cordon_select(&in, &res, &err), 0);
  assert_null(res.chosen);
  assert_int_equal(res.n_rejections, 3);
  assert_string_equal(res.rejections[0].backend, "cheap");
  assert_non_null(strstr(res.rejections[0].reason, "unavailable on this host; does not declare"));
  assert_string_equal(res.rejections[2].backend, "dear");
  cordon_select_result_clear(&res);
}

static void test_digest(void **state) {
  (void)state;
  struct cordon_select_attested a = row(BASE_CAPS, 0, 0, CORDON_TIER_CONTAINER, true);
  struct cordon_select_candidate list[2] = {candidate("one", CORDON_TIER_NONE, &a),
                                            candidate("two", CORDON_TIER_CONTAINER, NULL)};
  struct cordon_select_input in = {
      .requirements = {.capabilities = CORDON_CAP_EXEC | CORDON_CAP_FILE_RW,
                       .features = CORDON_FEATURE_MEMORY | CORDON_FEATURE_NET_NONE,
                       .net_set = true,
                       .net = CORDON_EGRESS_LOOPBACK},
      .candidates = list,
      .n_candidates = 2,
      .attestation_sha256 = "ab",
      .attestation_kid = "kid"};
  struct cordon_select_result first, again;
  struct cordon_error *err = NULL;
  assert_int_equal(cordon_select(&in, &first, &err), 0);
  assert_int_equal(cordon_select(&in, &again, &err), 0);
  assert_string_equal(first.inputs_digest, again.inputs_digest);
  assert_string_equal(first.inputs_json, again.inputs_json);
  /* Canonical (RFC 8785) bytes, with the type named. */
  char *canonical = NULL;
  assert_int_equal(jcs_canonicalize(first.inputs_json, strlen(first.inputs_json), 1 << 20, "inputs",
                                    &canonical, NULL, &err),
                   0);
  assert_string_equal(canonical, first.inputs_json);
  free(canonical);
  assert_non_null(strstr(first.inputs_json, "\"type\":\"" CORDON_SELECTOR_INPUTS_TYPE "\""));
  assert_non_null(strstr(first.inputs_json, "\"features\":[\"memory\",\"net_none\"]"));
  cordon_select_result_clear(&again);
  /* Every input counts: each change gives another digest. */
  char seen[8][65];
  size_t n_seen = 0;
  memcpy(seen[n_seen++], first.inputs_digest, 65);
  cordon_select_result_clear(&first);
  for (int change = 0; change < 6; change++) {
    struct cordon_select_input other = in;
    struct cordon_select_candidate swapped[2] = {list[1], list[0]};
    switch (change) {
    case 0: other.requirements.allow_unverifiable = true; break;
    case 1: other.requirements.min_tier = CORDON_TIER_PROCESS; break;
    case 2: other.attestation_sha256 = "cd"; break;
    case 3: other.candidates = swapped; break; /* cost order */
    case 4: other.requirements.net_set = false; break;
    case 5: other.attestation_sha256 = NULL; break;
    }
    assert_int_equal(cordon_select(&other, &again, &err), 0);
    for (size_t k = 0; k < n_seen; k++)
      if (!strcmp(seen[k], again.inputs_digest))
        fail_msg("change %d gives a digest already seen", change);
    memcpy(seen[n_seen++], again.inputs_digest, 65);
    cordon_select_result_clear(&again);
  }
}

static void test_bad_input(void **state) {
  (void)state;
  struct cordon_select_candidate list[2] = {candidate("same", CORDON_TIER_NONE, NULL),
                                            candidate("same", CORDON_TIER_VM, NULL)};
  struct cordon_select_input in = {
      .requirements = {.capabilities = CORDON_CAP_EXEC}, .candidates = list, .n_candidates = 2};
  struct cordon_select_result res;
  struct cordon_error *err = NULL;
  assert_true(cordon_select(&in, &res, &err) < 0);
  assert_non_null(strstr(err->message, "listed twice"));
  cordon_error_free(err);
  err = NULL;
  list[1].name = "";
  assert_true(cordon_select(&in, &res, &err) < 0);
  cordon_error_free(err);
  err = NULL;
  list[1].name = "other";
  in.requirements.min_tier = (enum cordon_isolation_tier)9;
  assert_true(cordon_select(&in, &res, &err) < 0);
  cordon_error_free(err);
  err = NULL;
  /* No candidates at all: nothing fits, no error. */
  in.requirements.min_tier = CORDON_TIER_NONE;
  in.n_candidates = 0;
  assert_int_equal(cordon_select(&in, &res, &err), 0);
  assert_null(res.chosen);
  cordon_select_result_clear(&res);
}

static void test_parse(void **state) {
  (void)state;
  uint32_t mask = 0;
  struct cordon_error *err = NULL;
  assert_int_equal(cordon_capabilities_parse("exec,gpu,persistent_volumes", &mask, &err), 0);
  assert_int_equal(mask, CORDON_CAP_EXEC | CORDON_CAP_GPU | CORDON_CAP_PERSISTENT_VOLUMES);
  const char *bad[] = {"", "exec,", ",exec", "exe", "exec,gpus", "EXEC"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    if (cordon_capabilities_parse(bad[i], &mask, &err) == 0)
      fail_msg("'%s' parsed", bad[i]);
    cordon_error_free(err);
    err = NULL;
  }
  enum cordon_isolation_tier tier;
  assert_int_equal(cordon_tier_parse("container", &tier), 0);
  assert_int_equal(tier, CORDON_TIER_CONTAINER);
  assert_int_equal(cordon_tier_parse("vms", &tier), -1);
  assert_int_equal(cordon_tier_parse(NULL, &tier), -1);
}

static void add(struct attest_backend *b, const char *name, const char *cap,
                enum attest_verdict v) {
  assert_int_equal(attest_probe_add(b, name, cap, v, "code", "evidence of %s", name), 0);
}

/* The rows the selector reads from a body the builder made: the partition, the tier, and
 * whether the boundary was measured at all. */
static void test_body_rows(void **state) {
  (void)state;
  struct attest_backend b[2] = {{.name = strdup("liar"), .declared = BASE_CAPS},
                                {.name = strdup("ns"), .declared = CORDON_CAP_EXEC}};
  add(&b[0], "exec", "exec", ATTEST_OBSERVED);
  add(&b[0], "write_read_back", "file_rw", ATTEST_OBSERVED);
  add(&b[0], "egress_class", "network", ATTEST_REFUTED);
  add(&b[0], "boundary", ATTEST_BOUNDARY, ATTEST_UNVERIFIABLE);
  add(&b[1], "exec", "exec", ATTEST_OBSERVED);
  add(&b[1], ATTEST_HOST_FILES_INVISIBLE, ATTEST_BOUNDARY, ATTEST_OBSERVED);
  add(&b[1], ATTEST_HOST_PROCESSES_INVISIBLE, ATTEST_BOUNDARY, ATTEST_OBSERVED);
  add(&b[1], ATTEST_NOT_ROOT_ON_HOST, ATTEST_BOUNDARY, ATTEST_OBSERVED);
  add(&b[1], ATTEST_SECCOMP_IN_FORCE, ATTEST_BOUNDARY, ATTEST_OBSERVED);
  json_t *facts = json_pack("{s:s}", "architecture", "x86_64");
  char *body_json = NULL;
  struct cordon_error *err = NULL;
  assert_int_equal(attest_body_build(facts, b, 2, &body_json, &err), 0);
  json_t *body = NULL;
  assert_int_equal(jcs_parse(body_json, strlen(body_json), 1 << 20, "body", &body, &err), 0);
  struct cordon_select_attested *rows = NULL;
  size_t n = 0;
  assert_int_equal(attest_body_rows(body, &rows, &n), 0);
  assert_int_equal(n, 2);
  assert_string_equal(rows[0].name, "liar");
  assert_int_equal(rows[0].refuted, CORDON_CAP_NETWORK);
  assert_int_equal(rows[0].observed, CORDON_CAP_EXEC | CORDON_CAP_FILE_RW);
  assert_false(rows[0].boundary_measured);
  assert_string_equal(rows[1].name, "ns");
  assert_int_equal(rows[1].observed, CORDON_CAP_EXEC);
  assert_true(rows[1].boundary_measured);
  assert_int_equal(rows[1].tier, CORDON_TIER_CONTAINER);
  cordon_select_attested_free(rows, n);
  json_decref(body);
  json_decref(facts);
  free(body_json);
  attest_backend_clear(&b[0]);
  attest_backend_clear(&b[1]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_declarations),  cmocka_unit_test(test_evidence),
      cmocka_unit_test(test_tier_evidence), cmocka_unit_test(test_cost_order_and_reasons),
      cmocka_unit_test(test_digest),        cmocka_unit_test(test_bad_input),
      cmocka_unit_test(test_parse),         cmocka_unit_test(test_body_rows),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
