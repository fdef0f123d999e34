/* The strict unified-diff applier behind race --patch (src/race/patch.c): pure, bytes in and
 * out. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "race/patch.h"

/* Apply a one-file patch to old; returns the new text (malloc'd) or NULL with *why. */
static char *apply(const char *patch, const char *old, const char **why) {
  struct race_patch p;
  if (race_patch_parse(patch, strlen(patch), &p, why) < 0)
    return NULL;
  assert_int_equal(p.n_files, 1);
  char *out = NULL;
  size_t n = 0;
  int r = race_patch_apply(&p.files[0], old, old ? strlen(old) : 0, &out, &n, why);
  race_patch_clear(&p);
  if (r < 0)
    return NULL;
  assert_int_equal(strlen(out), n);
  return out;
}

static void test_applies_exactly(void **state) {
  (void)state;
  const char *why = NULL;
  char *out = apply("--- a/f\t2024-01-01\n+++ b/f\n@@ -2,3 +2,3 @@\n two\n-alpha\n+ALPHA\n three\n",
                    "one\ntwo\nalpha\nthree\nfour\n", &why);
  assert_non_null(out);
  assert_string_equal(out, "one\ntwo\nALPHA\nthree\nfour\n");
  free(out);
  /* Two hunks, a missing count (1), an addition at the end. */
  out = apply("--- f\n+++ f\n@@ -1 +1 @@\n-a\n+A\n@@ -3,0 +4,1 @@\n+d\n", "a\nb\nc\n", &why);
  assert_non_null(out);
  assert_string_equal(out, "A\nb\nc\nd\n");
  free(out);
}

static void test_creates_and_no_newline(void **state) {
  (void)state;
  const char *why = NULL;
  struct race_patch p;
  const char *patch =
      "--- /dev/null\n+++ b/new\n@@ -0,0 +1,2 @@\n+x\n+y\n\\ No newline at end of file\n";
  assert_int_equal(race_patch_parse(patch, strlen(patch), &p, &why), 0);
  assert_true(p.files[0].creates);
  assert_string_equal(p.files[0].path, "new");
  char *out = NULL;
  size_t n = 0;
  assert_int_equal(race_patch_apply(&p.files[0], NULL, 0, &out, &n, &why), 0);
  assert_int_equal(n, 3);
  assert_memory_equal(out, "x\ny", 3);
  free(out);
  race_patch_clear(&p);
}

static void test_refuses_what_does_not_apply(void **state) {
  (void)state;
  const char *why = NULL;
  /* Wrong context: no fuzz. */
  assert_null(apply("--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n zz\n-b\n+B\n", "a\nb\n", &why));
  assert_non_null(strstr(why, "does not apply"));
  /* Right lines, wrong place: no offset search. */
  assert_null(apply("--- a/f\n+++ b/f\n@@ -1 +1 @@\n-b\n+B\n", "a\nb\n", &why));
  /* Past the end, short hunk, garbage line. */
  assert_null(apply("--- a/f\n+++ b/f\n@@ -9 +9 @@\n-b\n+B\n", "a\nb\n", &why));
  assert_null(apply("--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n", "a\nb\n", &why));
  assert_null(apply("--- a/f\n+++ b/f\n@@ -1 +1 @@\n*a\n", "a\n", &why));
  /* A newline the file does not have. */
  assert_null(apply("--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n", "a", &why));
}

static void test_refuses_bad_patches(void **state) {
  (void)state;
  struct race_patch p;
  const char *why = NULL;
  const char *cases[] = {"", "just text\n", "--- a/f\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n",
                         "--- a/f\n+++ /abs\n@@ -1 +1 @@\n-a\n+b\n"};
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    why = NULL;
    assert_int_equal(race_patch_parse(cases[i], strlen(cases[i]), &p, &why), -1);
    assert_non_null(why);
  }
  assert_int_equal(race_patch_parse("x", RACE_PATCH_MAX_BYTES + 1u, &p, &why), -1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_applies_exactly),
      cmocka_unit_test(test_creates_and_no_newline),
      cmocka_unit_test(test_refuses_what_does_not_apply),
      cmocka_unit_test(test_refuses_bad_patches),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
