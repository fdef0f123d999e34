/* Unit tests of the TOPSIS ranker (src/race/topsis.c) with hand-computed expectations: the
 * default profile on three candidates, ties, a single candidate, zero columns, independence
 * from input order, every error case, and profiles as JSON. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <cordon/race.h>

#define EPS 1e-12

#define SCORES(c, k, r) \
  ((const struct cordon_rank_score[]){{"correctness", (c)}, {"cost", (k)}, {"reversibility", (r)}})
#define CAND(key, c, k, r) \
  { key, SCORES(c, k, r), 3 }

static struct cordon_rank_result *rank_ok(const struct cordon_rank_profile *profile,
                                          const struct cordon_rank_candidate *c, size_t n) {
  struct cordon_rank_result *res = NULL;
  struct cordon_error *err = NULL;
  if (cordon_rank_topsis(profile, c, n, &res, &err) < 0)
    fail_msg("rank: %s", err ? err->message : "?");
  return res;
}

static void expect(const struct cordon_rank_result *r, const char *key, double closeness,
                   double plus, double minus) {
  assert_string_equal(r->key, key);
  if (fabs(r->closeness - closeness) > EPS || fabs(r->distance_ideal - plus) > EPS ||
      fabs(r->distance_anti - minus) > EPS)
    fail_msg("%s: got c=%.17g d+=%.17g d-=%.17g, want c=%.17g d+=%.17g d-=%.17g", key, r->closeness,
             r->distance_ideal, r->distance_anti, closeness, plus, minus);
}

/* Default profile, weights 3:1:1 → 0.6, 0.2, 0.2.
 *   A: correctness 1, cost 10, reversibility 1
 *   B: correctness 1, cost 20, reversibility 1
 *   C: correctness 0, cost  5, reversibility 1
 * Norms: correctness √2, cost √(100+400+25) = √525, reversibility √3.
 * Weighted: correctness 0.6/√2·[1,1,0] (each 1 is √0.18); cost 0.2·[10,20,5]/√525;
 * reversibility equal for all (no effect on distances).
 * Ideal: correctness √0.18, cost 1/√525 (C's 5), anti: 0, 4/√525 (B's 20).
 *   A: d+ = 0.2·5/√525 = 1/√525,  d- = √(0.18 + (2/√525)²)
 *   B: d+ = 0.2·15/√525 = 3/√525, d- = √0.18
 *   C: d+ = √0.18,                d- = 3/√525 */
static void test_default_profile(void **state) {
  (void)state;
  const struct cordon_rank_candidate c[] = {CAND("A", 1, 10, 1), CAND("B", 1, 20, 1),
                                            CAND("C", 0, 5, 1)};
  struct cordon_rank_result *r = rank_ok(cordon_rank_default_profile(), c, 3);
  double s = sqrt(525.0), a_plus = 1 / s, a_minus = sqrt(0.18 + 4 / 525.0);
  expect(&r[0], "A", a_minus / (a_plus + a_minus), a_plus, a_minus);
  expect(&r[1], "B", sqrt(0.18) / (3 / s + sqrt(0.18)), 3 / s, sqrt(0.18));
  expect(&r[2], "C", (3 / s) / (3 / s + sqrt(0.18)), sqrt(0.18), 3 / s);
  assert_int_equal(r[0].input_index, 0);
  assert_int_equal(r[2].input_index, 2);
  /* Known values, to the last few digits. */
  assert_true(fabs(r[0].closeness - 0.9084644449165169) < EPS);
  assert_true(fabs(r[1].closeness - 0.76417154218906003) < EPS);
  cordon_rank_results_free(r, 3);
}

/* Identical candidates tie bit for bit and are ordered by key. */
static void test_ties(void **state) {
  (void)state;
  const struct cordon_rank_candidate c[] = {CAND("t3", 1, 4, 0.5), CAND("t2", 0, 1, 1),
                                            CAND("t1", 1, 4, 0.5)};
  struct cordon_rank_result *r = rank_ok(cordon_rank_default_profile(), c, 3);
  assert_string_equal(r[0].key, "t1");
  assert_string_equal(r[1].key, "t3");
  assert_string_equal(r[2].key, "t2");
  assert_memory_equal(&r[0].closeness, &r[1].closeness, sizeof(double));
  assert_true(r[0].closeness > r[2].closeness);
  assert_int_equal(r[0].input_index, 2);
  assert_int_equal(r[1].input_index, 0);
  cordon_rank_results_free(r, 3);

  /* Everyone equal: all 0 (d+ = d- = 0), ordered by key. */
  const struct cordon_rank_candidate same[] = {CAND("b", 1, 1, 1), CAND("c", 1, 1, 1),
                                               CAND("a", 1, 1, 1)};
  r = rank_ok(cordon_rank_default_profile(), same, 3);
  for (int i = 0; i < 3; i++) {
    assert_true(r[i].closeness == 0);
    assert_true(r[i].distance_ideal == 0 && r[i].distance_anti == 0);
  }
  assert_string_equal(r[0].key, "a");
  assert_string_equal(r[1].key, "b");
  assert_string_equal(r[2].key, "c");
  cordon_rank_results_free(r, 3);
}

static void test_single_candidate(void **state) {
  (void)state;
  const struct cordon_rank_candidate c[] = {CAND("only", 1, 123, 0)};
  struct cordon_rank_result *r = rank_ok(cordon_rank_default_profile(), c, 1);
  expect(&r[0], "only", 0, 0, 0);
  assert_int_equal(r[0].input_index, 0);
  cordon_rank_results_free(r, 1);
}

/* A column of zeros stays 0 (no division by a zero norm): only correctness decides.
 *   a: v = (0.6, 0, 0), b: v = (0, 0, 0): ideal (0.6,0,0), anti (0,0,0).
 *   a: d+ = 0, d- = 0.6 → 1;  b: d+ = 0.6, d- = 0 → 0. */
static void test_zero_columns(void **state) {
  (void)state;
  const struct cordon_rank_candidate c[] = {CAND("b", 0, 0, 0), CAND("a", 1, 0, 0)};
  struct cordon_rank_result *r = rank_ok(cordon_rank_default_profile(), c, 2);
  expect(&r[0], "a", 1, 0, 0.6);
  expect(&r[1], "b", 0, 0.6, 0);
  cordon_rank_results_free(r, 2);
  /* Every column zero. */
  const struct cordon_rank_candidate z[] = {CAND("y", 0, 0, 0), CAND("x", 0, 0, 0)};
  r = rank_ok(cordon_rank_default_profile(), z, 2);
  expect(&r[0], "x", 0, 0, 0);
  expect(&r[1], "y", 0, 0, 0);
  cordon_rank_results_free(r, 2);
}

/* Benefit against cost, equal weights (0.5 each), norms 5 and 5:
 *   p = (3, 4) → (0.3, 0.4); q = (4, 3) → (0.4, 0.3). Ideal (0.4, 0.3) = q, anti = p.
 *   q: d+ = 0, d- = √0.02 → 1;  p: d+ = √0.02, d- = 0 → 0. Weights need not sum to 1. */
static void test_cost_axis_and_weights(void **state) {
  (void)state;
  const struct cordon_rank_axis axes[] = {{"x", 7, CORDON_AXIS_BENEFIT},
                                          {"y", 7, CORDON_AXIS_COST}};
  const struct cordon_rank_profile profile = {"xy", axes, 2};
  const struct cordon_rank_candidate c[] = {
      {"p", (const struct cordon_rank_score[]){{"y", 4}, {"x", 3}}, 2},
      {"q", (const struct cordon_rank_score[]){{"x", 4}, {"y", 3}}, 2}};
  struct cordon_rank_result *r = rank_ok(&profile, c, 2);
  expect(&r[0], "q", 1, 0, sqrt(0.02));
  expect(&r[1], "p", 0, sqrt(0.02), 0);
  cordon_rank_results_free(r, 2);

  /* A zero weight removes an axis; huge values do not overflow. */
  const struct cordon_rank_axis axes2[] = {{"x", 0, CORDON_AXIS_BENEFIT},
                                           {"y", 1, CORDON_AXIS_BENEFIT}};
  const struct cordon_rank_profile profile2 = {"y-only", axes2, 2};
  const struct cordon_rank_candidate c2[] = {
      {"p", (const struct cordon_rank_score[]){{"x", 1e300}, {"y", 1e300}}, 2},
      {"q", (const struct cordon_rank_score[]){{"x", -1e300}, {"y", 3e300}}, 2}};
  r = rank_ok(&profile2, c2, 2);
  assert_string_equal(r[0].key, "q");
  assert_true(fabs(r[0].closeness - 1) < EPS);
  assert_true(isfinite(r[1].distance_ideal));
  cordon_rank_results_free(r, 2);
}

/* The result never depends on the order the candidates arrive in. */
static void test_order_independent(void **state) {
  (void)state;
  const struct cordon_rank_candidate base[] = {CAND("k1", 0.7, 13, 0.2), CAND("k2", 0.9, 31, 0.9),
                                               CAND("k3", 0.1, 2, 0.4), CAND("k4", 0.7, 13, 0.3)};
  struct cordon_rank_result *ref = rank_ok(cordon_rank_default_profile(), base, 4);
  static const int perms[][4] = {{3, 2, 1, 0}, {1, 3, 0, 2}, {2, 0, 3, 1}, {0, 2, 1, 3}};
  for (size_t p = 0; p < 4; p++) {
    struct cordon_rank_candidate shuffled[4];
    for (int i = 0; i < 4; i++)
      shuffled[i] = base[perms[p][i]];
    struct cordon_rank_result *r = rank_ok(cordon_rank_default_profile(), shuffled, 4);
    for (int i = 0; i < 4; i++) {
      assert_string_equal(r[i].key, ref[i].key);
      assert_memory_equal(&r[i].closeness, &ref[i].closeness, sizeof(double));
      assert_string_equal(shuffled[r[i].input_index].key, r[i].key);
    }
    cordon_rank_results_free(r, 4);
  }
  cordon_rank_results_free(ref, 4);
}

static void expect_error(const struct cordon_rank_profile *profile,
                         const struct cordon_rank_candidate *c, size_t n, const char *needle) {
  struct cordon_rank_result *res = NULL;
  struct cordon_error *err = NULL;
  assert_true(cordon_rank_topsis(profile, c, n, &res, &err) < 0);
  assert_null(res);
  assert_non_null(err);
  assert_int_equal(err->kind, CORDON_ERR_INVALID);
  if (!strstr(err->message, needle))
    fail_msg("'%s' does not mention '%s'", err->message, needle);
  cordon_error_free(err);
}

static void test_candidate_errors(void **state) {
  (void)state;
  const struct cordon_rank_profile *d = cordon_rank_default_profile();
  const struct cordon_rank_candidate dup[] = {CAND("a", 1, 1, 1), CAND("b", 1, 1, 1),
                                              CAND("a", 0, 1, 1)};
  expect_error(d, dup, 3, "duplicate candidate a");
  const struct cordon_rank_candidate missing[] = {
      CAND("a", 1, 1, 1),
      {"b", (const struct cordon_rank_score[]){{"correctness", 1}, {"cost", 1}}, 2}};
  expect_error(d, missing, 2, "missing score for axis \"reversibility\"");
  const struct cordon_rank_candidate unknown[] = {
      {"b", (const struct cordon_rank_score[]){{"correctness", 1}, {"cost", 1}, {"speed", 1}}, 3}};
  expect_error(d, unknown, 1, "unknown axis \"speed\"");
  const struct cordon_rank_candidate twice[] = {
      {"b", (const struct cordon_rank_score[]){{"cost", 1}, {"cost", 2}, {"correctness", 1}}, 3}};
  expect_error(d, twice, 1, "two scores for axis \"cost\"");
  const struct cordon_rank_candidate nan[] = {CAND("a", 1, 1, 1), CAND("b", NAN, 1, 1)};
  expect_error(d, nan, 2, "not a finite number");
  const struct cordon_rank_candidate inf[] = {CAND("a", 1, INFINITY, 1)};
  expect_error(d, inf, 1, "not a finite number");
  const struct cordon_rank_candidate ninf[] = {CAND("a", 1, 1, -INFINITY)};
  expect_error(d, ninf, 1, "not a finite number");
  const struct cordon_rank_candidate nokey[] = {CAND("", 1, 1, 1)};
  expect_error(d, nokey, 1, "no key");
  const struct cordon_rank_candidate nullkey[] = {CAND(NULL, 1, 1, 1)};
  expect_error(d, nullkey, 1, "no key");
  expect_error(d, dup, 0, "no candidates");
  expect_error(d, NULL, 2, "no candidates");
}

static void test_profile_errors(void **state) {
  (void)state;
  const struct cordon_rank_candidate c[] = {{"a", (const struct cordon_rank_score[]){{"x", 1}}, 1}};
  struct {
    struct cordon_rank_axis axes[2];
    size_t n;
    const char *needle;
  } cases[] = {
      {{{"x", -1, CORDON_AXIS_BENEFIT}}, 1, "finite and >= 0"},
      {{{"x", NAN, CORDON_AXIS_BENEFIT}}, 1, "finite and >= 0"},
      {{{"x", INFINITY, CORDON_AXIS_BENEFIT}}, 1, "finite and >= 0"},
      {{{"x", 0, CORDON_AXIS_BENEFIT}}, 1, "positive, finite sum"},
      {{{"x", 1e308, CORDON_AXIS_BENEFIT}, {"y", 1e308, CORDON_AXIS_COST}},
       2,
       "positive, finite sum"},
      {{{"x", 1, CORDON_AXIS_BENEFIT}, {"x", 1, CORDON_AXIS_COST}}, 2, "appears twice"},
      {{{"", 1, CORDON_AXIS_BENEFIT}}, 1, "no name"},
      {{{"x", 1, (enum cordon_axis_direction)7}}, 1, "direction"},
      {{{"x", 1, CORDON_AXIS_BENEFIT}}, 0, "no axes"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct cordon_rank_profile p = {"bad", cases[i].axes, cases[i].n};
    expect_error(&p, c, 1, cases[i].needle);
  }
  expect_error(NULL, c, 1, "no axes");
}

static void test_profile_json(void **state) {
  (void)state;
  char *json = NULL;
  assert_int_equal(cordon_rank_profile_to_json(cordon_rank_default_profile(), &json, NULL), 0);
  assert_string_equal(json, "{\"axes\":[{\"direction\":\"benefit\",\"name\":\"correctness\","
                            "\"weight\":3},{\"direction\":\"cost\",\"name\":\"cost\",\"weight\":1},"
                            "{\"direction\":\"benefit\",\"name\":\"reversibility\",\"weight\":1}],"
                            "\"method\":\"topsis\",\"name\":\"default\"}");
  struct cordon_rank_profile *p = NULL;
  assert_int_equal(cordon_rank_profile_parse(json, strlen(json), &p, NULL), 0);
  assert_string_equal(p->name, "default");
  assert_int_equal(p->n_axes, 3);
  assert_int_equal(p->axes[1].direction, CORDON_AXIS_COST);
  char *again = NULL;
  assert_int_equal(cordon_rank_profile_to_json(p, &again, NULL), 0);
  assert_string_equal(again, json);
  free(again);
  cordon_rank_profile_free(p);
  free(json);

  const char *text = "{\"axes\":[{\"name\":\"speed\",\"direction\":\"cost\",\"weight\":0.25}]}";
  assert_int_equal(cordon_rank_profile_parse(text, strlen(text), &p, NULL), 0);
  assert_string_equal(p->name, "custom");
  assert_true(p->axes[0].weight == 0.25);
  cordon_rank_profile_free(p);

  /* The cost rule a race names: kept through parse and print; an unknown one is refused. */
  const char *ruled =
      "{\"axes\":[{\"direction\":\"cost\",\"name\":\"cost\",\"weight\":1}],"
      "\"cost_rule\":\"" CORDON_COST_RULE "\",\"method\":\"topsis\",\"name\":\"c\"}";
  assert_int_equal(cordon_rank_profile_parse(ruled, strlen(ruled), &p, NULL), 0);
  assert_string_equal(p->cost_rule, CORDON_COST_RULE);
  assert_int_equal(cordon_rank_profile_to_json(p, &again, NULL), 0);
  assert_string_equal(again, ruled);
  free(again);
  cordon_rank_profile_free(p);

  static const char *const bad[] = {
      "[]",
      "{}",
      "{\"axes\":[]}",
      "{\"axes\":[{\"name\":\"x\",\"direction\":\"up\",\"weight\":1}]}",
      "{\"axes\":[{\"name\":\"x\",\"direction\":\"cost\",\"weight\":\"1\"}]}",
      "{\"axes\":[{\"name\":\"x\",\"direction\":\"cost\",\"weight\":-1}]}",
      "{\"axes\":[{\"name\":\"x\",\"direction\":\"cost\",\"weight\":1,\"extra\":1}]}",
      "{\"axes\":[{\"name\":\"x\",\"direction\":\"cost\",\"weight\":1}],\"method\":\"ahp\"}",
      "{\"axes\":[{\"name\":\"x\",\"direction\":\"cost\",\"weight\":1}],\"clock\":true}",
      "{\"axes\":[{\"name\":\"x\",\"direction\":\"cost\",\"weight\":0}]}",
      "{\"axes\":[{\"name\":\"x\",\"direction\":\"cost\",\"weight\":1},"
      "{\"name\":\"x\",\"direction\":\"cost\",\"weight\":1}]}",
      "not json",
      "{\"axes\":[{\"name\":\"x\",\"direction\":\"cost\",\"weight\":1}],\"cost_rule\":\"bytes\"}",
      "{\"axes\":[{\"name\":\"x\",\"direction\":\"cost\",\"weight\":1}],\"cost_rule\":1}",
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    struct cordon_error *err = NULL;
    p = NULL;
    if (cordon_rank_profile_parse(bad[i], strlen(bad[i]), &p, &err) == 0)
      fail_msg("accepted: %s", bad[i]);
    assert_null(p);
    assert_non_null(err);
    cordon_error_free(err);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_default_profile),       cmocka_unit_test(test_ties),
      cmocka_unit_test(test_single_candidate),      cmocka_unit_test(test_zero_columns),
      cmocka_unit_test(test_cost_axis_and_weights), cmocka_unit_test(test_order_independent),
      cmocka_unit_test(test_candidate_errors),      cmocka_unit_test(test_profile_errors),
      cmocka_unit_test(test_profile_json),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
