/* Unit tests of the agent's pure policy parts (src/agent/policy.c, bwrap.c): the policy file's
 * parser (keys, types, bounds), the environment allowlist, and the bubblewrap argv lowered from
 * a policy. No root, no namespaces. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agent/mechanism.h"
#include "agent/policy.h"
#include "base/strv.h"

static void expect_usage(int r, struct cordon_error *err, const char *fragment) {
  assert_true(r < 0);
  assert_non_null(err);
  assert_int_equal(err->kind, CORDON_ERR_USAGE);
  if (!strstr(err->message, fragment))
    fail_msg("error \"%s\" does not mention \"%s\"", err->message, fragment);
  cordon_error_free(err);
}

static int parse(const char *text, struct agent_policy_file *f, struct cordon_error **err) {
  return agent_policy_file_parse(text, strlen(text), "p.yaml", f, err);
}

static void test_file_parses_every_key(void **state) {
  (void)state;
  struct agent_policy_file f;
  struct cordon_error *err = NULL;
  assert_int_equal(parse("read_only: [docs, lock]\nhidden:\n  - .env\nallow_ro: [/opt/x]\n"
                         "allow_rw: []\nenv_allow: [ANTHROPIC_API_KEY]\nnet: open\n",
                         &f, &err),
                   0);
  assert_int_equal(strv_length((const char *const *)f.read_only), 2);
  assert_string_equal(f.read_only[1], "lock");
  assert_string_equal(f.hidden[0], ".env");
  assert_string_equal(f.allow_ro[0], "/opt/x");
  assert_int_equal(strv_length((const char *const *)f.allow_rw), 0);
  assert_string_equal(f.env_allow[0], "ANTHROPIC_API_KEY");
  assert_string_equal(f.net, "open");
  agent_policy_file_clear(&f);
  assert_int_equal(parse("", &f, &err), 0); /* an empty file: an empty policy */
  assert_null(f.read_only);
  agent_policy_file_clear(&f);
  assert_int_equal(parse("hidden:\n", &f, &err), 0); /* a key with no value: an empty list */
  assert_non_null(f.hidden);
  assert_int_equal(strv_length((const char *const *)f.hidden), 0);
  agent_policy_file_clear(&f);
}

static void test_file_refuses_unknown_keys_and_types(void **state) {
  (void)state;
  struct agent_policy_file f;
  struct cordon_error *err = NULL;
  int r = parse("hiden: [x]\n", &f, &err);
  expect_usage(r, err, "unknown key 'hiden'");
  err = NULL;
  r = parse("hidden: x\n", &f, &err);
  expect_usage(r, err, "'hidden' must be a list");
  err = NULL;
  r = parse("net: [open]\n", &f, &err);
  expect_usage(r, err, "'net' must be a non-empty string");
  err = NULL;
  r = parse("read_only: [[a]]\n", &f, &err);
  expect_usage(r, err, "'read_only' must be a non-empty string");
  err = NULL;
  r = parse("- a\n- b\n", &f, &err);
  expect_usage(r, err, "mapping");
  err = NULL;
  r = parse("hidden: [a]\nhidden: [b]\n", &f, &err);
  expect_usage(r, err, "twice");
  err = NULL;
  r = parse("hidden: [a\n", &f, &err);
  expect_usage(r, err, "not valid YAML");
  err = NULL;
  size_t big = AGENT_POLICY_FILE_MAX + 1;
  char *text = calloc(1, big + 1);
  memset(text, '#', big);
  r = agent_policy_file_parse(text, big, "p.yaml", &f, &err);
  free(text);
  expect_usage(r, err, "larger than");
}

static void test_env_allowlist(void **state) {
  (void)state;
  const char *const extra[] = {"ANTHROPIC_API_KEY", NULL};
  assert_true(agent_env_name_allowed("PATH", 4, NULL));
  assert_true(agent_env_name_allowed("LC_ALL", 6, NULL));
  assert_true(agent_env_name_allowed("CORDON_SANDBOX_ALLOW", 20, NULL));
  assert_true(agent_env_name_allowed("ANTHROPIC_API_KEY", 17, extra));
  assert_false(agent_env_name_allowed("ANTHROPIC_API_KEY", 17, NULL));
  assert_false(agent_env_name_allowed("PATHX", 5, NULL));
  assert_false(agent_env_name_allowed("LC_", 3, NULL));
  assert_false(agent_env_name_allowed("AWS_SECRET_ACCESS_KEY", 21, NULL));
  const char *const environ[] = {"PATH=/bin",           "SECRET=x", "LC_CTYPE=C", "TMPDIR=/var/tmp",
                                 "ANTHROPIC_API_KEY=k", "=odd",     "noequals",   NULL};
  char **env = NULL;
  struct cordon_error *err = NULL;
  assert_int_equal(agent_env_filter(environ, extra, &env, &err), 0);
  const char *const want[] = {"PATH=/bin",   "LC_CTYPE=C", "ANTHROPIC_API_KEY=k",
                              "TMPDIR=/tmp", "TMP=/tmp",   "TEMP=/tmp",
                              NULL};
  assert_int_equal(strv_length((const char *const *)env), 6);
  for (size_t i = 0; want[i]; i++)
    assert_string_equal(env[i], want[i]);
  strv_free(env);
}

static bool has_run(char **argv, const char *const *words) {
  size_t n = strv_length(words);
  for (size_t i = 0; argv[i]; i++) {
    size_t j = 0;
    while (j < n && argv[i + j] && !strcmp(argv[i + j], words[j]))
      j++;
    if (j == n)
      return true;
  }
  return false;
}

#define RUN(...) ((const char *const[]){__VA_ARGS__, NULL})

static void test_bwrap_argv(void **state) {
  (void)state;
  char *read_only[] = {"docs", NULL}, *hidden_dirs[] = {".cordon", "secrets", NULL},
       *hidden_files[] = {".env", NULL}, *empty[] = {NULL}, *allow_ro[] = {"/opt/tools", NULL},
       *env[] = {"PATH=/bin", "TMPDIR=/tmp", NULL};
  struct agent_policy p = {.project = "/p",
                           .cwd = "/p/sub",
                           .read_only = read_only,
                           .hidden_dirs = hidden_dirs,
                           .hidden_files = hidden_files,
                           .agent_visible = ".cordon/agent-visible",
                           .allow_ro = allow_ro,
                           .allow_rw = empty,
                           .env = env,
                           .net = "loopback",
                           .tmp_bytes = 1024};
  const char *const cmd[] = {"agent", "--flag", NULL};
  struct agent_launch launch = {.policy = &p, .argv = cmd};
  char **argv = NULL;
  struct cordon_error *err = NULL;
  assert_int_equal(agent_bwrap_argv(&launch, &argv, &err), 0);
  assert_string_equal(argv[0], "bwrap");
  assert_true(has_run(argv, RUN("--unshare-all", "--die-with-parent", "--new-session")));
  assert_false(has_run(argv, RUN("--share-net")));
  assert_false(has_run(argv, RUN("--ro-bind", "/", "/")));
  assert_true(has_run(argv, RUN("--size", "1024", "--tmpfs", "/tmp")));
  assert_true(has_run(argv, RUN("--ro-bind", "/opt/tools", "/opt/tools")));
  assert_true(has_run(argv, RUN("--bind", "/p", "/p", "--ro-bind", "/p/docs", "/p/docs")));
  assert_true(has_run(argv, RUN("--ro-bind", "/dev/null", "/p/.env")));
  assert_true(has_run(argv, RUN("--tmpfs", "/p/.cordon", "--ro-bind", "/p/.cordon/agent-visible",
                                "/p/.cordon/agent-visible", "--remount-ro", "/p/.cordon")));
  assert_true(has_run(argv, RUN("--tmpfs", "/p/secrets", "--remount-ro", "/p/secrets")));
  assert_true(has_run(argv, RUN("--chdir", "/p/sub", "--clearenv", "--setenv", "PATH", "/bin",
                                "--setenv", "TMPDIR", "/tmp", "--", "agent", "--flag")));
  assert_null(argv[strv_length((const char *const *)argv)]);
  strv_free(argv);
  /* open: the host's network; a terminal: the caller's session kept for job control. */
  p.net = "open";
  launch.tty = true;
  assert_int_equal(agent_bwrap_argv(&launch, &argv, &err), 0);
  assert_true(has_run(argv, RUN("--unshare-all", "--share-net", "--die-with-parent")));
  assert_false(has_run(argv, RUN("--new-session")));
  strv_free(argv);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_file_parses_every_key),
      cmocka_unit_test(test_file_refuses_unknown_keys_and_types),
      cmocka_unit_test(test_env_allowlist),
      cmocka_unit_test(test_bwrap_argv),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
