/* plan/parse: a good plan in its every form, and malformed plans, each refused at its place
 * (FILE:LINE:COLUMN) with the reason, before anything could run. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "plan/plan.h"

static struct plan *parse_ok(const char *text) {
  struct plan *p = NULL;
  struct cordon_error *err = NULL;
  int r = plan_parse("plan.yaml", text, strlen(text), &p, &err);
  if (r < 0)
    fail_msg("refused: %s", err->message);
  return p;
}

static void test_good(void **state) {
  (void)state;
  struct plan *p = parse_ok("stages:\n"
                            "  - name: build\n"
                            "    steps:\n"
                            "      - [make, -j, 2]\n"
                            "      - argv: [echo, 'a b']\n"
                            "      - run: \"make lint | tee lint.txt\"\n"
                            "  - name: test\n"
                            "    sandbox:\n"
                            "      backend: ns\n"
                            "      options:\n"
                            "        image: debian:12\n"
                            "        memory_mb: 512\n"
                            "        timeout_seconds: 1.5\n"
                            "        net: none\n"
                            "        read_only: [src]\n"
                            "        hidden: [secrets, .env]\n"
                            "        env: {CI: '1', EMPTY: ''}\n"
                            "    steps:\n"
                            "      - [true]\n");
  assert_int_equal(p->n_stages, 2);
  struct plan_stage *b = &p->stages[0], *t = &p->stages[1];
  assert_string_equal(b->name, "build");
  assert_string_equal(b->backend, "worktree");
  assert_false(b->has_sandbox);
  assert_int_equal(b->n_steps, 3);
  assert_string_equal(b->steps[0].argv[2], "2");
  assert_null(b->steps[0].argv[3]);
  assert_string_equal(b->steps[1].argv[1], "a b");
  assert_true(b->steps[2].shell);
  assert_string_equal(b->steps[2].argv[0], "/bin/sh");
  assert_string_equal(b->steps[2].argv[1], "-c");
  assert_string_equal(b->steps[2].argv[2], "make lint | tee lint.txt");
  assert_int_equal(b->steps[2].at.line, 6);
  assert_int_equal(b->steps[2].at.column, 9);
  assert_string_equal(t->backend, "ns");
  assert_int_equal(t->backend_at.line, 9);
  assert_int_equal(t->backend_at.column, 16);
  assert_string_equal(t->options.image, "debian:12");
  assert_int_equal(t->options.memory_mb, 512);
  assert_true(t->options.timeout_seconds == 1.5);
  assert_true(t->options.net_set);
  assert_int_equal(t->options.net, CORDON_EGRESS_NONE);
  assert_string_equal(t->options.read_only[0], "src");
  assert_string_equal(t->options.hidden[1], ".env");
  assert_string_equal(t->options.env[0], "CI=1");
  assert_string_equal(t->options.env[1], "EMPTY=");
  plan_free(p);
}

/* Each plan is refused with exactly this prefix (FILE:LINE:COLUMN) and a message holding the
 * fragment. */
static const struct {
  const char *text;
  const char *where;
  const char *fragment;
} bad[] = {
    {"", "plan.yaml:1:1:", "empty"},
    {"stages: [\n", "plan.yaml:2:1:", "not valid YAML"},
    {"- a\n", "plan.yaml:1:1:", "must be a mapping"},
    {"stage:\n  - name: a\n", "plan.yaml:1:1:", "unknown key 'stage'"},
    {"stages: {}\n", "plan.yaml:1:9:", "stages must be a list"},
    {"stages: []\n", "plan.yaml:1:9:", "stages is empty"},
    {"stages:\n  - name: a\n    step: [[true]]\n", "plan.yaml:3:5:", "unknown key 'step'"},
    {"stages:\n  - name: a\n", "plan.yaml:2:5:", "no steps"},
    {"stages:\n  - steps: [[true]]\n", "plan.yaml:2:5:", "needs a name"},
    {"stages:\n  - name: a\n    steps: [[true]]\n  - name: a\n    steps: [[true]]\n",
     "plan.yaml:4:11:", "appears twice"},
    {"stages:\n  - name: a\n    name: b\n    steps: [[true]]\n", "plan.yaml:3:5:", "appears twice"},
    {"stages:\n  - name: a\n    steps:\n      - make test\n", "plan.yaml:4:9:", "bare string"},
    {"stages:\n  - name: a\n    steps:\n      - []\n", "plan.yaml:4:9:", "must not be empty"},
    {"stages:\n  - name: a\n    steps:\n      - {argv: [a], run: b}\n",
     "plan.yaml:4:9:", "not both"},
    {"stages:\n  - name: a\n    steps:\n      - {shell: b}\n",
     "plan.yaml:4:10:", "unknown key 'shell'"},
    {"stages:\n  - name: a\n    steps:\n      - [make, [x]]\n",
     "plan.yaml:4:16:", "must be a non-empty string"},
    {"stages:\n  - name: a\n    sandbox: {options: {}}\n    steps: [[true]]\n",
     "plan.yaml:3:14:", "needs a backend"},
    {"stages:\n  - name: a\n    sandbox: {backend: ns, opts: {}}\n    steps: [[true]]\n",
     "plan.yaml:3:28:", "unknown key 'opts'"},
    {"stages:\n  - name: a\n    sandbox:\n      backend: ns\n      options:\n        memory_mb: "
     "lots\n    steps: [[true]]\n",
     "plan.yaml:6:20:", "memory_mb must be a whole number"},
    {"stages:\n  - name: a\n    sandbox:\n      backend: ns\n      options:\n        memory_mb: "
     "\"512\"\n    steps: [[true]]\n",
     "plan.yaml:6:20:", "memory_mb must be a whole number"},
    {"stages:\n  - name: a\n    sandbox:\n      backend: ns\n      options:\n        "
     "timeout_seconds: -1\n    steps: [[true]]\n",
     "plan.yaml:6:26:", "positive number"},
    {"stages:\n  - name: a\n    sandbox:\n      backend: ns\n      options:\n        net: "
     "sometimes\n    steps: [[true]]\n",
     "plan.yaml:6:14:", "net must be one of"},
    {"stages:\n  - name: a\n    sandbox:\n      backend: ns\n      options:\n        read_only: "
     "src\n    steps: [[true]]\n",
     "plan.yaml:6:20:", "read_only must be a list"},
    {"stages:\n  - name: a\n    sandbox:\n      backend: ns\n      options:\n        env: [A=1]\n"
     "    steps: [[true]]\n",
     "plan.yaml:6:14:", "env must be a mapping"},
    {"stages:\n  - name: a\n    sandbox:\n      backend: ns\n      options:\n        env: {A: "
     "[1]}\n    steps: [[true]]\n",
     "plan.yaml:6:18:", "must be a string"},
    {"stages:\n  - name: a\n    sandbox:\n      backend: ns\n      options:\n        image: "
     "{}\n    steps: [[true]]\n",
     "plan.yaml:6:16:", "image must be a non-empty string"},
    {"stages:\n  - name: a\n    steps: [[true]]\n---\nstages: []\n", "plan.yaml:5:1:", "second"},
};

static void test_bad(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    struct plan *p = (struct plan *)1;
    struct cordon_error *err = NULL;
    int r = plan_parse("plan.yaml", bad[i].text, strlen(bad[i].text), &p, &err);
    if (r == 0)
      fail_msg("plan %zu was accepted", i);
    assert_null(p);
    assert_non_null(err);
    if (strncmp(err->message, bad[i].where, strlen(bad[i].where)) ||
        !strstr(err->message, bad[i].fragment))
      fail_msg("plan %zu: \"%s\", expected %s ... %s", i, err->message, bad[i].where,
               bad[i].fragment);
    assert_int_equal(err->kind, CORDON_ERR_INVALID);
    cordon_error_free(err);
  }
}

/* The backend is checked against the registry at its place; a stage without sandbox: is
 * named at the stage (worktree is always there). */
static void test_resolve(void **state) {
  (void)state;
  struct cordon_registry *reg = NULL;
  struct cordon_error *err = NULL;
  assert_int_equal(cordon_registry_load(&reg, &err), 0);
  struct plan *p = parse_ok("stages:\n  - name: a\n    steps: [[true]]\n  - name: b\n    "
                            "sandbox: {backend: nosuch}\n    steps: [[true]]\n");
  assert_int_equal(plan_resolve(p, reg, &err), -1);
  assert_non_null(strstr(err->message, "plan.yaml:5:24: stage b:"));
  assert_non_null(strstr(err->message, "nosuch"));
  cordon_error_free(err);
  plan_free(p);
  p = parse_ok("stages:\n  - name: a\n    steps: [[true]]\n");
  assert_int_equal(plan_resolve(p, reg, &err), 0);
  plan_free(p);
  cordon_registry_free(reg);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_good),
      cmocka_unit_test(test_bad),
      cmocka_unit_test(test_resolve),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
