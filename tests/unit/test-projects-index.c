/* The registry of projects read through its index (src/confine/private.c): used only while the
 * registry is unchanged since it was written, never written for a registry changed just before
 * it was read (confine_projects_index_quiet), and a malformed or stale index falls back to the
 * registry itself. A stale index that were trusted would leave a new project's .cordon/ visible to
 * sandboxes. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/fs.h"
#include "base/strv.h"
#include "confine/private.h"

static char base[4096];

static bool has(char **set, const char *s) {
  for (size_t i = 0; set && set[i]; i++)
    if (!strcmp(set[i], s))
      return true;
  return false;
}

static void path_of(char *out, size_t size, const char *rel) {
  snprintf(out, size, "%s/%s", base, rel);
}

/* Make the registry look unchanged for a minute: its directory's times set back. */
static void age_registry(void) {
  char p[4200];
  path_of(p, sizeof(p), "state/cordon/projects");
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  struct timespec times[2] = {{now.tv_sec - 60, 0}, {now.tv_sec - 60, 0}};
  assert_int_equal(utimensat(AT_FDCWD, p, times, 0), 0);
}

static char **private_set(void) {
  char **set = NULL;
  struct cordon_error *err = NULL;
  assert_int_equal(confine_private_set(NULL, &set, &err), 0);
  return set;
}

static bool index_exists(void) {
  char p[4200];
  path_of(p, sizeof(p), "state/cordon/projects.index");
  return access(p, F_OK) == 0;
}

static int setup(void **state) {
  (void)state;
  char tmpl[] = "/tmp/cordon-test-index.XXXXXX";
  assert_non_null(mkdtemp(tmpl));
  assert_non_null(realpath(tmpl, base));
  char p[4200];
  path_of(p, sizeof(p), "state");
  setenv("XDG_STATE_HOME", p, 1);
  path_of(p, sizeof(p), "keys");
  setenv("CORDON_KEY_DIR", p, 1);
  path_of(p, sizeof(p), "run");
  setenv("CORDON_RUNTIME_DIR", p, 1);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  struct cordon_error *err = NULL;
  unsetenv("XDG_STATE_HOME");
  unsetenv("CORDON_KEY_DIR");
  unsetenv("CORDON_RUNTIME_DIR");
  assert_int_equal(fs_remove_tree(base, &err), 0);
  return 0;
}

static void register_project(const char *name, char *out, size_t size) {
  struct cordon_error *err = NULL;
  snprintf(out, size, "%s/%s/.cordon", base, name);
  assert_int_equal(fs_mkdir_p(out, 0700, &err), 0);
  assert_int_equal(confine_projects_register(out, &err), 0);
}

/* Make the registry look changed "just now", whatever the time a slow run takes: its
 * directory's times set a little ahead (fractions of a second included). */
static void touch_registry(void) {
  char p[4200];
  path_of(p, sizeof(p), "state/cordon/projects");
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  struct timespec times[2] = {{now.tv_sec + 30, 5000}, {now.tv_sec + 30, 5000}};
  assert_int_equal(utimensat(AT_FDCWD, p, times, 0), 0);
}

static void test_index_follows_registry(void **state) {
  (void)state;
  char a[4200], b[4200], p[4200];
  register_project("a", a, sizeof(a));
  touch_registry();
  /* Changed just now: read, but no index written (a change in the same clock step would not
   * show in the directory's time). */
  char **set = private_set();
  assert_true(has(set, a));
  strv_free(set);
  assert_false(index_exists());
  /* Unchanged for a while: the index is written, and read back the same. */
  age_registry();
  set = private_set();
  assert_true(has(set, a));
  strv_free(set);
  assert_true(index_exists());
  set = private_set();
  assert_true(has(set, a));
  strv_free(set);
  /* A project registered after it: the index is stale and not used. */
  register_project("b", b, sizeof(b));
  set = private_set();
  assert_true(has(set, a));
  assert_true(has(set, b));
  strv_free(set);
  /* An index that matches the registry's stamp but lies about its count, or is cut short, is
   * not used either: the registry is walked. */
  age_registry();
  strv_free(private_set());
  path_of(p, sizeof(p), "state/cordon/projects.index");
  unsigned char *text = NULL;
  size_t length = 0;
  struct cordon_error *err = NULL;
  assert_int_equal(fs_read_file(p, 1 << 20, &text, &length, &err), 0);
  char *nl = strchr((char *)text, '\n');
  assert_non_null(nl);
  /* The header alone, claiming the same stamp and count: cut short. */
  assert_int_equal(fs_write_atomic(p, text, (size_t)(nl - (char *)text) + 1, 0600, &err), 0);
  set = private_set();
  assert_true(has(set, a));
  assert_true(has(set, b));
  strv_free(set);
  /* Entries that are not absolute paths: not used. */
  char bogus[8192];
  snprintf(bogus, sizeof(bogus), "%.*s\nrelative\nalso\n", (int)(nl - (char *)text), (char *)text);
  assert_int_equal(fs_write_atomic(p, bogus, strlen(bogus), 0600, &err), 0);
  set = private_set();
  assert_true(has(set, a));
  assert_true(has(set, b));
  assert_false(has(set, "relative"));
  strv_free(set);
  free(text);
}

/* The quiet rule: a tenth of a second when the time has fractions, two whole seconds when it has
 * none; never for a time ahead of the reading. */
static void test_index_quiet(void **state) {
  (void)state;
  struct timespec at = {1000, 500000000};
  assert_true(confine_projects_index_quiet(1000, 300000000, &at));  /* 200 ms, fine times */
  assert_false(confine_projects_index_quiet(1000, 450000000, &at)); /* 50 ms */
  assert_false(confine_projects_index_quiet(1000, 600000000, &at)); /* ahead */
  assert_false(confine_projects_index_quiet(999, 0, &at));          /* whole seconds: 1.5 s */
  assert_true(confine_projects_index_quiet(998, 0, &at));           /* 2.5 s */
  assert_false(confine_projects_index_quiet(1001, 0, &at));         /* ahead */
  struct timespec late = {1001, 0};
  assert_true(confine_projects_index_quiet(1000, 900000000, &late)); /* 100 ms exactly */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_index_quiet),
      cmocka_unit_test_setup_teardown(test_index_follows_registry, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
