/* obs/events: the line format and its parse, time forms, rotation at the bound, appenders in
 * many processes at once (every line whole), the reader's handling of a torn last line, and
 * the follower across one and two rotations, a truncation, and a state directory made late. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/fs.h"
#include "obs/events.h"

static char *make_dir(void) {
  char tmpl[] = "/tmp/test-events-XXXXXX";
  char *dir = mkdtemp(tmpl);
  assert_non_null(dir);
  return strdup(dir);
}

static void remove_dir(char *dir) {
  struct cordon_error *err = NULL;
  fs_remove_tree(dir, &err);
  cordon_error_free(err);
  free(dir);
}

static struct obs_event exec_event(int code) {
  struct obs_event e = {.time = {.tv_sec = 1796198400, .tv_nsec = 123456789},
                        .has_exit_code = true,
                        .exit_code = code,
                        .duration_seconds = 0.25};
  obs_event_set(&e, "exec", "ns", "0123456789abcdef");
  return e;
}

static void test_format(void **state) {
  (void)state;
  char line[OBS_EVENT_LINE_MAX];
  struct obs_event e = exec_event(3);
  int n = obs_event_format(&e, line, sizeof(line));
  assert_int_equal(n, (int)strlen(line));
  assert_string_equal(line, "{\"time\": \"2026-12-02T08:00:00.123Z\", \"verb\": \"exec\", "
                            "\"backend\": \"ns\", \"session\": \"0123456789abcdef\", "
                            "\"exit_code\": 3, \"duration_seconds\": 0.250000}\n");
  /* create and destroy carry no exit code; a failure says so */
  struct obs_event c = {.time = e.time, .failed = true, .duration_seconds = 1.5};
  obs_event_set(&c, "create", "docker", NULL);
  n = obs_event_format(&c, line, sizeof(line));
  assert_true(n > 0);
  assert_string_equal(line, "{\"time\": \"2026-12-02T08:00:00.123Z\", \"verb\": \"create\", "
                            "\"backend\": \"docker\", \"session\": \"\", "
                            "\"duration_seconds\": 1.500000, \"failed\": true}\n");
  /* a plugin's odd name is escaped, and the line parses back */
  struct obs_event odd = e;
  obs_event_set(&odd, "exec", "we\"ird\\\n", "s");
  n = obs_event_format(&odd, line, sizeof(line));
  assert_true(n > 0);
  struct obs_event back;
  assert_int_equal(obs_event_parse(line, (size_t)n - 1, &back), 0);
  assert_string_equal(back.backend, "we\"ird\\\n");
  /* too small a buffer: refused, never cut */
  assert_int_equal(obs_event_format(&e, line, 40), -1);
}

static void test_parse(void **state) {
  (void)state;
  char line[OBS_EVENT_LINE_MAX];
  struct obs_event e = exec_event(127), back;
  int n = obs_event_format(&e, line, sizeof(line));
  assert_int_equal(obs_event_parse(line, (size_t)n - 1, &back), 0);
  assert_string_equal(back.verb, "exec");
  assert_string_equal(back.backend, "ns");
  assert_string_equal(back.session, "0123456789abcdef");
  assert_true(back.has_exit_code);
  assert_int_equal(back.exit_code, 127);
  assert_int_equal(back.time.tv_sec, e.time.tv_sec);
  assert_int_equal(back.time.tv_nsec, 123000000);
  assert_false(back.failed);
  const char *bad[] = {
      "",
      "{",
      "[]",
      "{\"time\": \"x\", \"verb\": \"exec\", \"backend\": \"ns\", \"session\": "
      "\"a\", \"duration_seconds\": 1}",
      "{\"time\": \"2026-12-02T08:00:00Z\", \"verb\": \"exec\", \"backend\": \"ns\", "
      "\"session\": \"a\", \"duration_seconds\": \"1\"}",
      "{\"time\": \"2026-12-02T08:00:00Z\", \"verb\": \"exec\", \"backend\": \"ns\", "
      "\"session\": \"a\", \"exit_code\": 1.5, \"duration_seconds\": 1}",
      "{\"time\": \"2026-12-02T08:00:00Z\", \"verb\": \"exec\", \"backend\": \"ns\", "
      "\"duration_seconds\": 1}",
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    assert_int_equal(obs_event_parse(bad[i], strlen(bad[i]), &back), -1);
  /* a torn line ran into the next: the whole event after it is read */
  char joined[2 * OBS_EVENT_LINE_MAX];
  snprintf(joined, sizeof(joined), "{\"time\": \"2026-12-02T07:59%s", line);
  assert_int_equal(obs_event_parse(joined, strlen(joined) - 1, &back), 0);
  assert_int_equal(back.exit_code, 127);
}

static void test_time(void **state) {
  (void)state;
  struct timespec now = {.tv_sec = 1796198400, .tv_nsec = 0}, t;
  assert_int_equal(obs_time_parse("2026-12-02T08:00:00Z", &now, &t), 0);
  assert_int_equal(t.tv_sec, 1796198400);
  assert_int_equal(obs_time_parse("2026-12-02T08:00:00.5Z", &now, &t), 0);
  assert_int_equal(t.tv_nsec, 500000000);
  assert_int_equal(obs_time_parse("10m", &now, &t), 0);
  assert_int_equal(t.tv_sec, 1796198400 - 600);
  assert_int_equal(obs_time_parse("2d", &now, &t), 0);
  assert_int_equal(t.tv_sec, 1796198400 - 2 * 86400);
  const char *bad[] = {"",
                       "m",
                       "10",
                       "10x",
                       "-5m",
                       "2026-12-02",
                       "2026-12-02T08:00:00",
                       "2026-13-02T08:00:00Z",
                       "2026-12-02 08:00:00Z",
                       "2026-12-02T08:00:00.Z",
                       "2026-12-02T08:00:00+01:00"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    assert_int_equal(obs_time_parse(bad[i], &now, &t), -1);
}

static int count_line(void *data, const char *line, size_t n) {
  struct obs_event e;
  int *counts = data;
  if (obs_event_parse(line, n, &e) == 0)
    counts[0]++;
  else
    counts[1]++;
  return 0;
}

static void count_file(const char *dir, const char *name, int *good, int *bad) {
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  int counts[2] = {0, 0};
  if (fd >= 0) {
    off_t offset = 0;
    struct cordon_error *err = NULL;
    assert_int_equal(obs_events_read_fd(fd, &offset, count_line, counts, &err), 0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    assert_int_equal(offset, st.st_size); /* nothing left unread: every line ended */
    close(fd);
  }
  *good = counts[0];
  *bad = counts[1];
}

struct codes {
  int v[32];
  int n;
};

static int remember_code(void *data, const struct obs_event *e) {
  struct codes *c = data;
  if (c->n < 32)
    c->v[c->n++] = e->exit_code;
  return 0;
}

static void test_rotation(void **state) {
  (void)state;
  char *dir = make_dir();
  struct obs_event e = exec_event(10); /* every line as long: exit codes 10..34 */
  char line[OBS_EVENT_LINE_MAX];
  int n = obs_event_format(&e, line, sizeof(line));
  uint64_t bound = (uint64_t)n * 10; /* ten lines fit */
  struct cordon_error *err = NULL;
  for (int i = 0; i < 25; i++) {
    e.exit_code = 10 + i;
    assert_int_equal(obs_events_append(dir, &e, bound, &err), 0);
  }
  int good, bad;
  count_file(dir, OBS_EVENTS_FILE, &good, &bad);
  assert_int_equal(good, 5); /* 20..24 */
  assert_int_equal(bad, 0);
  count_file(dir, OBS_EVENTS_ROTATED, &good, &bad);
  assert_int_equal(good, 10); /* 10..19: the first .1 (0..9) was replaced */
  /* read_all: the rotated file first, oldest event first */
  struct codes codes = {.n = 0};
  assert_int_equal(obs_events_read_all(dir, remember_code, &codes, &err), 0);
  assert_int_equal(codes.n, 15);
  for (int i = 0; i < 15; i++)
    assert_int_equal(codes.v[i], 20 + i);
  struct stat st;
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", dir, OBS_EVENTS_FILE);
  assert_int_equal(stat(path, &st), 0);
  assert_true((uint64_t)st.st_size <= bound);
  remove_dir(dir);
}

/* Writers in many processes, rotating as they go: every line whole, none lost. */
static void test_concurrent(void **state) {
  (void)state;
  char *dir = make_dir();
  enum { WRITERS = 8, EACH = 400 };
  struct obs_event e = exec_event(0);
  char line[OBS_EVENT_LINE_MAX];
  int n = obs_event_format(&e, line, sizeof(line));
  uint64_t bound = (uint64_t)n * WRITERS * EACH; /* one rotation, or about */
  pid_t pids[WRITERS];
  for (int w = 0; w < WRITERS; w++) {
    pids[w] = fork();
    assert_true(pids[w] >= 0);
    if (pids[w] == 0) {
      struct obs_event mine = exec_event(w);
      for (int i = 0; i < EACH; i++) {
        mine.duration_seconds = i;
        struct cordon_error *err = NULL;
        if (obs_events_append(dir, &mine, bound * 3 / 4, &err) < 0)
          _exit(1);
      }
      _exit(0);
    }
  }
  for (int w = 0; w < WRITERS; w++) {
    int status = 0;
    assert_int_equal(waitpid(pids[w], &status, 0), pids[w]);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  int good, bad, good1, bad1;
  count_file(dir, OBS_EVENTS_FILE, &good, &bad);
  count_file(dir, OBS_EVENTS_ROTATED, &good1, &bad1);
  assert_int_equal(bad + bad1, 0);
  assert_int_equal(good + good1, WRITERS * EACH); /* rotated once: nothing dropped */
  remove_dir(dir);
}

static int collect(void *data, const char *line, size_t n) {
  (void)line;
  (*(size_t *)data) += n ? 1 : 0;
  return 0;
}

/* A last line without its newline is not handed over, nor consumed: once finished it is. */
static void test_torn_reader(void **state) {
  (void)state;
  char *dir = make_dir();
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", dir, OBS_EVENTS_FILE);
  int fd = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  assert_true(fd >= 0);
  char line[OBS_EVENT_LINE_MAX];
  struct obs_event e = exec_event(1);
  int n = obs_event_format(&e, line, sizeof(line));
  assert_int_equal(write(fd, line, (size_t)n), n);
  assert_int_equal(write(fd, line, 30), 30); /* torn */
  size_t lines = 0;
  off_t offset = 0;
  struct cordon_error *err = NULL;
  assert_int_equal(obs_events_read_fd(fd, &offset, collect, &lines, &err), 0);
  assert_int_equal(lines, 1);
  assert_int_equal(offset, n);
  assert_int_equal(write(fd, line + 30, (size_t)n - 30), n - 30); /* finished */
  assert_int_equal(obs_events_read_fd(fd, &offset, collect, &lines, &err), 0);
  assert_int_equal(lines, 2);
  assert_int_equal(offset, 2 * n);
  /* a line past the bound is skipped, the next one still read */
  char long_line[3 * OBS_EVENT_LINE_MAX];
  memset(long_line, 'x', sizeof(long_line) - 1);
  long_line[sizeof(long_line) - 1] = '\n';
  assert_int_equal(write(fd, long_line, sizeof(long_line)), (ssize_t)sizeof(long_line));
  assert_int_equal(write(fd, line, (size_t)n), n);
  assert_int_equal(obs_events_read_fd(fd, &offset, collect, &lines, &err), 0);
  assert_int_equal(lines, 3);
  close(fd);
  remove_dir(dir);
}

/* Append a line by hand (the log's own format, or a torn piece) to dir's log. */
static void put_text(const char *dir, const char *name, const char *text, size_t n) {
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, text, n), (ssize_t)n);
  close(fd);
}

static void put_event(const char *dir, int code) {
  char line[OBS_EVENT_LINE_MAX];
  struct obs_event e = exec_event(code);
  int n = obs_event_format(&e, line, sizeof(line));
  put_text(dir, OBS_EVENTS_FILE, line, (size_t)n);
}

static void rotate_by_hand(const char *dir) {
  char from[512], to[512];
  snprintf(from, sizeof(from), "%s/%s", dir, OBS_EVENTS_FILE);
  snprintf(to, sizeof(to), "%s/%s", dir, OBS_EVENTS_ROTATED);
  assert_int_equal(rename(from, to), 0);
}

/* The codes handed over by one poll. */
static struct codes poll_codes(struct obs_events_follower *f) {
  struct codes c = {0};
  struct cordon_error *err = NULL;
  assert_int_equal(obs_events_follow_poll(f, remember_code, &c, &err), 0);
  return c;
}

static void test_follow(void **state) {
  (void)state;
  char *dir = make_dir();
  put_event(dir, 1);
  rotate_by_hand(dir);
  put_event(dir, 2);
  struct obs_events_follower *all = NULL, *tail = NULL;
  struct cordon_error *err = NULL;
  assert_int_equal(obs_events_follow_new(dir, true, &all, &err), 0);
  assert_int_equal(obs_events_follow_new(dir, false, &tail, &err), 0);
  /* From the start: the .1, then the file; from the end: nothing yet. */
  struct codes c = poll_codes(all);
  assert_int_equal(c.n, 2);
  assert_int_equal(c.v[0], 1);
  assert_int_equal(c.v[1], 2);
  assert_int_equal(poll_codes(tail).n, 0);
  assert_int_equal(poll_codes(all).n, 0);
  /* A torn line waits; one rotation: the rest of the old file, then the new one. */
  char line[OBS_EVENT_LINE_MAX];
  struct obs_event e = exec_event(3);
  int n = obs_event_format(&e, line, sizeof(line));
  put_text(dir, OBS_EVENTS_FILE, line, 20);
  assert_int_equal(poll_codes(tail).n, 0);
  put_text(dir, OBS_EVENTS_FILE, line + 20, (size_t)n - 20);
  rotate_by_hand(dir);
  put_event(dir, 4);
  c = poll_codes(tail);
  assert_int_equal(c.n, 2);
  assert_int_equal(c.v[0], 3);
  assert_int_equal(c.v[1], 4);
  /* Two rotations between polls: the file between is now the .1, read whole. */
  put_event(dir, 5);
  rotate_by_hand(dir);
  put_event(dir, 6);
  rotate_by_hand(dir);
  put_event(dir, 7);
  c = poll_codes(tail);
  assert_int_equal(c.n, 3);
  assert_int_equal(c.v[0], 5);
  assert_int_equal(c.v[1], 6);
  assert_int_equal(c.v[2], 7);
  /* Three rotations since its last poll: the rest of the file it holds open, the .1, the new
   * file; the one before the .1 (4 and 5) is gone, as the log keeps one rotated file. */
  c = poll_codes(all);
  assert_int_equal(c.n, 3);
  assert_int_equal(c.v[0], 3);
  assert_int_equal(c.v[1], 6);
  assert_int_equal(c.v[2], 7);
  /* Truncated in place: read again from its start. */
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", dir, OBS_EVENTS_FILE);
  assert_int_equal(truncate(path, 0), 0);
  assert_int_equal(poll_codes(tail).n, 0);
  put_event(dir, 8);
  c = poll_codes(tail);
  assert_int_equal(c.n, 1);
  assert_int_equal(c.v[0], 8);
  obs_events_follow_free(all);
  obs_events_follow_free(tail);
  remove_dir(dir);
}

/* A state directory that does not exist yet is waited for; read_all finds nothing there. */
static void test_follow_late_dir(void **state) {
  (void)state;
  char *dir = make_dir();
  char late[600];
  snprintf(late, sizeof(late), "%s/state", dir);
  struct obs_events_follower *f = NULL;
  struct cordon_error *err = NULL;
  assert_int_equal(obs_events_follow_new(late, false, &f, &err), 0);
  assert_int_equal(poll_codes(f).n, 0);
  struct codes c = {0};
  assert_int_equal(obs_events_read_all(late, remember_code, &c, &err), 0);
  assert_int_equal(c.n, 0);
  assert_int_equal(mkdir(late, 0755), 0);
  put_event(late, 9);
  c = poll_codes(f);
  assert_int_equal(c.n, 1);
  assert_int_equal(c.v[0], 9);
  obs_events_follow_free(f);
  remove_dir(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_format),     cmocka_unit_test(test_parse),
      cmocka_unit_test(test_time),       cmocka_unit_test(test_rotation),
      cmocka_unit_test(test_concurrent), cmocka_unit_test(test_torn_reader),
      cmocka_unit_test(test_follow),     cmocka_unit_test(test_follow_late_dir),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
