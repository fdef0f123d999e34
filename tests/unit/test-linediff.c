/* The line diff behind a race's cost (src/race/linediff.c): a pure function of two byte
 * strings. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "race/linediff.h"

static uint64_t lines_of(const char *a, const char *b) {
  uint64_t changed = 0;
  bool exact = false;
  assert_int_equal(linediff_lines((const unsigned char *)a, strlen(a), (const unsigned char *)b,
                                  strlen(b), NULL, &changed, &exact),
                   0);
  assert_true(exact);
  return changed;
}

/* n numbered lines, "line i\n", with line `changed` (if < n) replaced. */
static char *numbered(size_t n, size_t changed, const char *replacement) {
  char *text = malloc(n * 32 + 64);
  assert_non_null(text);
  size_t at = 0;
  for (size_t i = 0; i < n; i++)
    at += (size_t)(i == changed ? sprintf(text + at, "%s\n", replacement)
                                : sprintf(text + at, "line %zu of the file\n", i));
  text[at] = 0;
  return text;
}

static void test_identical_and_empty(void **state) {
  (void)state;
  assert_int_equal(lines_of("", ""), 0);
  assert_int_equal(lines_of("a\nb\n", "a\nb\n"), 0);
  assert_int_equal(lines_of("", "a\nb\nc\n"), 3);
  assert_int_equal(lines_of("a\nb\nc\n", ""), 3);
  assert_int_equal(linediff_count_lines((const unsigned char *)"", 0), 0);
  assert_int_equal(linediff_count_lines((const unsigned char *)"a\nb", 3), 2);
}

static void test_one_line_in_a_long_file(void **state) {
  (void)state;
  char *a = numbered(2000, 2000, NULL), *b = numbered(2000, 1234, "a fixed line");
  assert_true(strlen(a) > 40000);
  assert_int_equal(lines_of(a, b), 2);
  /* First and last lines too: the head and tail cuts stop at line boundaries. */
  char *first = numbered(2000, 0, "line 0 of the file!"), *last = numbered(2000, 1999, "x");
  assert_int_equal(lines_of(a, first), 2);
  assert_int_equal(lines_of(a, last), 2);
  free(a);
  free(b);
  free(first);
  free(last);
}

static void test_insertions_and_deletions(void **state) {
  (void)state;
  assert_int_equal(lines_of("a\nb\nc\n", "a\nx\nb\nc\n"), 1);
  assert_int_equal(lines_of("a\nb\nc\n", "a\nc\n"), 1);
  assert_int_equal(lines_of("a\nb\nc\nd\n", "x\na\nc\nd\ny\n"), 3);
  /* A moved line is one deletion and one insertion. */
  assert_int_equal(lines_of("a\nb\nc\nd\n", "b\nc\nd\na\n"), 2);
  /* Repeated lines: the minimal script, not a greedy one. */
  assert_int_equal(lines_of("a\nb\na\nb\na\n", "b\na\nb\na\nb\n"), 2);
}

static void test_trailing_newline_and_crlf(void **state) {
  (void)state;
  assert_int_equal(lines_of("a\nb", "a\nb\n"), 2);
  assert_int_equal(lines_of("a\nb\n", "a\nb"), 2);
  assert_int_equal(lines_of("a\nb", "a\nc"), 2);
  assert_int_equal(lines_of("x", "xy"), 2);
  assert_int_equal(lines_of("a\r\nb\r\nc\r\n", "a\r\nB\r\nc\r\n"), 2);
  /* CRLF to LF changes every line. */
  assert_int_equal(lines_of("a\r\nb\r\n", "a\nb\n"), 4);
}

static void test_binary(void **state) {
  (void)state;
  const unsigned char bin_a[] = {1, 0, 2, 3, 4}, bin_b[] = {1, 0, 9, 3, 4, 5, 6};
  assert_true(linediff_is_binary(bin_a, sizeof(bin_a)));
  assert_false(linediff_is_binary((const unsigned char *)"text\n", 5));
  assert_false(linediff_is_binary(NULL, 0));
  assert_int_equal(linediff_bytes(bin_a, sizeof(bin_a), bin_b, sizeof(bin_b)), 1 + 2);
  uint64_t cost = 0;
  bool binary = false;
  assert_int_equal(linediff_cost(bin_a, sizeof(bin_a), bin_b, sizeof(bin_b), &cost, &binary), 0);
  assert_true(binary);
  assert_int_equal(cost, 3);
  /* Text to binary is measured in bytes; an added binary file costs its bytes. */
  assert_int_equal(linediff_cost((const unsigned char *)"ab", 2, bin_a, 5, &cost, &binary), 0);
  assert_true(binary);
  assert_int_equal(cost, linediff_bytes((const unsigned char *)"ab", 2, bin_a, 5));
  assert_int_equal(linediff_cost(NULL, 0, bin_b, sizeof(bin_b), &cost, &binary), 0);
  assert_int_equal(cost, sizeof(bin_b));
  /* A NUL past the probe does not make a file binary. */
  size_t n = LINEDIFF_BINARY_PROBE + 10;
  unsigned char *late = calloc(1, n);
  assert_non_null(late);
  memset(late, 'a', LINEDIFF_BINARY_PROBE);
  assert_false(linediff_is_binary(late, n));
  late[LINEDIFF_BINARY_PROBE - 1] = 0;
  assert_true(linediff_is_binary(late, n));
  free(late);
  assert_int_equal(linediff_cost(NULL, 0, (const unsigned char *)"a\nb\n", 4, &cost, &binary), 0);
  assert_false(binary);
  assert_int_equal(cost, 2);
}

static void test_bounds(void **state) {
  (void)state;
  /* Every line differs: D = 400. Under tight bounds the fallback counts every line left. */
  char *a = numbered(200, 200, NULL);
  char *b = malloc(200 * 32);
  assert_non_null(b);
  size_t at = 0;
  for (int i = 0; i < 200; i++)
    at += (size_t)sprintf(b + at, "other %d\n", i);
  uint64_t changed = 0;
  bool exact = true;
  struct linediff_bounds small_d = {1u << 20, 10, 1u << 20};
  assert_int_equal(linediff_lines((unsigned char *)a, strlen(a), (unsigned char *)b, at, &small_d,
                                  &changed, &exact),
                   0);
  assert_false(exact);
  assert_int_equal(changed, 400);
  struct linediff_bounds few_steps = {1u << 20, 1u << 20, 100};
  assert_int_equal(linediff_lines((unsigned char *)a, strlen(a), (unsigned char *)b, at, &few_steps,
                                  &changed, &exact),
                   0);
  assert_false(exact);
  assert_int_equal(changed, 400);
  struct linediff_bounds few_lines = {100, 1u << 20, 1u << 20};
  assert_int_equal(linediff_lines((unsigned char *)a, strlen(a), (unsigned char *)b, at, &few_lines,
                                  &changed, &exact),
                   0);
  assert_false(exact);
  /* Within the defaults the answer is exact. */
  assert_int_equal(
      linediff_lines((unsigned char *)a, strlen(a), (unsigned char *)b, at, NULL, &changed, &exact),
      0);
  assert_true(exact);
  assert_int_equal(changed, 400);
  /* The fallback applies only to what lies between the common head and tail. */
  char *c = numbered(200, 100, "changed");
  assert_int_equal(linediff_lines((unsigned char *)a, strlen(a), (unsigned char *)c, strlen(c),
                                  &small_d, &changed, &exact),
                   0);
  assert_true(exact);
  assert_int_equal(changed, 2);
  free(a);
  free(b);
  free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_identical_and_empty),
      cmocka_unit_test(test_one_line_in_a_long_file),
      cmocka_unit_test(test_insertions_and_deletions),
      cmocka_unit_test(test_trailing_newline_and_crlf),
      cmocka_unit_test(test_binary),
      cmocka_unit_test(test_bounds),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
