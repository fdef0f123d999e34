/* The forms of a race's own options (src/race/forms.c): --candidate, --candidate-env, --patch
 * and --judge-cmd, as the CLI and the fuzz targets reach them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/strv.h"
#include "race/forms.h"

static void test_candidate_forms(void **state) {
  (void)state;
  struct race_form_value v;
  assert_int_equal(race_form_parse(RACE_FORM_FILE, "2:src/a.h=/host/a.h", 3, &v, NULL), 0);
  assert_int_equal(v.index, 2);
  assert_int_equal(v.name_length, strlen("src/a.h"));
  assert_memory_equal(v.name, "src/a.h", v.name_length);
  assert_string_equal(v.value, "/host/a.h");
  assert_int_equal(race_form_parse(RACE_FORM_ENV, "0:K=V=W", 1, &v, NULL), 0);
  assert_string_equal(v.value, "K=V=W");
  assert_int_equal(race_form_parse(RACE_FORM_PATCH, "1:fix.patch", 2, &v, NULL), 0);
  assert_string_equal(v.value, "fix.patch");

  const struct {
    enum race_form form;
    const char *arg;
    unsigned k;
  } bad[] = {
      {RACE_FORM_FILE, "3:a=b", 3},  /* no candidate 3 */
      {RACE_FORM_FILE, "0:=b", 1},   /* no FILE */
      {RACE_FORM_FILE, "0:a=", 1},   /* no SRC */
      {RACE_FORM_FILE, "-1:a=b", 1}, /* not an index */
      {RACE_FORM_FILE, "0x1:a=b", 2},
      {RACE_FORM_ENV, "0:=V", 1},
      {RACE_FORM_ENV, "0:KV", 1},
      {RACE_FORM_PATCH, "0:", 1},
      {RACE_FORM_PATCH, "0", 1},
      {RACE_FORM_PATCH, "99999999999999999999999:p", 4}, /* out of range */
      {RACE_FORM_PATCH, "0:p", 0},                       /* no candidates at all */
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    struct cordon_error *err = NULL;
    if (race_form_parse(bad[i].form, bad[i].arg, bad[i].k, &v, &err) == 0)
      fail_msg("accepted: %s (k %u)", bad[i].arg, bad[i].k);
    assert_int_equal(err->kind, CORDON_ERR_USAGE);
    cordon_error_free(err);
  }
}

static void test_judge_cmd(void **state) {
  (void)state;
  char **argv = NULL;
  assert_int_equal(race_judge_cmd_parse("[\"sh\", \"-c\", \"\"]", &argv, NULL), 0);
  assert_int_equal(strv_length((const char *const *)argv), 3);
  assert_string_equal(argv[2], "");
  strv_free(argv);
  const char *bad[] = {"", "[]", "{}", "[\"\"]", "[\"sh\", 1]", "[\"a\\u0000b\"]", "[\"sh\"] x"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    struct cordon_error *err = NULL;
    if (race_judge_cmd_parse(bad[i], &argv, &err) == 0)
      fail_msg("accepted: %s", bad[i]);
    assert_null(argv);
    assert_int_equal(err->kind, CORDON_ERR_USAGE);
    cordon_error_free(err);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_candidate_forms),
      cmocka_unit_test(test_judge_cmd),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
