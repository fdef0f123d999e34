/* base/id-prefix: which existing ids an abbreviated id names, and the errors of a resolve
 * (none: not found; several: ambiguous, naming them; too short: only a whole id). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/id-prefix.h"

static const char *const ids[] = {"0123456789abcdef", "0123456799999999", "abcdef0011223344",
                                  "abcdef00",         "fedcba9876543210", NULL};

static void test_usable(void **state) {
  (void)state;
  assert_true(id_prefix_usable("01234567"));
  assert_true(id_prefix_usable("0123456789abcdef0123"));
  assert_false(id_prefix_usable("0123456"));  /* 7 digits */
  assert_false(id_prefix_usable("0123456G")); /* not hex */
  assert_false(id_prefix_usable("ABCDEF01")); /* upper case */
  assert_false(id_prefix_usable(""));
  assert_false(id_prefix_usable(NULL));
}

static void test_matches(void **state) {
  (void)state;
  size_t n = 99;
  const char **m = id_prefix_matches("01234567", ids, &n);
  assert_non_null(m);
  assert_int_equal(n, 2);
  assert_string_equal(m[0], ids[0]);
  assert_string_equal(m[1], ids[1]);
  free(m);
  m = id_prefix_matches("0123456789", ids, &n);
  assert_int_equal(n, 1);
  assert_string_equal(m[0], ids[0]);
  free(m);
  /* A whole id wins over the longer ids it begins. */
  m = id_prefix_matches("abcdef00", ids, &n);
  assert_int_equal(n, 1);
  assert_string_equal(m[0], "abcdef00");
  free(m);
  m = id_prefix_matches("99999999", ids, &n);
  assert_int_equal(n, 0);
  free(m);
  m = id_prefix_matches("01234567", NULL, &n);
  assert_int_equal(n, 0);
  free(m);
}

static void test_resolve(void **state) {
  (void)state;
  struct cordon_error *err = NULL;
  char *out = NULL;
  assert_int_equal(id_prefix_resolve("session", "fedcba98", ids, &out, &err), 0);
  assert_string_equal(out, "fedcba9876543210");
  free(out);
  assert_int_equal(id_prefix_resolve("session", "fedcba9876543210", ids, &out, &err), 0);
  free(out);
  /* Ambiguous: usage, with both candidates named. */
  assert_true(id_prefix_resolve("session", "01234567", ids, &out, &err) < 0);
  assert_null(out);
  assert_int_equal(err->kind, CORDON_ERR_USAGE);
  assert_non_null(strstr(err->message, "ambiguous"));
  assert_non_null(strstr(err->message, ids[0]));
  assert_non_null(strstr(err->message, ids[1]));
  cordon_error_free(err);
  err = NULL;
  /* Unknown: not found. */
  assert_true(id_prefix_resolve("snapshot", "99999999", ids, &out, &err) < 0);
  assert_int_equal(err->kind, CORDON_ERR_NOT_FOUND);
  assert_non_null(strstr(err->message, "no such snapshot '99999999'"));
  cordon_error_free(err);
  err = NULL;
  /* Too short to abbreviate, though unique: not found, with the rule said. */
  assert_true(id_prefix_resolve("session", "fedc", ids, &out, &err) < 0);
  assert_int_equal(err->kind, CORDON_ERR_NOT_FOUND);
  assert_non_null(strstr(err->message, "at least 8"));
  cordon_error_free(err);
}

static void test_join(void **state) {
  (void)state;
  const char *three[] = {"a", "b", "c"};
  char *s = id_prefix_join(three, 3, 10);
  assert_string_equal(s, "a, b, c");
  free(s);
  s = id_prefix_join(three, 3, 2);
  assert_string_equal(s, "a, b, ...");
  free(s);
  s = id_prefix_join(three, 0, 2);
  assert_string_equal(s, "");
  free(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_usable),
      cmocka_unit_test(test_matches),
      cmocka_unit_test(test_resolve),
      cmocka_unit_test(test_join),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
