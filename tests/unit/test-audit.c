/* Unit tests of the HMAC-chained audit log (src/audit/): the chain verifies; any single changed
 * byte is caught; torn tails, removed, reordered and forged lines are named precisely;
 * concurrent appenders from four processes leave one unforked chain; rotation keeps the chain
 * continuous across segments; a verified walk never hands on an entry that failed (edited,
 * deleted) and returns the caller's stop; a chain bound to a project neither verifies nor grows as
 * another project's, nor as an unbound one's. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <cordon/audit.h>
#include <cordon/keys.h>
#include <cordon/session.h>

#include "audit/entry.h"
#include "audit/log.h"
#include "base/fs.h"

static char tmp_root[] = "/tmp/cordon-test-audit.XXXXXX";
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

static char *fresh_dir(const char *name) {
  char *p = NULL;
  assert_true(asprintf(&p, "%s/%s", tmp_root, name) > 0);
  fs_remove_tree(p, NULL);
  return p;
}

static struct cordon_audit_log *open_log(const char *dir, uint64_t rotate) {
  struct cordon_audit_options opts = {.key_dir = key_dir, .rotate_bytes = rotate};
  struct cordon_audit_log *log = NULL;
  assert_int_equal(cordon_audit_open(dir, &opts, &log, NULL), 0);
  return log;
}

static void append_n(struct cordon_audit_log *log, int n, const char *tag) {
  for (int i = 0; i < n; i++) {
    char id[64], details[128];
    snprintf(id, sizeof(id), "%s-%d", tag, i);
    snprintf(details, sizeof(details), "{\"i\":%d,\"note\":\"entry %d of %s\",\"ok\":true}", i, i,
             tag);
    struct cordon_audit_event ev = {"test.event", "user:tester", "thing", id, details};
    struct cordon_error *err = NULL;
    char hmac[65];
    if (cordon_audit_append(log, &ev, hmac, &err) < 0)
      fail_msg("append: %s", err ? err->message : "?");
    assert_int_equal(strlen(hmac), 64);
  }
}

static void verify(struct cordon_audit_log *log, struct cordon_audit_report *report) {
  struct cordon_error *err = NULL;
  if (cordon_audit_verify(log, report, &err) < 0)
    fail_msg("verify could not run: %s", err ? err->message : "?");
}

static void expect_ok(struct cordon_audit_log *log, uint64_t entries) {
  struct cordon_audit_report r;
  verify(log, &r);
  if (r.problem != CORDON_AUDIT_OK)
    fail_msg("verify: %s at %s:%llu: %s", cordon_audit_problem_name(r.problem), r.file,
             (unsigned long long)r.line, r.reason);
  assert_int_equal(r.entries, entries);
  cordon_audit_report_clear(&r);
}

static void expect_problem(struct cordon_audit_log *log, enum cordon_audit_problem problem,
                           const char *file_suffix, uint64_t line) {
  struct cordon_audit_report r;
  verify(log, &r);
  if (r.problem != problem)
    fail_msg("expected %s, got %s (%s)", cordon_audit_problem_name(problem),
             cordon_audit_problem_name(r.problem), r.reason ? r.reason : "");
  assert_non_null(r.reason);
  assert_non_null(r.file);
  if (file_suffix) {
    size_t n = strlen(r.file), m = strlen(file_suffix);
    assert_true(n >= m && !strcmp(r.file + n - m, file_suffix));
  }
  if (line)
    assert_int_equal(r.line, line);
  cordon_audit_report_clear(&r);
}

static char *segment_path(const char *dir, int n) {
  char *p = NULL;
  assert_true(asprintf(&p, "%s/audit-%06d.jsonl", dir, n) > 0);
  return p;
}

static char *slurp(const char *path, size_t *length) {
  unsigned char *data = NULL;
  assert_int_equal(fs_read_file(path, 1u << 26, &data, length, NULL), 0);
  return (char *)data;
}

static void put(const char *path, const char *data, size_t length) {
  int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, data, length), (ssize_t)length);
  close(fd);
}

/* The n-th line (1-based) of text: start offset and length including its newline. */
static void line_span(const char *text, int n, size_t *start, size_t *length) {
  size_t at = 0;
  for (int i = 1; i < n; i++)
    at += strcspn(text + at, "\n") + 1;
  *start = at;
  *length = strcspn(text + at, "\n") + 1;
}

static void test_chain_verifies(void **state) {
  (void)state;
  char *dir = fresh_dir("basic");
  struct cordon_audit_log *log = open_log(dir, 0);
  expect_ok(log, 0); /* no log yet: nothing to verify */
  append_n(log, 5, "a");
  struct cordon_audit_report r;
  verify(log, &r);
  assert_int_equal(r.problem, CORDON_AUDIT_OK);
  assert_int_equal(r.entries, 5);
  assert_int_equal(r.segments, 1);
  char head[65];
  strcpy(head, r.head);
  cordon_audit_report_clear(&r);

  char *seg = segment_path(dir, 1);
  struct stat st;
  assert_int_equal(stat(seg, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0600);
  size_t length;
  char *text = slurp(seg, &length);
  /* The first entry links to genesis, the file ends in a newline, the head is the last HMAC. */
  assert_non_null(strstr(text, "\"prev\":\"0000000000000000000000000000000000000000000000000000000"
                               "000000000\""));
  assert_int_equal(text[length - 1], '\n');
  assert_non_null(strstr(text, head));
  assert_true(strncmp(text, "{\"actor\":\"user:tester\",\"details\":{\"i\":0,", 40) == 0);
  free(text);

  /* A fresh handle (another process, say) goes on from the same head. */
  struct cordon_audit_log *again = open_log(dir, 0);
  char hmac[65];
  struct cordon_audit_event ev = {"x", "y", "z", NULL, NULL};
  assert_int_equal(cordon_audit_append(again, &ev, hmac, NULL), 0);
  text = slurp(seg, &length);
  char want[80];
  snprintf(want, sizeof(want), "\"prev\":\"%s\"", head);
  assert_non_null(strstr(text, want));
  assert_non_null(strstr(text, "\"details\":{}"));
  assert_non_null(strstr(text, "\"resource_id\":\"\""));
  free(text);
  expect_ok(log, 6);
  /* A temp file left by a crashed segment creation is swept by the next append. */
  char *stale = NULL;
  assert_true(asprintf(&stale, "%s/.audit-000002.jsonl.tmp-0123456789abcdef", dir) > 0);
  assert_int_equal(fs_write_atomic(stale, "x", 1, 0600, NULL), 0);
  assert_int_equal(cordon_audit_append(again, &ev, hmac, NULL), 0);
  assert_int_equal(access(stale, F_OK), -1);
  free(stale);
  expect_ok(log, 7);
  cordon_audit_close(again);
  cordon_audit_close(log);
  free(seg);
  free(dir);
}

/* Flip every byte of the log, one at a time: verify must fail every time. */
static void test_every_byte_flip_detected(void **state) {
  (void)state;
  char *dir = fresh_dir("flip");
  struct cordon_audit_log *log = open_log(dir, 0);
  append_n(log, 3, "f");
  char *seg = segment_path(dir, 1);
  size_t length;
  char *orig = slurp(seg, &length);
  char *copy = malloc(length);
  static const unsigned char flips[] = {0x01, 0x02, 0x20, 0x80};
  for (size_t i = 0; i < length; i++) {
    for (size_t f = 0; f < sizeof(flips); f++) {
      memcpy(copy, orig, length);
      copy[i] = (char)(copy[i] ^ flips[f]);
      put(seg, copy, length);
      struct cordon_audit_report r;
      verify(log, &r);
      if (r.problem == CORDON_AUDIT_OK)
        fail_msg("byte %zu ^ %02x went unnoticed", i, flips[f]);
      assert_non_null(r.reason);
      cordon_audit_report_clear(&r);
    }
  }
  put(seg, orig, length);
  expect_ok(log, 3);
  free(copy);
  free(orig);
  free(seg);
  cordon_audit_close(log);
  free(dir);
}

static void test_torn_tail(void **state) {
  (void)state;
  char *dir = fresh_dir("torn");
  struct cordon_audit_log *log = open_log(dir, 0);
  append_n(log, 4, "t");
  char *seg = segment_path(dir, 1);
  size_t length;
  char *orig = slurp(seg, &length);
  /* A crash in the middle of writing a fifth line. */
  int fd = open(seg, O_WRONLY | O_APPEND | O_CLOEXEC);
  assert_int_equal(write(fd, orig, 57), 57);
  close(fd);

  struct cordon_audit_report r;
  verify(log, &r);
  assert_int_equal(r.problem, CORDON_AUDIT_MISSING_NEWLINE);
  assert_int_equal(r.line, 5);
  assert_int_equal(r.offset, length);
  assert_int_equal(r.entries, 4);
  assert_non_null(strstr(r.reason, "57 bytes"));
  assert_string_equal(r.file, seg);
  cordon_audit_report_clear(&r);

  /* Appending over it is refused, naming the line. */
  struct cordon_audit_event ev = {"x", "y", "z", "", NULL};
  struct cordon_error *err = NULL;
  assert_true(cordon_audit_append(log, &ev, NULL, &err) < 0);
  assert_int_equal(err->kind, CORDON_ERR_INTEGRITY);
  assert_non_null(strstr(err->message, "line 5"));
  assert_non_null(strstr(err->message, "torn"));
  cordon_error_free(err);

  /* repair drops exactly the torn bytes and records itself in the chain. */
  uint64_t dropped = 0;
  assert_int_equal(cordon_audit_repair(log, "user:tester", &dropped, NULL), 0);
  assert_int_equal(dropped, 57);
  expect_ok(log, 5);
  size_t after;
  char *text = slurp(seg, &after);
  assert_memory_equal(text, orig, length);
  assert_non_null(strstr(text + length, "\"event\":\"audit.repair\""));
  assert_non_null(strstr(text + length, "\"dropped_bytes\":57"));
  free(text);
  assert_int_equal(cordon_audit_repair(log, NULL, &dropped, NULL), 0);
  assert_int_equal(dropped, 0);

  /* A torn line that is the whole file. */
  char *dir2 = fresh_dir("torn-only");
  assert_int_equal(fs_mkdir_p(dir2, 0700, NULL), 0);
  char *seg2 = segment_path(dir2, 1);
  assert_int_equal(fs_write_atomic(seg2, "{\"actor\":", 9, 0600, NULL), 0);
  struct cordon_audit_log *log2 = open_log(dir2, 0);
  verify(log2, &r);
  assert_int_equal(r.problem, CORDON_AUDIT_MISSING_NEWLINE);
  assert_int_equal(r.line, 1);
  assert_int_equal(r.offset, 0);
  cordon_audit_report_clear(&r);
  cordon_audit_close(log2);
  free(seg2);
  free(dir2);

  free(orig);
  free(seg);
  cordon_audit_close(log);
  free(dir);
}

static void test_removed_reordered_forged(void **state) {
  (void)state;
  char *dir = fresh_dir("tamper");
  struct cordon_audit_log *log = open_log(dir, 0);
  append_n(log, 6, "r");
  char *seg = segment_path(dir, 1);
  size_t length;
  char *orig = slurp(seg, &length);
  char *work = malloc(2 * length);

  /* Remove line 3: line 4 (now line 3) does not link. */
  size_t s3, l3, s4, l4;
  line_span(orig, 3, &s3, &l3);
  line_span(orig, 4, &s4, &l4);
  memcpy(work, orig, s3);
  memcpy(work + s3, orig + s3 + l3, length - s3 - l3);
  put(seg, work, length - l3);
  expect_problem(log, CORDON_AUDIT_BROKEN_LINK, "audit-000001.jsonl", 3);

  /* Swap lines 3 and 4. */
  memcpy(work, orig, length);
  memcpy(work + s3, orig + s4, l4);
  memcpy(work + s3 + l4, orig + s3, l3);
  put(seg, work, length);
  expect_problem(log, CORDON_AUDIT_BROKEN_LINK, NULL, 3);

  /* Duplicate line 2. */
  size_t s2, l2;
  line_span(orig, 2, &s2, &l2);
  memcpy(work, orig, s2 + l2);
  memcpy(work + s2 + l2, orig + s2, length - s2);
  put(seg, work, length + l2);
  expect_problem(log, CORDON_AUDIT_BROKEN_LINK, NULL, 3);

  /* Drop the first line: the new first line does not link to genesis. */
  size_t s1, l1;
  line_span(orig, 1, &s1, &l1);
  put(seg, orig + l1, length - l1);
  expect_problem(log, CORDON_AUDIT_BROKEN_LINK, NULL, 1);

  /* Change a value and keep the line canonical: bad HMAC. */
  memcpy(work, orig, length);
  char *hit = strstr(work + s4, "entry 3 of r");
  assert_non_null(hit);
  hit[6] = '9';
  put(seg, work, length);
  expect_problem(log, CORDON_AUDIT_BAD_HMAC, NULL, 4);

  /* A non-canonical spelling of the same entry. */
  memcpy(work, orig, s2);
  work[s2] = ' ';
  memcpy(work + s2 + 1, orig + s2, length - s2);
  put(seg, work, length + 1);
  expect_problem(log, CORDON_AUDIT_MALFORMED, NULL, 2);

  /* Garbage, an empty line, and a wrong shape. */
  memcpy(work, orig, s2);
  memcpy(work + s2, "hello\n", 6);
  memcpy(work + s2 + 6, orig + s2, length - s2);
  put(seg, work, length + 6);
  expect_problem(log, CORDON_AUDIT_MALFORMED, NULL, 2);
  memcpy(work + s2, "\n", 1);
  memcpy(work + s2 + 1, orig + s2, length - s2);
  put(seg, work, length + 1);
  expect_problem(log, CORDON_AUDIT_MALFORMED, NULL, 2);
  memcpy(work + s2, "{}\n", 3);
  memcpy(work + s2 + 3, orig + s2, length - s2);
  put(seg, work, length + 3);
  expect_problem(log, CORDON_AUDIT_MALFORMED, NULL, 2);

  /* Appending past a forged last line is refused. */
  size_t s6, l6;
  line_span(orig, 6, &s6, &l6);
  memcpy(work, orig, length);
  hit = strstr(work + s6, "tester");
  assert_non_null(hit);
  hit[0] = 'T';
  put(seg, work, length);
  struct cordon_audit_event ev = {"x", "y", "z", "", NULL};
  struct cordon_error *err = NULL;
  assert_true(cordon_audit_append(log, &ev, NULL, &err) < 0);
  assert_non_null(strstr(err->message, "bad_hmac"));
  cordon_error_free(err);

  put(seg, orig, length);
  expect_ok(log, 6);
  free(work);
  free(orig);
  free(seg);
  cordon_audit_close(log);
  free(dir);
}

static void test_wrong_or_missing_key(void **state) {
  (void)state;
  char *dir = fresh_dir("wrongkey");
  struct cordon_audit_log *log = open_log(dir, 0);
  append_n(log, 2, "k");
  cordon_audit_close(log);

  char *other = fresh_dir("otherkeys");
  assert_int_equal(cordon_key_init(other, NULL, NULL), 0);
  struct cordon_audit_options opts = {.key_dir = other};
  assert_int_equal(cordon_audit_open(dir, &opts, &log, NULL), 0);
  expect_problem(log, CORDON_AUDIT_BAD_HMAC, NULL, 1);
  cordon_audit_close(log);

  /* With entries present, a missing key is never silently replaced. */
  char *none = fresh_dir("nokeys");
  opts.key_dir = none;
  assert_int_equal(cordon_audit_open(dir, &opts, &log, NULL), 0);
  struct cordon_audit_event ev = {"x", "y", "z", "", NULL};
  struct cordon_error *err = NULL;
  assert_true(cordon_audit_append(log, &ev, NULL, &err) < 0);
  assert_int_equal(err->kind, CORDON_ERR_NOT_FOUND);
  cordon_error_free(err);
  err = NULL;
  struct cordon_audit_report r;
  assert_true(cordon_audit_verify(log, &r, &err) < 0);
  cordon_error_free(err);
  cordon_audit_report_clear(&r);
  cordon_audit_close(log);
  assert_int_equal(access(none, F_OK), -1);

  /* An empty log creates its key on the first append. */
  char *fresh = fresh_dir("freshlog");
  assert_int_equal(cordon_audit_open(fresh, &opts, &log, NULL), 0);
  assert_int_equal(cordon_audit_append(log, &ev, NULL, NULL), 0);
  expect_ok(log, 1);
  cordon_audit_close(log);
  free(fresh);
  free(none);
  free(other);
  free(dir);
}

static void test_bad_events(void **state) {
  (void)state;
  char *dir = fresh_dir("badevents");
  struct cordon_audit_log *log = open_log(dir, 0);
  append_n(log, 1, "b");
  struct {
    struct cordon_audit_event ev;
    const char *needle;
  } cases[] = {
      {{"", "a", "t", "i", NULL}, "event"},
      {{"e", "", "t", "i", NULL}, "actor"},
      {{"e", "a", "", "i", NULL}, "resource type"},
      {{NULL, "a", "t", "i", NULL}, "event"},
      {{"e", "a", "t", "i", "[1,2]"}, "object"},
      {{"e", "a", "t", "i", "{\"a\":"}, "invalid JSON"},
      {{"e", "a", "t", "i", "{\"a\":1,\"a\":2}"}, "invalid JSON"},
      {{"e\xff", "a", "t", "i", NULL}, "UTF-8"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct cordon_error *err = NULL;
    assert_true(cordon_audit_append(log, &cases[i].ev, NULL, &err) < 0);
    assert_int_equal(err->kind, CORDON_ERR_USAGE);
    if (!strstr(err->message, cases[i].needle))
      fail_msg("case %zu: '%s' lacks '%s'", i, err->message, cases[i].needle);
    cordon_error_free(err);
  }
  /* A batch with one bad event writes nothing. */
  struct cordon_audit_event batch[] = {{"ok", "a", "t", "1", NULL}, {"", "a", "t", "2", NULL}};
  struct cordon_error *err = NULL;
  assert_true(cordon_audit_append_many(log, batch, 2, NULL, &err) < 0);
  cordon_error_free(err);
  /* Too long a field, too long a line. */
  char *big = malloc(CORDON_AUDIT_MAX_LINE);
  memset(big, 'x', CORDON_AUDIT_MAX_FIELD + 1);
  big[CORDON_AUDIT_MAX_FIELD + 1] = 0;
  struct cordon_audit_event ev = {"e", big, "t", "i", NULL};
  err = NULL;
  assert_true(cordon_audit_append(log, &ev, NULL, &err) < 0);
  cordon_error_free(err);
  /* Details are bounded (half a line); just under the bound is fine. */
  for (int over = 1; over >= 0; over--) {
    size_t n = CORDON_AUDIT_MAX_LINE / 2 + (over ? 10 : -100);
    memcpy(big, "{\"k\":\"", 6);
    memset(big + 6, 'y', n - 8);
    memcpy(big + n - 2, "\"}", 3);
    ev.actor = "a";
    ev.details_json = big;
    err = NULL;
    int r = cordon_audit_append(log, &ev, NULL, &err);
    assert_int_equal(r < 0, over);
    if (over)
      assert_non_null(strstr(err->message, "larger than"));
    cordon_error_free(err);
  }
  free(big);
  expect_ok(log, 2);
  cordon_audit_close(log);
  free(dir);
}

/* Four processes appending at once leave one chain that verifies. */
static void test_concurrent_appenders(void **state) {
  (void)state;
  char *dir = fresh_dir("concurrent");
  enum { PROCS = 4, EACH = 60 };
  for (int p = 0; p < PROCS; p++) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      struct cordon_audit_options opts = {.key_dir = key_dir, .rotate_bytes = 8192};
      struct cordon_audit_log *log = NULL;
      if (cordon_audit_open(dir, &opts, &log, NULL) < 0)
        _exit(1);
      for (int i = 0; i < EACH; i++) {
        char id[32];
        snprintf(id, sizeof(id), "p%d-%d", p, i);
        struct cordon_audit_event ev = {"concurrent", "proc", "n", id, NULL};
        if (i % 10 == 8) { /* some batches too */
          struct cordon_audit_event two[2] = {ev, ev};
          two[1].event = "concurrent.batch";
          if (cordon_audit_append_many(log, two, 2, NULL, NULL) < 0)
            _exit(2);
          i++;
          continue;
        }
        if (cordon_audit_append(log, &ev, NULL, NULL) < 0)
          _exit(3);
      }
      cordon_audit_close(log);
      _exit(0);
    }
  }
  for (int p = 0; p < PROCS; p++) {
    int status;
    assert_true(wait(&status) > 0);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
  }
  struct cordon_audit_log *log = open_log(dir, 8192);
  struct cordon_audit_report r;
  verify(log, &r);
  if (r.problem != CORDON_AUDIT_OK)
    fail_msg("%s at %s:%llu: %s", cordon_audit_problem_name(r.problem), r.file,
             (unsigned long long)r.line, r.reason);
  assert_int_equal(r.entries, PROCS * EACH);
  assert_true(r.segments > 1);
  cordon_audit_report_clear(&r);
  cordon_audit_close(log);
  free(dir);
}

struct collected {
  int count;
  char last_hmac[65];
  char first_prev_of_segment2[65];
  bool ok;
};

static int collect(const struct cordon_audit_entry *e, void *userdata) {
  struct collected *c = userdata;
  c->count++;
  if (e->index != (uint64_t)c->count)
    c->ok = false;
  if (strstr(e->file, "audit-000002.jsonl") && e->line == 1)
    strcpy(c->first_prev_of_segment2, e->prev);
  if (!strstr(e->file, "audit-000002.jsonl") && !c->first_prev_of_segment2[0])
    strcpy(c->last_hmac, e->hmac);
  return 0;
}

static void test_rotation(void **state) {
  (void)state;
  char *dir = fresh_dir("rotate");
  struct cordon_audit_log *log = open_log(dir, 1500);
  append_n(log, 20, "rot");
  /* And a batch that itself spans segments. */
  struct cordon_audit_event batch[12];
  for (int i = 0; i < 12; i++)
    batch[i] = (struct cordon_audit_event){"batch", "user:tester", "thing", "b",
                                           "{\"pad\":"
                                           "\"0123456789012345678901234567890123456789\"}"};
  char last[65];
  assert_int_equal(cordon_audit_append_many(log, batch, 12, last, NULL), 0);
  struct cordon_audit_report r;
  verify(log, &r);
  assert_int_equal(r.problem, CORDON_AUDIT_OK);
  assert_int_equal(r.entries, 32);
  assert_string_equal(r.head, last);
  size_t segments = r.segments;
  assert_true(segments >= 4);
  cordon_audit_report_clear(&r);

  for (size_t s = 1; s <= segments; s++) {
    char *p = segment_path(dir, (int)s);
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    assert_true(st.st_size > 0 && st.st_size <= 1500);
    assert_int_equal(st.st_mode & 0777, 0600);
    free(p);
  }
  /* The first entry of segment 2 links to the last HMAC of segment 1. */
  struct collected c = {.ok = true};
  assert_int_equal(cordon_audit_foreach(log, collect, &c, NULL), 0);
  assert_true(c.ok);
  assert_int_equal(c.count, 32);
  assert_string_equal(c.first_prev_of_segment2, c.last_hmac);

  /* Cutting the last line of segment 1 breaks the link at segment 2, line 1. */
  char *seg1 = segment_path(dir, 1);
  size_t length;
  char *orig = slurp(seg1, &length);
  char *nl = memrchr(orig, '\n', length - 1);
  put(seg1, orig, (size_t)(nl - orig) + 1);
  expect_problem(log, CORDON_AUDIT_BROKEN_LINK, "audit-000002.jsonl", 1);
  put(seg1, orig, length);
  expect_ok(log, 32);

  /* A missing segment in the middle is named. */
  char *seg2 = segment_path(dir, 2), *moved = NULL;
  assert_true(asprintf(&moved, "%s.away", seg2) > 0);
  assert_int_equal(rename(seg2, moved), 0);
  expect_problem(log, CORDON_AUDIT_MISSING_SEGMENT, "audit-000002.jsonl", 0);
  assert_int_equal(rename(moved, seg2), 0);
  expect_ok(log, 32);

  /* Stray files are ignored. */
  char *stray = NULL;
  assert_true(asprintf(&stray, "%s/audit-1.jsonl", dir) > 0);
  assert_int_equal(fs_write_atomic(stray, "junk", 4, 0600, NULL), 0);
  expect_ok(log, 32);
  free(stray);
  free(moved);
  free(seg2);
  free(orig);
  free(seg1);
  cordon_audit_close(log);
  free(dir);
}

static void test_large_batch(void **state) {
  (void)state;
  char *dir = fresh_dir("large");
  struct cordon_audit_log *log = open_log(dir, 256 * 1024);
  enum { N = 5000 };
  struct cordon_audit_event *evs = calloc(N, sizeof(*evs));
  for (int i = 0; i < N; i++)
    evs[i] = (struct cordon_audit_event){"bulk", "bench", "n", "x", "{\"k\":1}"};
  assert_int_equal(cordon_audit_append_many(log, evs, N, NULL, NULL), 0);
  assert_int_equal(cordon_audit_append_many(log, evs, N, NULL, NULL), 0);
  free(evs);
  struct cordon_audit_report r;
  verify(log, &r);
  assert_int_equal(r.problem, CORDON_AUDIT_OK);
  assert_int_equal(r.entries, 2 * N);
  assert_true(r.segments > 2);
  cordon_audit_report_clear(&r);
  cordon_audit_close(log);
  free(dir);
}

/* ---- project binding ---------------------------------------------------------------------- */

#define PROJECT_A "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1"
#define PROJECT_B "b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2"

static struct cordon_audit_log *open_bound(const char *dir, const char *project, uint64_t rotate) {
  struct cordon_audit_options opts = {
      .key_dir = key_dir, .rotate_bytes = rotate, .project_id = project};
  struct cordon_audit_log *log = NULL;
  assert_int_equal(cordon_audit_open(dir, &opts, &log, NULL), 0);
  return log;
}

static void test_genesis_check_pure(void **state) {
  (void)state;
  char reason[512];
  assert_int_equal(audit_genesis_check(PROJECT_A, PROJECT_A, reason, sizeof(reason)),
                   CORDON_AUDIT_OK);
  assert_int_equal(audit_genesis_check(AUDIT_GENESIS, AUDIT_GENESIS, reason, sizeof(reason)),
                   CORDON_AUDIT_OK);
  /* Another project's chain: both ids named. */
  assert_int_equal(audit_genesis_check(PROJECT_B, PROJECT_A, reason, sizeof(reason)),
                   CORDON_AUDIT_FOREIGN_PROJECT);
  assert_non_null(strstr(reason, PROJECT_A));
  assert_non_null(strstr(reason, PROJECT_B));
  /* A project that has no id yet is never handed someone else's chain. */
  assert_int_equal(audit_genesis_check(PROJECT_B, "", reason, sizeof(reason)),
                   CORDON_AUDIT_FOREIGN_PROJECT);
  assert_non_null(strstr(reason, PROJECT_B));
  /* A chain begun bound to no project, read as a project's. */
  assert_int_equal(audit_genesis_check(AUDIT_GENESIS, PROJECT_A, reason, sizeof(reason)),
                   CORDON_AUDIT_UNBOUND);
  assert_non_null(strstr(reason, PROJECT_A));
  /* A log bound to no project whose chain does not start from zeros: as before, a broken link. */
  assert_int_equal(audit_genesis_check(PROJECT_A, AUDIT_GENESIS, reason, sizeof(reason)),
                   CORDON_AUDIT_BROKEN_LINK);
}

static void test_project_binding(void **state) {
  (void)state;
  char *dir = fresh_dir("bound");
  struct cordon_audit_log *a = open_bound(dir, PROJECT_A, 0);
  append_n(a, 3, "a");
  struct cordon_audit_report r;
  verify(a, &r);
  assert_int_equal(r.problem, CORDON_AUDIT_OK);
  assert_int_equal(r.entries, 3);
  assert_string_equal(r.project_id, PROJECT_A);
  cordon_audit_report_clear(&r);
  /* The first entry chains to the project's id. */
  char *seg = segment_path(dir, 1);
  size_t len = 0;
  char *text = slurp(seg, &len);
  assert_non_null(strstr(text, "\"prev\":\"" PROJECT_A "\""));
  cordon_audit_close(a);

  /* The same files (same key) in project B: verify names both ids on line 1... */
  struct cordon_audit_log *b = open_bound(dir, PROJECT_B, 0);
  verify(b, &r);
  assert_int_equal(r.problem, CORDON_AUDIT_FOREIGN_PROJECT);
  assert_int_equal(r.line, 1);
  assert_int_equal(r.entry, 1);
  assert_int_equal(r.entries, 0);
  assert_non_null(strstr(r.reason, PROJECT_A));
  assert_non_null(strstr(r.reason, PROJECT_B));
  assert_null(strchr(r.reason, '\n'));
  assert_string_equal(r.project_id, PROJECT_A);
  cordon_audit_report_clear(&r);
  /* ...and B cannot extend it: nothing is written. */
  struct cordon_audit_event ev = {"e", "a", "t", "", NULL};
  struct cordon_error *err = NULL;
  assert_true(cordon_audit_append(b, &ev, NULL, &err) < 0);
  assert_int_equal(err->kind, CORDON_ERR_INTEGRITY);
  assert_non_null(strstr(err->message, "foreign_project"));
  assert_non_null(strstr(err->message, PROJECT_B));
  cordon_error_free(err);
  err = NULL;
  size_t len_after = 0;
  char *after = slurp(seg, &len_after);
  assert_int_equal(len_after, len);
  free(after);
  /* Nor repair it: a torn tail of another project's log is left as it is. */
  int fd = open(seg, O_WRONLY | O_APPEND | O_CLOEXEC);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, "{\"torn", 6), 6);
  close(fd);
  uint64_t dropped = 99;
  assert_true(cordon_audit_repair(b, "tester", &dropped, &err) < 0);
  assert_non_null(strstr(err->message, "foreign_project"));
  assert_int_equal(dropped, 0);
  cordon_error_free(err);
  err = NULL;
  after = slurp(seg, &len_after);
  assert_int_equal(len_after, len + 6);
  free(after);
  put(seg, text, len);
  cordon_audit_close(b);

  /* Opened as a log bound to no project, the chain does not start from zeros. */
  struct cordon_audit_log *unbound = open_log(dir, 0);
  expect_problem(unbound, CORDON_AUDIT_BROKEN_LINK, "audit-000001.jsonl", 1);
  cordon_audit_close(unbound);

  /* Its first entry removed, A's chain no longer begins from A. */
  size_t start, length;
  line_span(text, 1, &start, &length);
  put(seg, text + length, len - length);
  a = open_bound(dir, PROJECT_A, 0);
  expect_problem(a, CORDON_AUDIT_FOREIGN_PROJECT, "audit-000001.jsonl", 1);
  assert_true(cordon_audit_append(a, &ev, NULL, &err) < 0);
  cordon_error_free(err);
  err = NULL;
  cordon_audit_close(a);
  put(seg, text, len);
  free(text);
  free(seg);
  free(dir);

  /* A chain begun bound to no project (a log of an earlier cordon) is refused for a project,
   * by verify and by append, with the reason. */
  dir = fresh_dir("unbound");
  unbound = open_log(dir, 0);
  append_n(unbound, 2, "old");
  expect_ok(unbound, 2);
  cordon_audit_close(unbound);
  a = open_bound(dir, PROJECT_A, 0);
  expect_problem(a, CORDON_AUDIT_UNBOUND, "audit-000001.jsonl", 1);
  assert_true(cordon_audit_append(a, &ev, NULL, &err) < 0);
  assert_non_null(strstr(err->message, "unbound"));
  cordon_error_free(err);
  err = NULL;
  cordon_audit_close(a);
  free(dir);

  /* Rotation: the binding is the first entry of the whole chain, in the first segment. */
  dir = fresh_dir("bound-rotated");
  a = open_bound(dir, PROJECT_A, 1024);
  append_n(a, 20, "r");
  expect_ok(a, 20);
  cordon_audit_close(a);
  b = open_bound(dir, PROJECT_B, 1024);
  expect_problem(b, CORDON_AUDIT_FOREIGN_PROJECT, "audit-000001.jsonl", 1);
  cordon_audit_close(b);
  free(dir);

  /* A project id must be one: 64 lowercase hex digits, not the unbound genesis. */
  const char *bad[] = {AUDIT_GENESIS, "abc", PROJECT_A "0",
                       "A1A1A1A1A1A1A1A1A1A1A1A1A1A1A1A1A1A1A1A1A1A1A1A1A1A1A1A1A1A1A1A1"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    struct cordon_audit_options opts = {.key_dir = key_dir, .project_id = bad[i]};
    struct cordon_audit_log *log = NULL;
    assert_true(cordon_audit_open("/nonexistent", &opts, &log, &err) < 0);
    assert_int_equal(err->kind, CORDON_ERR_USAGE);
    assert_null(log);
    cordon_error_free(err);
    err = NULL;
  }
}

/* A genesis source for audit_open_bound: records how it was asked, answers from genesis_answer
 * ("" for none yet, NULL for an error). */
static int genesis_calls, genesis_creates;
static const char *genesis_answer;
static char genesis_seen_source[64];

static int fake_genesis(const char *source, bool create, char *out, struct cordon_error **err) {
  genesis_calls++;
  genesis_creates += create;
  snprintf(genesis_seen_source, sizeof(genesis_seen_source), "%s", source);
  if (!genesis_answer)
    return cordon_error_set(err, CORDON_ERR_INTEGRITY, 0, "no genesis here");
  snprintf(out, CORDON_AUDIT_HMAC_HEX_LEN + 1, "%s", genesis_answer);
  return out[0] ? 1 : 0;
}

/* The log learns a lazily bound genesis only when it needs it, once, from the function it was
 * given (the project's id, in the library; here a fake), and checks the chain against it. */
static void test_open_bound_asks_genesis_lazily(void **state) {
  (void)state;
  char *dir = fresh_dir("bound");
  const char *id = "1111111111111111111111111111111111111111111111111111111111111111";
  struct cordon_audit_options opts = {.key_dir = key_dir};
  struct cordon_audit_log *log = NULL;
  genesis_calls = genesis_creates = 0;
  genesis_answer = "";
  assert_int_equal(audit_open_bound(dir, &opts, fake_genesis, "src-1", &log, NULL), 0);
  assert_int_equal(genesis_calls, 0); /* opening asks nothing */
  expect_ok(log, 0);
  assert_int_equal(genesis_calls, 0); /* nor does verifying an empty log */
  genesis_answer = id;
  append_n(log, 2, "bound");
  assert_int_equal(genesis_calls, 1);
  assert_int_equal(genesis_creates, 1); /* the first append makes it */
  assert_string_equal(genesis_seen_source, "src-1");
  expect_ok(log, 2);
  assert_int_equal(genesis_calls, 1); /* known now: never asked again */
  cordon_audit_close(log);

  /* The chain begins from that id: a log bound to another id refuses it. */
  opts.project_id = "2222222222222222222222222222222222222222222222222222222222222222";
  log = open_log(dir, 0);
  cordon_audit_close(log);
  assert_int_equal(cordon_audit_open(dir, &opts, &log, NULL), 0);
  expect_problem(log, CORDON_AUDIT_FOREIGN_PROJECT, NULL, 1);
  cordon_audit_close(log);

  /* An explicit project id binds the chain; the function is never asked. */
  opts.project_id = id;
  assert_int_equal(audit_open_bound(dir, &opts, fake_genesis, "src-2", &log, NULL), 0);
  expect_ok(log, 2);
  assert_int_equal(genesis_calls, 1);
  cordon_audit_close(log);

  /* A fresh handle asks when it verifies (without making one); the function's error stops the
   * verification, naming the log. */
  opts.project_id = NULL;
  genesis_answer = NULL;
  assert_int_equal(audit_open_bound(dir, &opts, fake_genesis, "src-3", &log, NULL), 0);
  struct cordon_audit_report r;
  struct cordon_error *err = NULL;
  assert_true(cordon_audit_verify(log, &r, &err) < 0);
  assert_int_equal(err->kind, CORDON_ERR_INTEGRITY);
  assert_non_null(strstr(err->message, dir));
  assert_non_null(strstr(err->message, "no genesis here"));
  assert_int_equal(genesis_calls, 2);
  assert_int_equal(genesis_creates, 1);
  assert_string_equal(genesis_seen_source, "src-3");
  cordon_error_free(err);
  cordon_audit_close(log);
  free(dir);
}

/* A project's log, through its context: the id is made once in .cordon/project-id at the first
 * append, and another project's log copied in is refused with both ids. */
static void test_project_log_through_context(void **state) {
  (void)state;
  char *pa = fresh_dir("project-a"), *pb = fresh_dir("project-b");
  assert_int_equal(mkdir(pa, 0700), 0);
  assert_int_equal(mkdir(pb, 0700), 0);
  struct cordon_context *ca = NULL, *cb = NULL;
  assert_int_equal(cordon_context_open(pa, &ca, NULL), 0);
  assert_int_equal(cordon_context_open(pb, &cb, NULL), 0);
  char ida[CORDON_PROJECT_ID_HEX_LEN + 1], idb[CORDON_PROJECT_ID_HEX_LEN + 1];
  assert_int_equal(cordon_context_project_id(ca, false, ida, NULL), 0); /* none yet */
  assert_string_equal(ida, "");
  struct cordon_audit_options opts = {.key_dir = key_dir};
  struct cordon_audit_log *la = NULL, *lb = NULL;
  assert_int_equal(cordon_audit_open_project(ca, &opts, &la, NULL), 0);
  expect_ok(la, 0); /* verifying an empty log makes nothing */
  assert_int_equal(cordon_context_project_id(ca, false, ida, NULL), 0);
  append_n(la, 2, "a");
  assert_int_equal(cordon_context_project_id(ca, false, ida, NULL), 1);
  assert_int_equal(strlen(ida), 64);
  expect_ok(la, 2);
  assert_int_equal(cordon_audit_open_project(cb, &opts, &lb, NULL), 0);
  append_n(lb, 1, "b");
  assert_int_equal(cordon_context_project_id(cb, true, idb, NULL), 1);
  assert_string_not_equal(ida, idb);
  /* Stable: read again, the same id. */
  char again[CORDON_PROJECT_ID_HEX_LEN + 1];
  assert_int_equal(cordon_context_project_id(ca, true, again, NULL), 1);
  assert_string_equal(again, ida);

  /* B's log replaced by A's (same install key): refused, naming both ids. */
  char *seg_a = NULL, *seg_b = NULL;
  assert_true(asprintf(&seg_a, "%s/.cordon/audit/audit-000001.jsonl", pa) > 0);
  assert_true(asprintf(&seg_b, "%s/.cordon/audit/audit-000001.jsonl", pb) > 0);
  size_t len = 0;
  char *text = slurp(seg_a, &len);
  assert_int_equal(fs_write_atomic(seg_b, text, len, 0600, NULL), 0);
  cordon_audit_close(lb);
  assert_int_equal(cordon_audit_open_project(cb, &opts, &lb, NULL), 0);
  struct cordon_audit_report r;
  verify(lb, &r);
  assert_int_equal(r.problem, CORDON_AUDIT_FOREIGN_PROJECT);
  assert_non_null(strstr(r.reason, ida));
  assert_non_null(strstr(r.reason, idb));
  cordon_audit_report_clear(&r);
  /* A malformed project-id is an integrity error, not a new identity. */
  char *idfile = NULL;
  assert_true(asprintf(&idfile, "%s/.cordon/project-id", pa) > 0);
  assert_int_equal(fs_write_atomic(idfile, "xyz\n", 4, 0600, NULL), 0);
  struct cordon_error *err = NULL;
  assert_true(cordon_context_project_id(ca, true, again, &err) < 0);
  assert_int_equal(err->kind, CORDON_ERR_INTEGRITY);
  cordon_error_free(err);
  free(idfile);
  free(text);
  free(seg_a);
  free(seg_b);
  cordon_audit_close(la);
  cordon_audit_close(lb);
  cordon_context_free(ca);
  cordon_context_free(cb);
  free(pa);
  free(pb);
}

/* cordon_audit_verify_foreach hands each entry on only after its HMAC and its place in the
 * chain verified: an edited line is never seen (the walk stops before it, naming it), a deleted
 * line stops the walk at the entry whose link breaks, the caller's own stop is returned. */
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

static void test_walk_intact_chain(void **state) {
  (void)state;
  char *dir = fresh_dir("walk-intact");
  struct cordon_audit_log *log = open_log(dir, 600); /* rotates: several segments */
  append_n(log, 9, "alpha");
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
  verify(log, &plain);
  assert_string_equal(plain.head, r.head);
  cordon_audit_report_clear(&plain);
  cordon_audit_report_clear(&r);
  cordon_audit_close(log);
  free(dir);
}

static void test_walk_never_hands_on_an_edited_line(void **state) {
  (void)state;
  char *dir = fresh_dir("walk-edited");
  struct cordon_audit_log *log = open_log(dir, 0);
  append_n(log, 5, "alpha");
  char *seg = segment_path(dir, 1);
  size_t n, start, length;
  char *text = slurp(seg, &n);
  /* Entry 3's details: "alpha" becomes "beta!" (same length, still well-formed JSON). */
  line_span(text, 3, &start, &length);
  char *word = memmem(text + start, length, "alpha", 5);
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

static void test_walk_stops_at_a_deleted_line(void **state) {
  (void)state;
  char *dir = fresh_dir("walk-deleted");
  struct cordon_audit_log *log = open_log(dir, 0);
  append_n(log, 5, "alpha");
  char *seg = segment_path(dir, 1);
  size_t n, start, length;
  char *text = slurp(seg, &n);
  line_span(text, 2, &start, &length);
  memmove(text + start, text + start + length, n - start - length);
  put(seg, text, n - length);
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

static void test_walk_returns_the_callers_stop(void **state) {
  (void)state;
  char *dir = fresh_dir("walk-stop");
  struct cordon_audit_log *log = open_log(dir, 0);
  append_n(log, 4, "alpha");
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

/* foreach_event hands on only the entries of its events, with their places in the whole chain,
 * and a line that cannot be read still stops it. */
static void test_foreach_event_filters(void **state) {
  (void)state;
  char *dir = fresh_dir("foreach-event");
  struct cordon_audit_log *log = open_log(dir, 0);
  for (int i = 0; i < 6; i++) {
    char id[16];
    snprintf(id, sizeof(id), "r-%d", i);
    /* A decoy: a nested "event" naming the prefix in an entry of another event. */
    struct cordon_audit_event ev = {i % 3 == 0 ? "pool.registered" : "session.created",
                                    "user:tester", "thing", id,
                                    "{\"event\":\"pool.decoy\",\"n\":1}"};
    char hmac[65];
    assert_int_equal(cordon_audit_append(log, &ev, hmac, NULL), 0);
  }
  struct seen s = {0};
  assert_int_equal(cordon_audit_foreach_event(log, "pool.", record, &s, NULL), 0);
  assert_int_equal(s.count, 2);
  assert_int_equal(s.indexes[0], 1);
  assert_int_equal(s.indexes[1], 4);
  /* A line that is not an entry, among the skipped events, still stops the walk. */
  char *seg = segment_path(dir, 1);
  size_t n, start, length;
  char *text = slurp(seg, &n);
  line_span(text, 2, &start, &length);
  text[start + 1] = ' '; /* {"actor" becomes { actor": not JSON */
  put(seg, text, n);
  struct cordon_error *err = NULL;
  memset(&s, 0, sizeof(s));
  assert_true(cordon_audit_foreach_event(log, "pool.", record, &s, &err) < 0);
  assert_non_null(err);
  assert_non_null(strstr(err->message, "line 2"));
  cordon_error_free(err);
  free(text);
  free(seg);
  cordon_audit_close(log);
  free(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_genesis_check_pure),
      cmocka_unit_test(test_project_binding),
      cmocka_unit_test(test_open_bound_asks_genesis_lazily),
      cmocka_unit_test(test_project_log_through_context),
      cmocka_unit_test(test_chain_verifies),
      cmocka_unit_test(test_every_byte_flip_detected),
      cmocka_unit_test(test_torn_tail),
      cmocka_unit_test(test_removed_reordered_forged),
      cmocka_unit_test(test_wrong_or_missing_key),
      cmocka_unit_test(test_bad_events),
      cmocka_unit_test(test_concurrent_appenders),
      cmocka_unit_test(test_rotation),
      cmocka_unit_test(test_large_batch),
      cmocka_unit_test(test_walk_intact_chain),
      cmocka_unit_test(test_walk_never_hands_on_an_edited_line),
      cmocka_unit_test(test_walk_stops_at_a_deleted_line),
      cmocka_unit_test(test_walk_returns_the_callers_stop),
      cmocka_unit_test(test_foreach_event_filters),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
