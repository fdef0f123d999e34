/* The form of a receipt's "manifest" and "inputs" (src/race/inputs.c), as `cordon receipt
 * verify` checks it, and the receipt JSON the race writes for them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "race/inputs.h"

#define D "\"5feceb66ffc86f38d952786c6d696c79c2dbc239dd4e91b46729d73a27fb57e9\""

static const char *check(const char *text) {
  json_error_t e;
  json_t *root = json_loads(text, 0, &e);
  assert_non_null(root);
  const char *why = race_inputs_check(root);
  json_decref(root);
  return why;
}

#define LIMITS                                                                           \
  "\"limits\":{\"cpus\":0,\"fsize_bytes\":0,\"memory_bytes\":0,\"nofile\":0,\"pids\":0," \
  "\"tmp_bytes\":0}"

static void test_accepts_the_written_form(void **state) {
  (void)state;
  assert_null(check("{}"));
  assert_null(check("{\"manifest\":{" LIMITS ",\"net\":\"none\"}}"));
  assert_null(check("{\"manifest\":{\"allow_ro\":[" D "],\"env\":{\"A\":" D "},\"files\":{\"f\":" D
                    "},\"image\":\"alpine\"," LIMITS ",\"net\":\"loopback\"},"
                    "\"inputs\":{\"candidate-3\":{\"env\":{\"K\":" D "},\"patch\":" D "}}}"));
  /* What the race writes reads back. */
  const char *env[] = {"A=1", "B=2", NULL};
  struct cordon_file_spec f = {"dir/f", "x", 1, 0};
  struct cordon_manifest m = {.env = env, .files = &f, .n_files = 1};
  json_t *mj = race_manifest_receipt(&m);
  assert_non_null(mj);
  struct cordon_race_inputs in[2] = {{0}, {.env = env, .patch = "p", .patch_length = 1}};
  json_t *ij = NULL;
  assert_int_equal(race_inputs_receipt(in, 2, &ij), 0);
  assert_non_null(ij);
  assert_null(json_object_get(ij, "candidate-0")); /* nothing of its own: not listed */
  assert_non_null(json_object_get(json_object_get(ij, "candidate-1"), "patch"));
  json_t *root = json_pack("{s:o, s:o}", "manifest", mj, "inputs", ij);
  assert_null(race_inputs_check(root));
  json_decref(root);
  /* Egress rules: canonical (lower-cased, trailing dot dropped), sorted, once each. */
  const char *domains[] = {"b.test", "A.Test.", "a.test", NULL};
  const char *pins[] = {"a.test:127.0.0.1", NULL};
  struct cordon_egress_rules rules = {.allow_domains = domains, .resolve = pins};
  struct cordon_manifest restricted = {.policy.egress = CORDON_EGRESS_RESTRICTED,
                                       .egress_rules = &rules};
  json_t *rj = race_manifest_receipt(&restricted);
  assert_non_null(rj);
  char *text = json_dumps(json_object_get(rj, "egress"), JSON_COMPACT | JSON_SORT_KEYS);
  assert_string_equal(
      text, "{\"allow_domains\":[\"a.test\",\"b.test\"],\"resolve\":[\"a.test:127.0.0.1\"]}");
  free(text);
  root = json_pack("{s:o}", "manifest", rj);
  assert_null(race_inputs_check(root));
  json_decref(root);
  struct cordon_race_inputs none[1] = {{0}};
  assert_int_equal(race_inputs_receipt(none, 1, &ij), 0);
  assert_null(ij);
}

static void test_refuses_other_forms(void **state) {
  (void)state;
  const char *bad[] = {
      "{\"manifest\":{\"net\":\"none\"}}",                                     /* no limits */
      "{\"manifest\":{" LIMITS "}}",                                           /* no net */
      "{\"manifest\":{" LIMITS ",\"net\":\"sideways\"}}",                      /* unknown class */
      "{\"manifest\":{" LIMITS ",\"net\":\"none\",\"host\":\"x\"}}",           /* unknown member */
      "{\"manifest\":{\"limits\":{\"cpus\":-1},\"net\":\"none\"}}",            /* short, negative */
      "{\"manifest\":{" LIMITS ",\"net\":\"none\",\"env\":{\"A\":\"zero\"}}}", /* a value */
      "{\"manifest\":{" LIMITS ",\"net\":\"none\",\"allow_ro\":[\"/home\"]}}", /* a path */
      "{\"manifest\":{" LIMITS ",\"net\":\"restricted\",\"egress\":{}}}",      /* empty */
      "{\"manifest\":{" LIMITS ",\"net\":\"restricted\",\"egress\":{\"resolve\":[]}}}",
      "{\"manifest\":{" LIMITS ",\"net\":\"restricted\",\"egress\":{\"ports\":[\"1\"]}}}",
      "{\"manifest\":{" LIMITS ",\"net\":\"restricted\",\"egress\":{\"resolve\":[1]}}}",
      "{\"inputs\":{}}",
      "{\"inputs\":{\"candidate-0\":{}}}",
      "{\"inputs\":{\"winner\":{\"patch\":" D "}}}",
      "{\"inputs\":{\"candidate-256\":{\"patch\":" D "}}}",
      "{\"inputs\":{\"candidate-0x\":{\"patch\":" D "}}}",
      "{\"inputs\":{\"candidate-0\":{\"patch\":\"abc\"}}}",
      "{\"inputs\":{\"candidate-0\":{\"stdin\":" D "}}}",
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    const char *why = check(bad[i]);
    if (!why)
      fail_msg("accepted: %s", bad[i]);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_accepts_the_written_form),
      cmocka_unit_test(test_refuses_other_forms),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
