/* Unit tests of the server's pure parts beside its tokens (test-jwt.c): the session manifest
 * and exec request from the API's JSON (src/server/manifest-json.c, exec-request.c), the
 * Prometheus rendering (metrics.c) and the event log's follower across a rotation and a torn
 * last line (events.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/fs.h"
#include "server/manifest-json.h"
#include "server/metrics.h"
#include "server/server.h"

static json_t *parse(const char *text) {
  json_t *doc = json_loads(text, 0, NULL);
  assert_non_null(doc);
  return doc;
}

static void test_manifest(void **state) {
  (void)state;
  json_t *doc =
      parse("{\"backend\": \"ns\", \"env\": {\"A\": \"1\", \"B\": \"x=y\"},"
            " \"files\": [{\"path\": \"f\", \"content\": \"aGk=\", \"mode\": 493}],"
            " \"limits\": {\"memory_bytes\": 1048576, \"cpus\": 0.5},"
            " \"net\": \"none\", \"policy\": {\"read_only\": [\"f\"], \"hidden\": [\"g\"]},"
            " \"timeout_seconds\": 30}");
  struct manifest_json m;
  char *why = NULL;
  assert_int_equal(manifest_json_parse(doc, &m, &why), 0);
  assert_string_equal(m.backend, "ns");
  assert_string_equal(m.manifest.env[0], "A=1");
  assert_string_equal(m.manifest.env[1], "B=x=y");
  assert_null(m.manifest.env[2]);
  assert_int_equal(m.manifest.n_files, 1);
  assert_int_equal(m.manifest.files[0].length, 2);
  assert_memory_equal(m.manifest.files[0].content, "hi", 2);
  assert_int_equal(m.manifest.files[0].mode, 0755);
  assert_int_equal(m.manifest.policy.limits.memory_bytes, 1048576);
  assert_true(m.manifest.policy.limits.cpus == 0.5);
  assert_int_equal(m.manifest.policy.egress, CORDON_EGRESS_NONE);
  assert_true(m.egress_given);
  assert_true(m.manifest.policy.require_enforcement);
  assert_string_equal(m.manifest.policy.read_only[0], "f");
  assert_string_equal(m.manifest.policy.hidden[0], "g");
  assert_true(m.manifest.default_timeout == 30);
  manifest_json_clear(&m);
  json_decref(doc);

  /* Refusals name the field. */
  const char *bad[][2] = {
      {"{\"memory\": 1}", "unknown field 'memory'"},
      {"{\"limits\": {\"mem\": 1}}", "unknown field 'limits.mem'"},
      {"{\"limits\": {\"pids\": -1}}", "'pids' must be a non-negative integer"},
      {"{\"net\": \"sideways\"}",
       "'net' must be none, loopback, restricted or open, not 'sideways'"},
      {"{\"env\": {\"A\": 1}}", NULL},
      {"{\"env\": {\"A=B\": \"1\"}}", NULL},
      {"{\"files\": [{\"path\": \"f\", \"content\": \"!!\"}]}", "'files[0].content' is not base64"},
      {"{\"files\": [{\"content\": \"\"}]}", NULL},
      {"{\"repo\": {\"branch\": \"x\"}}", "'repo.source' is required"},
      {"{\"require_enforcement\": \"no\"}", NULL},
      {"{\"backend\": 3}", "'backend' must be a string"},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    doc = parse(bad[i][0]);
    why = NULL;
    assert_int_equal(manifest_json_parse(doc, &m, &why), -1);
    assert_non_null(why);
    if (bad[i][1])
      assert_string_equal(why, bad[i][1]);
    free(why);
    manifest_json_clear(&m);
    json_decref(doc);
  }
}

static void test_exec_request(void **state) {
  (void)state;
  json_t *doc =
      parse("{\"argv\": [\"sh\", \"-c\", \"x\"], \"cwd\": \"sub\", \"env\": {\"K\": \"V\"},"
            " \"timeout_seconds\": -1, \"stdin\": \"aGk=\", \"max_output\": 10}");
  struct cordon_exec_request x;
  char *why = NULL;
  assert_int_equal(exec_request_parse(doc, &x, &why), 0);
  assert_string_equal(x.argv[2], "x");
  assert_null(x.argv[3]);
  assert_string_equal(x.cwd, "sub");
  assert_string_equal(x.env[0], "K=V");
  assert_true(x.timeout == -1);
  assert_int_equal(x.stdin_length, 2);
  assert_int_equal(x.max_output, 10);
  exec_request_clear(&x);
  json_decref(doc);
  const char *bad[] = {"{}",
                       "{\"argv\": []}",
                       "{\"argv\": \"ls\"}",
                       "{\"argv\": [1]}",
                       "{\"argv\": [\"ls\"], \"shell\": true}",
                       "{\"argv\": [\"ls\"], \"stdin\": \"%%\"}",
                       "{\"argv\": [\"ls\"], \"max_output\": 0}"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    doc = parse(bad[i]);
    why = NULL;
    assert_int_equal(exec_request_parse(doc, &x, &why), -1);
    assert_non_null(why);
    free(why);
    exec_request_clear(&x);
    json_decref(doc);
  }
}

static bool has_line(const char *text, const char *line) {
  size_t n = strlen(line);
  for (const char *p = text; (p = strstr(p, line)); p += n)
    if ((p == text || p[-1] == '\n') && p[n] == '\n')
      return true;
  return false;
}

static void test_metrics_render(void **state) {
  (void)state;
  struct metrics *m = metrics_new(NULL);
  metrics_session_created(m, "ns");
  metrics_session_created(m, "ns");
  metrics_session_destroyed(m, "ns", 3);
  metrics_exec(m, "ns", 0, 0.003);
  metrics_exec(m, "ns", 0, 0.2);
  metrics_exec(m, "ns", 1, 20);
  metrics_session_created(m, "we\"ird\\");
  assert_false(metrics_apply_event(m, "{\"verb\": \"exec\", \"backend\": \"ns\"}", 34));
  assert_false(metrics_apply_event(m, "garbage", 7));
  char *text = metrics_render(m);
  assert_true(has_line(text, "# TYPE sandbox_session_created_total counter"));
  assert_true(has_line(text, "sandbox_session_created_total{backend=\"ns\"} 2"));
  assert_true(has_line(text, "sandbox_active_sessions{backend=\"ns\"} 1"));
  assert_true(has_line(text, "sandbox_session_duration_seconds_bucket{backend=\"ns\",le=\"1\"} 0"));
  assert_true(has_line(text, "sandbox_session_duration_seconds_bucket{backend=\"ns\",le=\"5\"} 1"));
  assert_true(has_line(text, "sandbox_exec_count_total{backend=\"ns\",exit_code=\"0\"} 2"));
  assert_true(has_line(text, "sandbox_exec_count_total{backend=\"ns\",exit_code=\"1\"} 1"));
  assert_true(
      has_line(text, "sandbox_exec_duration_seconds_bucket{backend=\"ns\",le=\"0.005\"} 1"));
  assert_true(has_line(text, "sandbox_exec_duration_seconds_bucket{backend=\"ns\",le=\"10\"} 2"));
  assert_true(has_line(text, "sandbox_exec_duration_seconds_bucket{backend=\"ns\",le=\"+Inf\"} 3"));
  assert_true(has_line(text, "sandbox_exec_duration_seconds_count{backend=\"ns\"} 3"));
  assert_true(has_line(text, "sandbox_session_created_total{backend=\"we\\\"ird\\\\\"} 1"));
  free(text);
  metrics_free(m);
}

static void append(const char *path, const char *text) {
  FILE *f = fopen(path, "a");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static void test_events_follow(void **state) {
  (void)state;
  char dir[] = "/tmp/cordon-test-events.XXXXXX";
  assert_non_null(mkdtemp(dir));
  char *log = NULL, *rotated = NULL;
  assert_true(asprintf(&log, "%s/events.jsonl", dir) > 0);
  assert_true(asprintf(&rotated, "%s/events.jsonl.1", dir) > 0);
  struct metrics *m = metrics_new(dir);
  char *text = metrics_render(m); /* no log yet */
  free(text);
  append(log, "{\"verb\":\"create\",\"backend\":\"d\"}\n{\"verb\":\"exec\",\"backend\":\"d\","
              "\"exit_code\":0}\n"
              "{\"verb\":\"exec\",\"backend\":\"d\"");
  text = metrics_render(m);
  assert_true(has_line(text, "sandbox_session_created_total{backend=\"d\"} 1"));
  assert_true(has_line(text, "sandbox_exec_count_total{backend=\"d\",exit_code=\"0\"} 1"));
  free(text);
  /* The torn line completed, one more, then rotated, and a new file begun. */
  append(log,
         ",\"exit_code\":4}\n{\"verb\":\"destroy\",\"backend\":\"d\",\"duration_seconds\":2}\n");
  assert_int_equal(rename(log, rotated), 0);
  append(log, "{\"verb\":\"exec\",\"backend\":\"d\",\"exit_code\":4}\n");
  text = metrics_render(m);
  assert_true(has_line(text, "sandbox_exec_count_total{backend=\"d\",exit_code=\"4\"} 2"));
  assert_true(has_line(text, "sandbox_session_destroyed_total{backend=\"d\"} 1"));
  assert_true(has_line(text, "sandbox_active_sessions{backend=\"d\"} 0"));
  free(text);
  /* Nothing new: nothing counted twice. */
  text = metrics_render(m);
  assert_true(has_line(text, "sandbox_exec_count_total{backend=\"d\",exit_code=\"4\"} 2"));
  free(text);
  /* Truncated in place: read again from its start. */
  assert_int_equal(fs_write_atomic(log, "", 0, 0644, NULL), 0);
  text = metrics_render(m);
  free(text);
  metrics_free(m);
  free(log);
  free(rotated);
  fs_remove_tree(dir, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_manifest),
      cmocka_unit_test(test_exec_request),
      cmocka_unit_test(test_metrics_render),
      cmocka_unit_test(test_events_follow),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
