/* Unit tests of a race's protected paths (src/race/protect.c): the lists normalised and
 * checked, the first change under a protected path, the judge's tree composed from the
 * candidate's and the base's, and the receipt's record of the lists as the verifier reads it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "race/protect.h"

static struct cordon_snapshot_entry entry(const char *path, char kind, const char *digest_char) {
  struct cordon_snapshot_entry e = {.path = (char *)path,
                                    .path_length = strlen(path),
                                    .kind = (enum cordon_snapshot_kind)kind,
                                    .mode = kind == 'd' ? 0755 : 0644};
  if (digest_char)
    for (int i = 0; i < 64; i++)
      e.digest[i] = *digest_char;
  return e;
}

static void test_lists(void **state) {
  (void)state;
  struct race_protect p;
  struct cordon_error *err = NULL;
  const char *protect[] = {"./tests/", "eval", "tests", NULL};
  const char *hidden[] = {"secret//key", NULL};
  assert_int_equal(race_protect_init(&p, NULL, hidden, protect, &err), 0);
  assert_string_equal(p.protect[0], "eval");
  assert_string_equal(p.protect[1], "tests"); /* the duplicate dropped */
  assert_null(p.protect[2]);
  assert_string_equal(p.hidden[0], "secret/key");
  assert_non_null(p.read_only);
  assert_null(p.read_only[0]);
  assert_true(race_protect_any(&p));
  assert_true(race_protect_covers(&p, "tests"));
  assert_true(race_protect_covers(&p, "tests/conftest.py"));
  assert_false(race_protect_covers(&p, "tests2"));
  assert_false(race_protect_covers(&p, ""));
  assert_false(race_protect_covers(&p, "secret"));
  race_protect_clear(&p);

  const char *dotdot[] = {"a/../b", NULL};
  assert_int_equal(race_protect_init(&p, dotdot, NULL, NULL, &err), -1);
  cordon_error_free(err);
  err = NULL;
  const char *root[] = {".", NULL};
  assert_int_equal(race_protect_init(&p, NULL, NULL, root, &err), -1);
  assert_int_equal(err->kind, CORDON_ERR_USAGE);
  cordon_error_free(err);
  err = NULL;
  const char *ro[] = {"a", NULL}, *hide[] = {"a", NULL};
  assert_int_equal(race_protect_init(&p, ro, hide, NULL, &err), -1); /* read-only and hidden */
  cordon_error_free(err);
  err = NULL;
  assert_int_equal(race_protect_init(&p, NULL, NULL, NULL, &err), 0);
  assert_false(race_protect_any(&p));
  race_protect_clear(&p);
}

static void test_first_change_and_compose(void **state) {
  (void)state;
  struct race_protect p;
  struct cordon_error *err = NULL;
  const char *protect[] = {"tests", NULL};
  assert_int_equal(race_protect_init(&p, NULL, NULL, protect, &err), 0);
  struct cordon_snapshot_entry base[] = {
      entry("", 'd', NULL),       entry("lib.py", 'f', "a"),
      entry("tests", 'd', NULL),  entry("tests/test_lib.py", 'f', "b"),
      entry("tests2", 'd', NULL),
  };
  /* Unchanged under tests: lib.py fixed, a new file, tests2 removed. */
  struct cordon_snapshot_entry fixed[] = {
      entry("tests/test_lib.py", 'f', "b"), entry("", 'd', NULL),      entry("lib.py", 'f', "c"),
      entry("new.txt", 'f', "d"),           entry("tests", 'd', NULL),
  };
  assert_null(race_protect_first_change(&p, base, 5, fixed, 5));
  /* A conftest.py added under tests. */
  struct cordon_snapshot_entry skipped[] = {
      entry("", 'd', NULL),
      entry("lib.py", 'f', "a"),
      entry("tests", 'd', NULL),
      entry("tests/conftest.py", 'f', "e"),
      entry("tests/test_lib.py", 'f', "b"),
  };
  assert_string_equal(race_protect_first_change(&p, base, 5, skipped, 5), "tests/conftest.py");
  /* The test changed, or removed with its directory, or its mode changed. */
  struct cordon_snapshot_entry changed[] = {entry("", 'd', NULL), entry("tests", 'd', NULL),
                                            entry("tests/test_lib.py", 'f', "f")};
  assert_string_equal(race_protect_first_change(&p, base, 5, changed, 3), "tests/test_lib.py");
  struct cordon_snapshot_entry removed[] = {entry("", 'd', NULL)};
  assert_string_equal(race_protect_first_change(&p, base, 5, removed, 1), "tests");
  struct cordon_snapshot_entry chmodded[] = {entry("", 'd', NULL), entry("tests", 'd', NULL),
                                             entry("tests/test_lib.py", 'f', "b")};
  chmodded[2].mode = 0755;
  assert_string_equal(race_protect_first_change(&p, base, 5, chmodded, 3), "tests/test_lib.py");

  /* The judge's tree from the skipping candidate: its lib.py, the base's tests (no conftest.py),
   * in canonical order. */
  const struct cordon_snapshot_entry **tree = NULL;
  size_t n = 0;
  skipped[1] = entry("lib.py", 'f', "c");
  assert_int_equal(race_protect_compose(&p, base, 5, skipped, 5, &tree, &n, &err), 0);
  assert_int_equal(n, 4);
  assert_string_equal(tree[0]->path, "");
  assert_string_equal(tree[1]->path, "lib.py");
  assert_ptr_equal(tree[1], &skipped[1]);
  assert_string_equal(tree[2]->path, "tests");
  assert_ptr_equal(tree[2], &base[2]);
  assert_string_equal(tree[3]->path, "tests/test_lib.py");
  assert_ptr_equal(tree[3], &base[3]);
  free(tree);
  /* A new file outside the protected paths stays; tests from the base. */
  assert_int_equal(race_protect_compose(&p, base, 5, fixed, 5, &tree, &n, &err), 0);
  assert_int_equal(n, 5);
  assert_string_equal(tree[2]->path, "new.txt");
  assert_ptr_equal(tree[2], &fixed[3]);
  assert_ptr_equal(tree[4], &base[3]);
  free(tree);
  race_protect_clear(&p);
}

static void test_receipt_lists(void **state) {
  (void)state;
  struct race_protect p;
  struct cordon_error *err = NULL;
  const char *ro[] = {"b", "a/x", NULL};
  assert_int_equal(race_protect_init(&p, ro, NULL, NULL, &err), 0);
  json_t *j = race_protect_json(&p);
  char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
  assert_string_equal(text, "{\"hidden\":[],\"protect\":[],\"read_only\":[\"a/x\",\"b\"]}");
  assert_null(race_protect_json_check(j));
  struct race_protect back;
  assert_int_equal(race_protect_from_json(j, &back, &err), 0);
  assert_string_equal(back.read_only[1], "b");
  race_protect_clear(&back);
  free(text);
  json_decref(j);
  race_protect_clear(&p);
  const char *bad[] = {"[]",
                       "{\"hidden\":[],\"protect\":[],\"read_only\":[]}",
                       "{\"hidden\":[],\"protect\":[]}",
                       "{\"hidden\":[],\"protect\":[],\"read_only\":[\"./a\"]}",
                       "{\"hidden\":[],\"protect\":[],\"read_only\":[\"b\",\"a\"]}",
                       "{\"hidden\":[],\"protect\":[],\"read_only\":[\"a\",\"a\"]}",
                       "{\"hidden\":[],\"protect\":[],\"read_only\":[\"../a\"]}",
                       "{\"hidden\":[1],\"protect\":[],\"read_only\":[]}",
                       "{\"hidden\":[],\"protect\":[],\"read_only\":[\"a\"],\"x\":[]}"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
    json_t *v = json_loads(bad[i], 0, NULL);
    assert_non_null(v);
    assert_non_null(race_protect_json_check(v));
    json_decref(v);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_lists),
      cmocka_unit_test(test_first_change_and_compose),
      cmocka_unit_test(test_receipt_lists),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
