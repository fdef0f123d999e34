/* Agent CLI adapters (src/agent/adapter.c): the embedded data files, the parser's refusals, the
 * rule for dropping a CLI's own sandbox, and the argv, state directories and variables an
 * adapter adds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/adapter.h"
#include "base/strv.h"

static bool contains(char **v, const char *s) {
  for (; v && *v; v++)
    if (!strcmp(*v, s))
      return true;
  return false;
}

static struct agent_adapter *load(const char *name) {
  struct agent_adapter *a = NULL;
  struct cordon_error *err = NULL;
  if (agent_adapter_load(name, &a, &err) < 0)
    fail_msg("%s", err->message);
  return a;
}

static void test_embedded_adapters(void **state) {
  (void)state;
  assert_string_equal(agent_adapter_names(), "aider, claude, codex, gemini, generic");
  struct {
    const char *name, *flag, *state_dir, *env;
    bool own_sandbox;
  } expect[] = {
      {"claude", "--dangerously-skip-permissions", "~/.claude", "ANTHROPIC_API_KEY", true},
      {"codex", "--dangerously-bypass-approvals-and-sandbox", "~/.codex", "OPENAI_API_KEY", true},
      {"aider", "--yes-always", "~/.aider", "OPENAI_API_KEY", false},
      {"gemini", "--approval-mode=yolo", "~/.gemini", "GEMINI_API_KEY", true},
  };
  for (size_t i = 0; i < sizeof(expect) / sizeof(expect[0]); i++) {
    struct agent_adapter *a = load(expect[i].name);
    assert_string_equal(a->name, expect[i].name);
    assert_int_equal(a->own_sandbox, expect[i].own_sandbox);
    assert_true(contains(a->disable_flags, expect[i].flag));
    assert_true(contains(a->state_dirs, expect[i].state_dir));
    assert_true(contains(a->env, expect[i].env));
    agent_adapter_free(a);
  }
  struct agent_adapter *g = load("gemini");
  assert_true(contains(g->env, "GOOGLE_API_KEY"));
  agent_adapter_free(g);
  struct agent_adapter *generic = load("generic");
  assert_false(generic->own_sandbox);
  assert_int_equal(strv_length((const char *const *)generic->disable_flags), 0);
  assert_int_equal(strv_length((const char *const *)generic->state_dirs), 0);
  assert_int_equal(strv_length((const char *const *)generic->env), 0);
  agent_adapter_free(generic);
}

static void test_unknown_adapter(void **state) {
  (void)state;
  struct agent_adapter *a = NULL;
  struct cordon_error *err = NULL;
  assert_true(agent_adapter_load("cursor", &a, &err) < 0);
  assert_null(a);
  assert_int_equal(err->kind, CORDON_ERR_USAGE);
  assert_non_null(strstr(err->message, "'cursor'"));
  assert_non_null(strstr(err->message, "aider, claude, codex, gemini, generic"));
  cordon_error_free(err);
}

static void expect_refused(const char *text, const char *needle) {
  struct agent_adapter *a = NULL;
  struct cordon_error *err = NULL;
  assert_true(agent_adapter_parse("x", text, strlen(text), &a, &err) < 0);
  assert_null(a);
  if (!strstr(err->message, needle))
    fail_msg("'%s' lacks '%s'", err->message, needle);
  assert_non_null(strstr(err->message, "adapter x"));
  cordon_error_free(err);
}

static void test_parse_refusals(void **state) {
  (void)state;
  expect_refused("own_sandbox: true\nflags: [-y]\n", "unknown key 'flags'");
  expect_refused("name: y\nown_sandbox: true\n", "'name' is 'y'");
  expect_refused("env: [A]\n", "'own_sandbox' is missing");
  expect_refused("own_sandbox: yes\n", "true or false");
  expect_refused("own_sandbox: \"true\"\n", "true or false");
  expect_refused("own_sandbox: false\ndisable_flags: [yolo]\n", "'yolo'");
  expect_refused("own_sandbox: false\nenv: [\"A=B\"]\n", "'A=B'");
  expect_refused("own_sandbox: false\nenv: [1A]\n", "'1A'");
  expect_refused("own_sandbox: false\nenv: A\n", "list of strings");
  expect_refused("own_sandbox: false\nstate_dirs: [/etc]\n", "'/etc'");
  expect_refused("own_sandbox: false\nstate_dirs: [~/../root]\n", "'~/../root'");
  expect_refused("own_sandbox: false\nstate_dirs: [~/a/./b]\n", "'~/a/./b'");
  expect_refused("own_sandbox: false\nstate_dirs: [\"~/\"]\n", "'~/'");
  expect_refused("own_sandbox: false\nstate_dirs: [~/a//b]\n", "'~/a//b'");
  expect_refused("own_sandbox: false\nstate_dirs: [[~/a]]\n", "non-empty string");
  expect_refused("own_sandbox: false\nown_sandbox: true\n", "appears twice");
  expect_refused("[own_sandbox]\n", "expected a mapping");
}

static void test_mechanism_tier(void **state) {
  (void)state;
  assert_int_equal(agent_mechanism_tier(AGENT_MECHANISM_NS), CORDON_TIER_CONTAINER);
  assert_int_equal(agent_mechanism_tier(AGENT_MECHANISM_BWRAP), CORDON_TIER_CONTAINER);
  assert_int_equal(agent_mechanism_tier(AGENT_MECHANISM_GVISOR), CORDON_TIER_CONTAINER);
  assert_int_equal(agent_mechanism_tier(AGENT_MECHANISM_LANDLOCK), CORDON_TIER_PROCESS);
  assert_int_equal(agent_mechanism_tier(AGENT_MECHANISM_SEATBELT), CORDON_TIER_PROCESS);
  assert_int_equal(agent_mechanism_tier(AGENT_MECHANISM_OFF), CORDON_TIER_NONE);
  assert_int_equal(agent_mechanism_tier(AGENT_MECHANISM_AUTO), CORDON_TIER_NONE);
}

static void test_drop_rule(void **state) {
  (void)state;
  struct agent_adapter *claude = load("claude"), *generic = load("generic");
  /* Every pairing of confinement and host tier: dropped exactly when either reaches container. */
  for (int c = CORDON_TIER_NONE; c <= CORDON_TIER_VM; c++)
    for (int h = CORDON_TIER_NONE; h <= CORDON_TIER_VM; h++) {
      bool expect = c >= CORDON_TIER_CONTAINER || h >= CORDON_TIER_CONTAINER;
      assert_int_equal(agent_adapter_drops_sandbox(claude, (enum cordon_isolation_tier)c,
                                                   (enum cordon_isolation_tier)h),
                       expect);
      assert_false(agent_adapter_drops_sandbox(generic, (enum cordon_isolation_tier)c,
                                               (enum cordon_isolation_tier)h));
    }
  /* landlock on a bare host keeps the CLI's sandbox; landlock inside a declared VM drops it. */
  assert_false(agent_adapter_drops_sandbox(claude, agent_mechanism_tier(AGENT_MECHANISM_LANDLOCK),
                                           CORDON_TIER_PROCESS));
  assert_true(agent_adapter_drops_sandbox(claude, agent_mechanism_tier(AGENT_MECHANISM_LANDLOCK),
                                          CORDON_TIER_VM));
  assert_true(agent_adapter_drops_sandbox(claude, agent_mechanism_tier(AGENT_MECHANISM_NS),
                                          CORDON_TIER_NONE));
  assert_false(agent_adapter_drops_sandbox(NULL, CORDON_TIER_VM, CORDON_TIER_VM));
  agent_adapter_free(claude);
  agent_adapter_free(generic);
}

static void assert_argv(char **got, const char *const *want) {
  size_t n = strv_length(want);
  assert_int_equal(strv_length((const char *const *)got), n);
  for (size_t i = 0; i < n; i++)
    assert_string_equal(got[i], want[i]);
}

static void test_argv(void **state) {
  (void)state;
  struct agent_adapter *gemini = load("gemini");
  const char *argv[] = {"gemini", "-p", "fix the tests", NULL};
  char **out = NULL;
  assert_int_equal(agent_adapter_argv(gemini, argv, true, &out, NULL), 0);
  assert_argv(out, (const char *const[]){"gemini", "--approval-mode=yolo", "--sandbox=false", "-p",
                                         "fix the tests", NULL});
  strv_free(out);
  assert_int_equal(agent_adapter_argv(gemini, argv, false, &out, NULL), 0);
  assert_argv(out, argv);
  strv_free(out);
  /* A flag the caller already gave is not repeated; one after "--" is an operand, not a flag. */
  const char *given[] = {"gemini", "--sandbox=false", "--", "--approval-mode=yolo", NULL};
  assert_int_equal(agent_adapter_argv(gemini, given, true, &out, NULL), 0);
  assert_argv(out, (const char *const[]){"gemini", "--approval-mode=yolo", "--sandbox=false", "--",
                                         "--approval-mode=yolo", NULL});
  strv_free(out);
  const char *only[] = {"gemini", NULL};
  assert_int_equal(agent_adapter_argv(NULL, only, true, &out, NULL), 0);
  assert_argv(out, only);
  strv_free(out);
  struct cordon_error *err = NULL;
  const char *empty[] = {NULL};
  assert_true(agent_adapter_argv(gemini, empty, true, &out, &err) < 0);
  assert_int_equal(err->kind, CORDON_ERR_USAGE);
  cordon_error_free(err);
  agent_adapter_free(gemini);
}

static void test_state_dirs(void **state) {
  (void)state;
  struct agent_adapter *a = NULL;
  const char *text = "own_sandbox: true\nstate_dirs: [~/.x, ~/.config/x]\n";
  assert_int_equal(agent_adapter_parse("x", text, strlen(text), &a, NULL), 0);
  char **dirs = NULL;
  assert_int_equal(agent_adapter_state_dirs(a, "/home/u/", &dirs, NULL), 0);
  assert_argv(dirs, (const char *const[]){"/home/u/.x", "/home/u/.config/x", NULL});
  strv_free(dirs);
  assert_int_equal(agent_adapter_state_dirs(a, "/", &dirs, NULL), 0);
  assert_argv(dirs, (const char *const[]){"/.x", "/.config/x", NULL});
  strv_free(dirs);
  struct cordon_error *err = NULL;
  assert_true(agent_adapter_state_dirs(a, "relative", &dirs, &err) < 0);
  assert_non_null(strstr(err->message, "HOME"));
  cordon_error_free(err);
  err = NULL;
  assert_true(agent_adapter_state_dirs(a, NULL, &dirs, &err) < 0);
  cordon_error_free(err);
  agent_adapter_free(a);
}

static void test_prepare_state_dirs(void **state) {
  (void)state;
  char home[] = "/tmp/cordon-adapter-XXXXXX";
  assert_non_null(mkdtemp(home));
  struct agent_adapter *codex = load("codex");
  char **dirs = NULL;
  struct cordon_error *err = NULL;
  if (agent_adapter_prepare_state_dirs(codex, home, &dirs, &err) < 0)
    fail_msg("%s", err->message);
  char want[64];
  snprintf(want, sizeof(want), "%s/.codex", home);
  assert_argv(dirs, (const char *const[]){want, NULL});
  struct stat st;
  assert_int_equal(stat(want, &st), 0);
  assert_true(S_ISDIR(st.st_mode));
  assert_int_equal(st.st_mode & 0777, 0700);
  strv_free(dirs);
  /* An existing one is kept as it is. */
  assert_int_equal(agent_adapter_prepare_state_dirs(codex, home, &dirs, NULL), 0);
  strv_free(dirs);
  rmdir(want);
  rmdir(home);
  agent_adapter_free(codex);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_embedded_adapters), cmocka_unit_test(test_unknown_adapter),
      cmocka_unit_test(test_parse_refusals),    cmocka_unit_test(test_mechanism_tier),
      cmocka_unit_test(test_drop_rule),         cmocka_unit_test(test_argv),
      cmocka_unit_test(test_state_dirs),        cmocka_unit_test(test_prepare_state_dirs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
