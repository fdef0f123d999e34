/* Unit tests of the server's pure parts beside its tokens (test-jwt.c): the session manifest
 * and exec request from the API's JSON (src/server/manifest-json.c, exec-request.c), and the
 * Prometheus metrics (metrics.c) fed from the event log: each event counted once, failures as
 * the log records them, the active sessions by id. (The log's follower: test-events.c.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/fs.h"
#include "obs/events.h"
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

static struct obs_event event(const char *verb, const char *backend, const char *session,
                              int exit_code, double seconds, bool failed) {
  struct obs_event e = {.has_exit_code = exit_code >= 0,
                        .exit_code = exit_code,
                        .duration_seconds = seconds,
                        .failed = failed};
  obs_event_set(&e, verb, backend, session);
  return e;
}

static void apply(struct metrics *m, struct obs_event e) {
  metrics_apply(m, &e);
}

static struct metrics *metrics_for(const char *state_dir) {
  struct metrics *m = NULL;
  struct cordon_error *err = NULL;
  assert_int_equal(metrics_new(state_dir, &m, &err), 0);
  return m;
}

static void test_metrics_render(void **state) {
  (void)state;
  struct metrics *m = metrics_for(NULL);
  apply(m, event("create", "ns", "a1", -1, 0.1, false));
  apply(m, event("create", "ns", "a2", -1, 0.1, false));
  apply(m, event("destroy", "ns", "a1", -1, 3, false));
  apply(m, event("exec", "ns", "a2", 0, 0.003, false));
  apply(m, event("exec", "ns", "a2", 0, 0.2, false));
  apply(m, event("exec", "ns", "a2", 1, 20, false));
  apply(m, event("create", "we\"ird\\", "b1", -1, 0.1, false));
  /* Failures: a create or destroy that failed moves nothing; an exec that did not run counts
   * under the 125 the log gives it; an unknown verb is skipped. */
  apply(m, event("create", "ns", "", -1, 0.1, true));
  apply(m, event("destroy", "ns", "a2", -1, 0.1, true));
  apply(m, event("exec", "ns", "a2", 125, 0.01, true));
  apply(m, event("resize", "ns", "a2", -1, 0.1, false));
  char *text = metrics_render(m);
  assert_true(has_line(text, "# TYPE sandbox_session_created_total counter"));
  assert_true(has_line(text, "sandbox_session_created_total{backend=\"ns\"} 2"));
  assert_true(has_line(text, "sandbox_session_destroyed_total{backend=\"ns\"} 1"));
  assert_true(has_line(text, "sandbox_active_sessions{backend=\"ns\"} 1"));
  assert_true(has_line(text, "sandbox_session_duration_seconds_bucket{backend=\"ns\",le=\"1\"} 0"));
  assert_true(has_line(text, "sandbox_session_duration_seconds_bucket{backend=\"ns\",le=\"5\"} 1"));
  assert_true(has_line(text, "sandbox_exec_count_total{backend=\"ns\",exit_code=\"0\"} 2"));
  assert_true(has_line(text, "sandbox_exec_count_total{backend=\"ns\",exit_code=\"1\"} 1"));
  assert_true(has_line(text, "sandbox_exec_count_total{backend=\"ns\",exit_code=\"125\"} 1"));
  assert_true(
      has_line(text, "sandbox_exec_duration_seconds_bucket{backend=\"ns\",le=\"0.005\"} 1"));
  assert_true(has_line(text, "sandbox_exec_duration_seconds_bucket{backend=\"ns\",le=\"10\"} 3"));
  assert_true(has_line(text, "sandbox_exec_duration_seconds_bucket{backend=\"ns\",le=\"+Inf\"} 4"));
  assert_true(has_line(text, "sandbox_exec_duration_seconds_count{backend=\"ns\"} 4"));
  assert_true(has_line(text, "sandbox_session_created_total{backend=\"we\\\"ird\\\\\"} 1"));
  free(text);
  metrics_free(m);
}

/* sandbox_active_sessions by id: the sessions present at the start count once even when the
 * log also shows their create; a destroy of a session never known moves nothing. */
static void test_metrics_active(void **state) {
  (void)state;
  struct metrics *m = metrics_for(NULL);
  metrics_session_present(m, "p1", "ns");
  metrics_session_present(m, "p2", "ns");
  metrics_session_present(m, "p2", "ns");
  apply(m, event("create", "ns", "p2", -1, 0.1, false));  /* made while the server listed */
  apply(m, event("destroy", "ns", "gone", -1, 1, false)); /* destroyed before the listing */
  apply(m, event("create", "docker", "d1", -1, 0.1, false));
  apply(m, event("destroy", "ns", "p1", -1, 1, false));
  char *text = metrics_render(m);
  assert_true(has_line(text, "sandbox_active_sessions{backend=\"ns\"} 1"));
  assert_true(has_line(text, "sandbox_active_sessions{backend=\"docker\"} 1"));
  assert_true(has_line(text, "sandbox_session_created_total{backend=\"ns\"} 1"));
  assert_true(has_line(text, "sandbox_session_destroyed_total{backend=\"ns\"} 2"));
  free(text);
  metrics_free(m);
}

static void append_event(const char *dir, struct obs_event e) {
  struct cordon_error *err = NULL;
  clock_gettime(CLOCK_REALTIME, &e.time);
  assert_int_equal(obs_events_append(dir, &e, OBS_EVENTS_DEFAULT_MAX_BYTES, &err), 0);
}

/* From the log: what it held before the server started is history, not counted; what is
 * appended is counted once, however many scrapes read it. */
static void test_metrics_from_log(void **state) {
  (void)state;
  char dir[] = "/tmp/cordon-test-metrics.XXXXXX";
  assert_non_null(mkdtemp(dir));
  append_event(dir, event("exec", "ns", "s1", 0, 0.1, false));
  struct metrics *m = metrics_for(dir);
  append_event(dir, event("exec", "ns", "s1", 0, 0.1, false));
  append_event(dir, event("exec", "ns", "s1", 2, 0.1, false));
  char *text = metrics_render(m);
  assert_true(has_line(text, "sandbox_exec_count_total{backend=\"ns\",exit_code=\"0\"} 1"));
  assert_true(has_line(text, "sandbox_exec_count_total{backend=\"ns\",exit_code=\"2\"} 1"));
  free(text);
  text = metrics_render(m);
  assert_true(has_line(text, "sandbox_exec_count_total{backend=\"ns\",exit_code=\"0\"} 1"));
  free(text);
  metrics_free(m);
  fs_remove_tree(dir, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_manifest),         cmocka_unit_test(test_exec_request),
      cmocka_unit_test(test_metrics_render),   cmocka_unit_test(test_metrics_active),
      cmocka_unit_test(test_metrics_from_log),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
