/* Unit tests of cordon_audit_verify_foreach (src/audit/log.c): one pass that hands each entry
 * to the caller only after its HMAC and its place in the chain verified. An edited line is never
 * seen by the caller (the walk stops before it, naming it); a deleted line stops the walk at the
 * entry whose link breaks; the caller's own stop is returned; rotation keeps the walk whole. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <cordon/audit.h>
#include <cordon/keys.h>

#include "base/fs.h"

static char tmp_root[] = "/tmp/cordon-test-audit-walk.XXXXXX";
static char key_dir[256];

static int setup(void **state) {
  (void)state;
  if (!mkdtemp(tmp_root))
    return -1;
  snprintf(key_dir, sizeof(key_dir), "%s/keys", tmp_root);
  return cordon_key_init(key_dir, NULL, NULL);
}

static int teardown(void **state) {
  (void)state;
  fs_remove_tree(tmp_root, NULL);
  return 0;
}

static struct cordon_audit_log *open_log(const char *name, uint64_t rotate, char **dir) {
  assert_true(asprintf(dir, "%s/%s", tmp_root, name) > 0);
  struct cordon_audit_options opts = {.key_dir = key_dir, .rotate_bytes = rotate};
  struct cordon_audit_log *log = NULL;
  assert_int_equal(cordon_audit_open(*dir, &opts, &log, NULL), 0);
  return log;
}

static void append_n(struct cordon_audit_log *log, int n) {
  for (int i = 0; i < n; i++) {
    char id[32], details[64];
    snprintf(id, sizeof(id), "e-%d", i);
    snprintf(details, sizeof(details), "{\"i\":%d,\"word\":\"alpha\"}", i);
    struct cordon_audit_event ev = {"test.event", "user:tester", "thing", id, details};
    char hmac[65];
    assert_int_equal(cordon_audit_append(log, &ev, hmac, NULL), 0);
  }
}

struct seen {
  uint64_t count;
  uint64_t indexes[64];
  bool saw_beta;    /* an edited line's content reached the caller */
  uint64_t stop_at; /* 0: never stop */
};

static int record(const struct cordon_audit_entry *e, void *userdata) {
  struct seen *s = userdata;
  if (s->count < 64)
    s->indexes[s->count] = e->index;
  s->count++;
  if (strstr(e->details_json, "beta"))
    s->saw_beta = true;
  return s->stop_at && e->index == s->stop_at ? -1 : 0;
}

static char *segment(const char *dir, int n) {
  char *p = NULL;
  assert_true(asprintf(&p, "%s/audit-%06d.jsonl", dir, n) > 0);
  return p;
}

static char *slurp(const char *path, size_t *n) {
  char *text = malloc(1 << 16);
  assert_non_null(text);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  assert_true(fd >= 0);
  ssize_t got = read(fd, text, (1 << 16) - 1);
  close(fd);
  assert_true(got > 0);
  text[got] = 0;
  *n = (size_t)got;
  return text;
}

static void put(const char *path, const char *data, size_t n) {
  int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, data, n), (ssize_t)n);
  close(fd);
}

static void test_intact_chain_walks_every_entry(void **state) {
  (void)state;
  char *dir = NULL;
  struct cordon_audit_log *log = open_log("intact", 600, &dir); /* rotates: several segments */
  append_n(log, 9);
  struct cordon_audit_report r;
  struct seen s = {0};
  assert_int_equal(cordon_audit_verify_foreach(log, &r, record, &s, NULL), 0);
  assert_int_equal(r.problem, CORDON_AUDIT_OK);
  assert_int_equal(r.entries, 9);
  assert_true(r.segments > 1);
  assert_int_equal(s.count, 9);
  for (uint64_t i = 0; i < 9; i++)
    assert_int_equal(s.indexes[i], i + 1);
  /* The same verdict and head as verify alone. */
  struct cordon_audit_report plain;
  assert_int_equal(cordon_audit_verify(log, &plain, NULL), 0);
  assert_string_equal(plain.head, r.head);
  cordon_audit_report_clear(&plain);
  cordon_audit_report_clear(&r);
  cordon_audit_close(log);
  free(dir);
}

static void test_edited_line_is_never_handed_on(void **state) {
  (void)state;
  char *dir = NULL;
  struct cordon_audit_log *log = open_log("edited", 0, &dir);
  append_n(log, 5);
  char *seg = segment(dir, 1);
  size_t n;
  char *text = slurp(seg, &n);
  /* Entry 3's details: "alpha" becomes "beta!" (same length, still well-formed JSON). */
  size_t line3 = 0;
  for (int i = 1; i < 3; i++)
    line3 += strcspn(text + line3, "\n") + 1;
  char *word = strstr(text + line3, "alpha");
  assert_non_null(word);
  memcpy(word, "beta!", 5);
  put(seg, text, n);
  struct cordon_audit_report r;
  struct seen s = {0};
  assert_int_equal(cordon_audit_verify_foreach(log, &r, record, &s, NULL), 0);
  assert_int_not_equal(r.problem, CORDON_AUDIT_OK);
  assert_int_equal(r.entry, 3);
  assert_int_equal(r.line, 3);
  assert_int_equal(s.count, 2); /* entries 1 and 2, verified; never 3 */
  assert_false(s.saw_beta);
  cordon_audit_report_clear(&r);
  free(text);
  free(seg);
  cordon_audit_close(log);
  free(dir);
}

static void test_deleted_line_breaks_the_link(void **state) {
  (void)state;
  char *dir = NULL;
  struct cordon_audit_log *log = open_log("deleted", 0, &dir);
  append_n(log, 5);
  char *seg = segment(dir, 1);
  size_t n;
  char *text = slurp(seg, &n);
  size_t line2 = strcspn(text, "\n") + 1;
  size_t line3 = line2 + strcspn(text + line2, "\n") + 1;
  memmove(text + line2, text + line3, n - line3);
  put(seg, text, n - (line3 - line2));
  struct cordon_audit_report r;
  struct seen s = {0};
  assert_int_equal(cordon_audit_verify_foreach(log, &r, record, &s, NULL), 0);
  assert_int_equal(r.problem, CORDON_AUDIT_BROKEN_LINK);
  assert_int_equal(r.entry, 2);
  assert_int_equal(s.count, 1);
  cordon_audit_report_clear(&r);
  free(text);
  free(seg);
  cordon_audit_close(log);
  free(dir);
}

static void test_caller_stop_is_returned(void **state) {
  (void)state;
  char *dir = NULL;
  struct cordon_audit_log *log = open_log("stop", 0, &dir);
  append_n(log, 4);
  struct cordon_audit_report r;
  struct seen s = {.stop_at = 2};
  struct cordon_error *err = NULL;
  assert_true(cordon_audit_verify_foreach(log, &r, record, &s, &err) < 0);
  assert_non_null(err);
  cordon_error_free(err);
  assert_int_equal(s.count, 2);
  cordon_audit_report_clear(&r);
  cordon_audit_close(log);
  free(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_intact_chain_walks_every_entry),
      cmocka_unit_test(test_edited_line_is_never_handed_on),
      cmocka_unit_test(test_deleted_line_breaks_the_link),
      cmocka_unit_test(test_caller_stop_is_returned),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
