/* Egress decisions on their way to /metrics: a session's proxy log summed by kind
 * (net_summary_add_line), the summary as project-log lines (obs verb "egress", format and
 * parse, forged and broken lines refused), and the server's families
 * (sandbox_egress_decisions_total, sandbox_egress_bytes_total). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "net/events.h"
#include "obs/events.h"
#include "server/metrics.h"

static int add(struct net_summary *s, const char *line) {
  return net_summary_add_line(s, line, strlen(line));
}

static const struct net_summary_kind *find(const struct net_summary *s, bool refused,
                                           const char *rule) {
  for (size_t i = 0; i < s->count; i++)
    if (s->kinds[i].refused == refused && !strcmp(s->kinds[i].rule, rule))
      return &s->kinds[i];
  return NULL;
}

/* The proxy's own lines (net_event_format) are summed; anything else is not a decision. */
static void test_summary(void **state) {
  (void)state;
  struct net_summary s = {0};
  struct net_event allowed = {.protocol = "connect",
                              .host = "allowed.test",
                              .port = 443,
                              .address = "127.0.0.1",
                              .bytes_out = 100,
                              .bytes_in = 2000,
                              .time_ms = 1764662400000};
  struct net_event refused = {.protocol = "http",
                              .host = "other.test",
                              .port = 80,
                              .rule = "not-allowlisted",
                              .time_ms = 1764662400000};
  struct net_event blocked = refused;
  blocked.rule = "blocked-range:loopback";
  for (int i = 0; i < 3; i++) {
    char *line = net_event_format(i < 2 ? &allowed : &refused);
    assert_non_null(line);
    assert_int_equal(net_summary_add_line(&s, line, strlen(line) - 1), 1);
    free(line);
  }
  char *line = net_event_format(&blocked);
  assert_int_equal(net_summary_add_line(&s, line, strlen(line) - 1), 1);
  free(line);
  assert_int_equal(s.count, 3);
  const struct net_summary_kind *k = find(&s, false, "");
  assert_non_null(k);
  assert_int_equal(k->count, 2);
  assert_int_equal(k->bytes_out, 200);
  assert_int_equal(k->bytes_in, 4000);
  assert_int_equal(find(&s, true, "not-allowlisted")->count, 1);
  assert_int_equal(find(&s, true, "blocked-range:loopback")->count, 1);
  /* Not decisions: the daemon's error line, a torn line, other kinds, bad values. */
  assert_int_equal(add(&s, "{\"kind\":\"egress.error\",\"in\":\"proxy\",\"message\":\"x\"}"), 0);
  assert_int_equal(add(&s, "{\"kind\":\"egress\",\"decision\":\"allo"), 0);
  assert_int_equal(add(&s, "{\"kind\":\"exec\",\"decision\":\"allowed\",\"rule\":null,"
                           "\"bytes_out\":1,\"bytes_in\":1}"),
                   0);
  assert_int_equal(add(&s, "{\"kind\":\"egress\",\"decision\":\"maybe\",\"rule\":null,"
                           "\"bytes_out\":1,\"bytes_in\":1}"),
                   0);
  assert_int_equal(add(&s, "{\"kind\":\"egress\",\"decision\":\"allowed\",\"rule\":null,"
                           "\"bytes_out\":-5,\"bytes_in\":1}"),
                   0);
  assert_int_equal(add(&s, "{\"kind\":\"egress\",\"decision\":\"refused\",\"rule\":null,"
                           "\"bytes_out\":0,\"bytes_in\":0}"),
                   0);
  assert_int_equal(add(&s, "{\"kind\":\"egress\",\"decision\":\"allowed\",\"rule\":\"x\","
                           "\"bytes_out\":0,\"bytes_in\":0}"),
                   0);
  assert_int_equal(s.count, 3);
  /* A rule that is not a rule word is "other", never a label of its own. */
  assert_int_equal(add(&s, "{\"kind\":\"egress\",\"decision\":\"refused\",\"rule\":\"a\\\"b\","
                           "\"bytes_out\":0,\"bytes_in\":0}"),
                   1);
  assert_int_equal(find(&s, true, "other")->count, 1);
}

/* Past NET_SUMMARY_MAX kinds, the rest is summed under "other": bounded, nothing lost. */
static void test_summary_bounded(void **state) {
  (void)state;
  struct net_summary s = {0};
  for (int i = 0; i < 100; i++) {
    char line[200];
    snprintf(line, sizeof line,
             "{\"kind\":\"egress\",\"decision\":\"refused\",\"rule\":\"rule-%d\","
             "\"bytes_out\":1,\"bytes_in\":2}",
             i);
    assert_int_equal(add(&s, line), 1);
  }
  assert_int_equal(s.count, NET_SUMMARY_MAX);
  uint64_t total = 0;
  for (size_t i = 0; i < s.count; i++)
    total += s.kinds[i].count;
  assert_int_equal(total, 100);
  assert_int_equal(find(&s, true, "other")->count, 100 - (NET_SUMMARY_MAX - 1));
}

static void test_event_line(void **state) {
  (void)state;
  struct obs_event e = {.time = {1764662400, 123000000}};
  obs_event_set(&e, "egress", "ns", "0123456789abcdef");
  obs_event_set_egress(&e, "refused", "not-allowlisted", 2, 10, 20);
  char line[OBS_EVENT_LINE_MAX];
  int n = obs_event_format(&e, line, sizeof line);
  assert_true(n > 0);
  assert_string_equal(line, "{\"time\": \"2025-12-02T08:00:00.123Z\", \"verb\": \"egress\", "
                            "\"backend\": \"ns\", \"session\": \"0123456789abcdef\", "
                            "\"decision\": \"refused\", \"rule\": \"not-allowlisted\", "
                            "\"count\": 2, \"bytes_out\": 10, \"bytes_in\": 20, "
                            "\"duration_seconds\": 0.000000}\n");
  struct obs_event back;
  assert_int_equal(obs_event_parse(line, (size_t)n - 1, &back), 0);
  assert_true(back.has_egress);
  assert_string_equal(back.verb, "egress");
  assert_string_equal(back.decision, "refused");
  assert_string_equal(back.rule, "not-allowlisted");
  assert_int_equal(back.count, 2);
  assert_int_equal(back.bytes_out, 10);
  assert_int_equal(back.bytes_in, 20);
  /* Lines of other verbs carry none of it, and parse as before. */
  struct obs_event exec = {.time = {1764662400, 0}, .has_exit_code = true};
  obs_event_set(&exec, "exec", "ns", "ab");
  n = obs_event_format(&exec, line, sizeof line);
  assert_null(strstr(line, "decision"));
  assert_int_equal(obs_event_parse(line, (size_t)n - 1, &back), 0);
  assert_false(back.has_egress);
  /* A summary with a part missing, a negative count or a wrong type is no event. */
  static const char *const bad[] = {
      "{\"time\": \"2025-12-02T08:00:00Z\", \"verb\": \"egress\", \"backend\": \"ns\", "
      "\"session\": \"a\", \"decision\": \"allowed\", \"duration_seconds\": 0}",
      "{\"time\": \"2025-12-02T08:00:00Z\", \"verb\": \"egress\", \"backend\": \"ns\", "
      "\"session\": \"a\", \"decision\": \"allowed\", \"rule\": \"\", \"count\": -1, "
      "\"bytes_out\": 0, \"bytes_in\": 0, \"duration_seconds\": 0}",
      "{\"time\": \"2025-12-02T08:00:00Z\", \"verb\": \"egress\", \"backend\": \"ns\", "
      "\"session\": \"a\", \"decision\": 1, \"rule\": \"\", \"count\": 1, "
      "\"bytes_out\": 0, \"bytes_in\": 0, \"duration_seconds\": 0}",
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    assert_int_equal(obs_event_parse(bad[i], strlen(bad[i]), &back), -1);
}

static bool has_line(const char *text, const char *line) {
  size_t n = strlen(line);
  for (const char *p = text; (p = strstr(p, line)); p += n)
    if ((p == text || p[-1] == '\n') && p[n] == '\n')
      return true;
  return false;
}

static void apply_egress(struct metrics *m, const char *backend, const char *decision,
                         const char *rule, uint64_t count, uint64_t out, uint64_t in) {
  struct obs_event e = {0};
  obs_event_set(&e, "egress", backend, "s1");
  obs_event_set_egress(&e, decision, rule, count, out, in);
  metrics_apply(m, &e);
}

static void test_metrics(void **state) {
  (void)state;
  struct metrics *m = NULL;
  struct cordon_error *err = NULL;
  assert_int_equal(metrics_new(NULL, &m, &err), 0);
  char *text = metrics_render(m);
  assert_true(has_line(text, "# TYPE sandbox_egress_decisions_total counter"));
  assert_true(has_line(text, "# TYPE sandbox_egress_bytes_total counter"));
  assert_null(strstr(text, "sandbox_egress_bytes_total{"));
  free(text);
  apply_egress(m, "ns", "allowed", "", 2, 100, 2000);
  apply_egress(m, "ns", "allowed", "", 1, 10, 20);
  apply_egress(m, "ns", "refused", "not-allowlisted", 3, 0, 0);
  apply_egress(m, "docker", "refused", "blocked-range:loopback", 1, 0, 0);
  /* An egress verb without its fields (an old or forged line) moves nothing. */
  struct obs_event bare = {0};
  obs_event_set(&bare, "egress", "ns", "s2");
  metrics_apply(m, &bare);
  text = metrics_render(m);
  assert_true(has_line(
      text, "sandbox_egress_decisions_total{backend=\"ns\",decision=\"allowed\",rule=\"\"} 3"));
  assert_true(has_line(text, "sandbox_egress_decisions_total{backend=\"ns\",decision=\"refused\","
                             "rule=\"not-allowlisted\"} 3"));
  assert_true(has_line(text,
                       "sandbox_egress_decisions_total{backend=\"docker\",decision=\"refused\","
                       "rule=\"blocked-range:loopback\"} 1"));
  assert_true(has_line(text, "sandbox_egress_bytes_total{backend=\"ns\",direction=\"out\"} 110"));
  assert_true(has_line(text, "sandbox_egress_bytes_total{backend=\"ns\",direction=\"in\"} 2020"));
  assert_true(has_line(text, "sandbox_egress_bytes_total{backend=\"docker\",direction=\"in\"} 0"));
  /* Egress lines are not sessions: nothing else moved. */
  assert_true(has_line(text, "sandbox_session_created_total{backend=\"ns\"} 0"));
  free(text);
  metrics_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_summary),
      cmocka_unit_test(test_summary_bounded),
      cmocka_unit_test(test_event_line),
      cmocka_unit_test(test_metrics),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
