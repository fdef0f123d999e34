/* The one exec of the attestation's probes (src/attest/probes.c): its output split into the
 * exec probe's line, the file read inside between its markers, and the boundary's lines; and
 * the exec and file verdicts drawn from it; the host uid where the kernel has no user
 * namespaces. Pure: no sandbox. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "attest/probes.h"

#define CONTENT "cordon attest file_rw probe\n"
#define BOUNDARY "proc=yes\ncomm=\nfile=hidden\n"

static void split(const char *out, const char *content, struct attest_output *s, int want) {
  assert_int_equal(attest_output_split(out, strlen(out), content, s), want);
}

static const struct attest_probe *find(const struct attest_backend *b, const char *name) {
  for (size_t i = 0; i < b->n_probes; i++)
    if (!strcmp(b->probes[i].name, name))
      return &b->probes[i];
  return NULL;
}

static enum attest_verdict verdict(bool ran, int code, const char *out, bool file_probed,
                                   const char *name) {
  struct attest_output s = {0};
  attest_output_split(out, strlen(out), CONTENT, &s);
  struct attest_backend b = {.name = strdup("x")};
  assert_int_equal(attest_exec_file_probes(&b, ran, code, strlen(out), &s, file_probed), 0);
  const struct attest_probe *p = find(&b, name);
  assert_non_null(p);
  enum attest_verdict v = p->verdict;
  if (!file_probed)
    assert_null(find(&b, "visible_inside"));
  attest_backend_clear(&b);
  return v;
}

static void test_split(void **state) {
  (void)state;
  struct attest_output s;
  /* The whole output: the line, the file as written, the boundary after it. */
  split("attest-exec\nattest-file-begin\n" CONTENT "\nattest-file-end\n" BOUNDARY, CONTENT, &s, 0);
  assert_true(s.exec_line && s.file_seen && s.file_equal);
  assert_string_equal(s.rest, BOUNDARY);
  /* No file asked: the boundary right after the line. */
  split("attest-exec\n" BOUNDARY, CONTENT, &s, 0);
  assert_true(s.exec_line);
  assert_false(s.file_seen || s.file_equal);
  assert_string_equal(s.rest, BOUNDARY);
  /* The file missing inside (cat printed nothing), changed, one byte short or one too many. */
  split("attest-exec\nattest-file-begin\n\nattest-file-end\n" BOUNDARY, CONTENT, &s, 0);
  assert_true(s.file_seen && !s.file_equal);
  assert_string_equal(s.rest, BOUNDARY);
  split("attest-exec\nattest-file-begin\ncordon attest file_rw probX\n\nattest-file-end\n", CONTENT,
        &s, 0);
  assert_false(s.file_equal);
  split("attest-exec\nattest-file-begin\ncordon attest file_rw probe\nattest-file-end\n", CONTENT,
        &s, 0);
  assert_false(s.file_equal);
  split("attest-exec\nattest-file-begin\n" CONTENT "x\n\nattest-file-end\n", CONTENT, &s, 0);
  assert_false(s.file_equal);
  /* An end marker that never comes: no file seen. */
  split("attest-exec\nattest-file-begin\n" CONTENT, CONTENT, &s, 0);
  assert_false(s.file_seen || s.file_equal);
  /* No exec line: nothing is taken from the output. */
  split("attest-exe\n" BOUNDARY, CONTENT, &s, -1);
  assert_false(s.exec_line);
  split("", CONTENT, &s, -1);
  assert_int_equal(attest_output_split(NULL, 0, CONTENT, &s), -1);
}

static void test_verdicts(void **state) {
  (void)state;
  const char *good = "attest-exec\nattest-file-begin\n" CONTENT "\nattest-file-end\n" BOUNDARY;
  assert_int_equal(verdict(true, 3, good, true, "exec"), ATTEST_OBSERVED);
  assert_int_equal(verdict(true, 3, good, true, "visible_inside"), ATTEST_OBSERVED);
  assert_int_equal(verdict(true, 3, good, false, "exec"), ATTEST_OBSERVED);
  /* Another exit code, no exec line, or a failed call: the exec probe is refuted. */
  assert_int_equal(verdict(true, 0, good, true, "exec"), ATTEST_REFUTED);
  assert_int_equal(verdict(true, 3, BOUNDARY, true, "exec"), ATTEST_REFUTED);
  assert_int_equal(verdict(false, 0, "", true, "exec"), ATTEST_REFUTED);
  assert_int_equal(verdict(false, 0, "", true, "visible_inside"), ATTEST_REFUTED);
  /* The file not seen as written inside. */
  assert_int_equal(verdict(true, 3, "attest-exec\nattest-file-begin\n\nattest-file-end\n", true,
                           "visible_inside"),
                   ATTEST_REFUTED);
  assert_int_equal(verdict(true, 3, "attest-exec\n" BOUNDARY, true, "visible_inside"),
                   ATTEST_REFUTED);
}

/* not_root_on_host's verdict for uid (text) under uid_map (text), through the boundary probes. */
static enum attest_verdict not_root(const char *uid, const char *uid_map) {
  char text[256];
  snprintf(text, sizeof(text),
           "proc=yes\ncomm=\nfile=hidden\nuid=%s\nuid_map=%s\nseccomp=\nkernel=x\n"
           "interfaces=lo,\nconnect=refused\n",
           uid, uid_map);
  struct attest_inside in;
  assert_int_equal(attest_inside_parse(text, &in), 0);
  struct attest_host host = {.kernel_release = "6.1"};
  struct attest_backend b = {.name = strdup("x")};
  assert_int_equal(attest_boundary_probes(&b, &in, &host, true), 0);
  const struct attest_probe *p = find(&b, ATTEST_NOT_ROOT_ON_HOST);
  assert_non_null(p);
  enum attest_verdict v = p->verdict;
  attest_backend_clear(&b);
  attest_inside_clear(&in);
  return v;
}

/* A kernel without user namespaces (no /proc/self/uid_map, "none"): the identity map. */
static void test_no_user_namespaces(void **state) {
  (void)state;
  assert_int_equal(not_root("1000", "none"), ATTEST_OBSERVED);
  assert_int_equal(not_root("0", "none"), ATTEST_REFUTED);
  /* Unreadable (empty) stays unverifiable; a real map is read as before. */
  assert_int_equal(not_root("1000", ""), ATTEST_UNVERIFIABLE);
  assert_int_equal(not_root("0", "0 100000 65536 "), ATTEST_OBSERVED);
  assert_int_equal(not_root("1000", "0 0 4294967295 "), ATTEST_OBSERVED);
  assert_int_equal(not_root("0", "0 0 4294967295 "), ATTEST_REFUTED);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_split),
      cmocka_unit_test(test_verdicts),
      cmocka_unit_test(test_no_user_namespaces),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
