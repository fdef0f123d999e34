/* The host isolation tier (src/agent/tier.c): tier names, one config file's declaration, the
 * chain's order, and the audit event's body. The chain reads files, so its tests write theirs
 * in a private temporary directory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/tier.h"

static void test_parse_names(void **state) {
  (void)state;
  const char *names[] = {"none", "process", "container", "vm"};
  for (int i = 0; i < 4; i++) {
    enum cordon_isolation_tier t = CORDON_TIER_VM;
    assert_int_equal(agent_tier_parse(names[i], "--host-isolation", &t, NULL), 0);
    assert_int_equal(t, (enum cordon_isolation_tier)i);
  }
  const char *bad[] = {"VM", "", "kvm", "container ", "vms"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    struct cordon_error *err = NULL;
    enum cordon_isolation_tier t;
    assert_true(agent_tier_parse(bad[i], "--host-isolation", &t, &err) < 0);
    assert_int_equal(err->kind, CORDON_ERR_USAGE);
    assert_non_null(strstr(err->message, "--host-isolation"));
    assert_non_null(strstr(err->message, "none, process, container, vm"));
    cordon_error_free(err);
  }
  assert_string_equal(agent_tier_layer_name(AGENT_TIER_LAYER_DEFAULT), "default");
  assert_string_equal(agent_tier_layer_name(AGENT_TIER_LAYER_SYSTEM), "system");
}

static int config(const char *text, bool *declared, enum cordon_isolation_tier *tier,
                  char **evidence, struct cordon_error **err) {
  return agent_tier_config_parse(text, strlen(text), "config.yaml", declared, tier, evidence, err);
}

static void test_config_parse(void **state) {
  (void)state;
  bool declared = true;
  enum cordon_isolation_tier tier = CORDON_TIER_NONE;
  char *evidence = NULL;
  assert_int_equal(config("host_isolation: vm\nevidence: \"firecracker, one per run\"\n", &declared,
                          &tier, &evidence, NULL),
                   0);
  assert_true(declared);
  assert_int_equal(tier, CORDON_TIER_VM);
  assert_string_equal(evidence, "firecracker, one per run");
  free(evidence);
  /* Other settings may share the file: they are not ours to judge. */
  assert_int_equal(config("other:\n  nested: [1, 2]\nhost_isolation: process\n", &declared, &tier,
                          &evidence, NULL),
                   0);
  assert_true(declared);
  assert_int_equal(tier, CORDON_TIER_PROCESS);
  assert_null(evidence);
  /* Empty, comments only, or no tier: nothing declared. */
  const char *nothing[] = {"", "# only a comment\n", "other: 1\n"};
  for (size_t i = 0; i < 3; i++) {
    assert_int_equal(config(nothing[i], &declared, &tier, &evidence, NULL), 0);
    assert_false(declared);
    assert_null(evidence);
  }
}

static void expect_refused(const char *text, const char *needle) {
  bool declared;
  enum cordon_isolation_tier tier;
  char *evidence = NULL;
  struct cordon_error *err = NULL;
  assert_true(config(text, &declared, &tier, &evidence, &err) < 0);
  assert_null(evidence);
  assert_non_null(err);
  if (!strstr(err->message, needle))
    fail_msg("'%s' lacks '%s'", err->message, needle);
  assert_non_null(strstr(err->message, "config.yaml"));
  cordon_error_free(err);
}

static void test_config_refused(void **state) {
  (void)state;
  expect_refused("host_isolation: kvm\n", "host_isolation");
  expect_refused("host_isolation: kvm\n", "accepted: none, process, container, vm");
  expect_refused("host_isolation: [vm]\n", "'host_isolation' must be a non-empty string");
  expect_refused("host_isolation: vm\nevidence: {a: b}\n", "'evidence'");
  expect_refused("evidence: trust me\n", "without 'host_isolation'");
  expect_refused("host_isolation: vm\nhost_isolation: none\n", "appears twice");
  expect_refused("- vm\n", "expected a mapping");
  expect_refused("host_isolation: [vm\n", "line");
}

struct files {
  char dir[64];
  char project[96], user[96], system[96];
};

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static int files_setup(void **state) {
  struct files *f = calloc(1, sizeof(*f));
  strcpy(f->dir, "/tmp/cordon-tier-XXXXXX");
  if (!f || !mkdtemp(f->dir))
    return -1;
  snprintf(f->project, sizeof(f->project), "%s/project.yaml", f->dir);
  snprintf(f->user, sizeof(f->user), "%s/user.yaml", f->dir);
  snprintf(f->system, sizeof(f->system), "%s/system.yaml", f->dir);
  *state = f;
  return 0;
}

static int files_teardown(void **state) {
  struct files *f = *state;
  unlink(f->project);
  unlink(f->user);
  unlink(f->system);
  rmdir(f->dir);
  free(f);
  return 0;
}

static void resolve_expect(const struct agent_tier_sources *s, enum cordon_isolation_tier tier,
                           enum agent_tier_layer layer, const char *evidence) {
  struct agent_host_tier out;
  struct cordon_error *err = NULL;
  if (agent_tier_resolve(s, &out, &err) < 0)
    fail_msg("%s", err->message);
  assert_int_equal(out.tier, tier);
  assert_int_equal(out.layer, layer);
  if (evidence)
    assert_string_equal(out.evidence, evidence);
  else
    assert_null(out.evidence);
  agent_host_tier_clear(&out);
}

static void test_chain_order(void **state) {
  struct files *f = *state;
  struct agent_tier_sources s = {
      .project_config = f->project, .user_config = f->user, .system_config = f->system};
  /* No file exists: the default. */
  resolve_expect(&s, CORDON_TIER_NONE, AGENT_TIER_LAYER_DEFAULT, NULL);
  write_file(f->system, "host_isolation: process\nevidence: sys\n");
  resolve_expect(&s, CORDON_TIER_PROCESS, AGENT_TIER_LAYER_SYSTEM, "sys");
  /* A user file without a tier does not hide the system's. */
  write_file(f->user, "unrelated: 1\n");
  resolve_expect(&s, CORDON_TIER_PROCESS, AGENT_TIER_LAYER_SYSTEM, "sys");
  write_file(f->user, "host_isolation: container\n");
  resolve_expect(&s, CORDON_TIER_CONTAINER, AGENT_TIER_LAYER_USER, NULL);
  write_file(f->project, "host_isolation: vm\nevidence: proj\n");
  resolve_expect(&s, CORDON_TIER_VM, AGENT_TIER_LAYER_PROJECT, "proj");
  s.env = "none";
  s.env_evidence = "from env";
  resolve_expect(&s, CORDON_TIER_NONE, AGENT_TIER_LAYER_ENV, "from env");
  s.flag = "container";
  resolve_expect(&s, CORDON_TIER_CONTAINER, AGENT_TIER_LAYER_FLAG, NULL);
  s.flag_evidence = "the orchestrator's VM";
  resolve_expect(&s, CORDON_TIER_CONTAINER, AGENT_TIER_LAYER_FLAG, "the orchestrator's VM");
  /* The flag's evidence explains a tier from a file too. */
  s.flag = NULL;
  s.env = NULL;
  resolve_expect(&s, CORDON_TIER_VM, AGENT_TIER_LAYER_PROJECT, "the orchestrator's VM");
}

static void test_chain_refuses(void **state) {
  struct files *f = *state;
  struct agent_tier_sources s = {
      .project_config = f->project, .user_config = f->user, .system_config = f->system};
  /* A bad file is refused even when a later layer would have declared a tier: no silent
   * fall-through to a weaker declaration. */
  write_file(f->system, "host_isolation: vm\n");
  write_file(f->user, "host_isolation: hypervisor\n");
  struct agent_host_tier out;
  struct cordon_error *err = NULL;
  assert_true(agent_tier_resolve(&s, &out, &err) < 0);
  assert_non_null(strstr(err->message, f->user));
  assert_non_null(strstr(err->message, "host_isolation"));
  cordon_error_free(err);
  err = NULL;
  s.env = "kvm";
  assert_true(agent_tier_resolve(&s, &out, &err) < 0);
  assert_int_equal(err->kind, CORDON_ERR_USAGE);
  assert_non_null(strstr(err->message, "CORDON_HOST_ISOLATION"));
  cordon_error_free(err);
  err = NULL;
  s.flag = "VM";
  assert_true(agent_tier_resolve(&s, &out, &err) < 0);
  assert_non_null(strstr(err->message, "--host-isolation"));
  cordon_error_free(err);
}

static void test_sources_from_env(void **state) {
  (void)state;
  char *paths[3];
  struct agent_tier_sources s;
  setenv("XDG_CONFIG_HOME", "/xdg", 1);
  setenv("CORDON_SYSTEM_CONFIG", "/elsewhere/system.yaml", 1);
  setenv("CORDON_HOST_ISOLATION", "", 1);
  assert_int_equal(agent_tier_sources_from_env("/p", "vm", NULL, &s, paths, NULL), 0);
  assert_string_equal(s.project_config, "/p/.cordon/config.yaml");
  assert_string_equal(s.user_config, "/xdg/cordon/config.yaml");
  assert_string_equal(s.system_config, "/elsewhere/system.yaml");
  assert_null(s.env); /* empty is unset */
  assert_string_equal(s.flag, "vm");
  for (int i = 0; i < 3; i++)
    free(paths[i]);
  unsetenv("XDG_CONFIG_HOME");
  unsetenv("CORDON_SYSTEM_CONFIG");
  setenv("HOME", "/home/someone", 1);
  setenv("CORDON_HOST_ISOLATION", "container", 1);
  assert_int_equal(agent_tier_sources_from_env(NULL, NULL, NULL, &s, paths, NULL), 0);
  assert_null(s.project_config);
  assert_string_equal(s.user_config, "/home/someone/.config/cordon/config.yaml");
  assert_string_equal(s.system_config, "/etc/cordon/config.yaml");
  assert_string_equal(s.env, "container");
  for (int i = 0; i < 3; i++)
    free(paths[i]);
  unsetenv("CORDON_HOST_ISOLATION");
}

static void test_resolve_env(void **state) {
  struct files *f = *state;
  write_file(f->system, "host_isolation: container\nevidence: from the system file\n");
  setenv("CORDON_SYSTEM_CONFIG", f->system, 1);
  setenv("XDG_CONFIG_HOME", f->dir, 1); /* holds no cordon/config.yaml */
  unsetenv("CORDON_HOST_ISOLATION");
  struct agent_host_tier t;
  assert_int_equal(agent_tier_resolve_env(f->dir, NULL, NULL, &t, NULL), 0);
  assert_int_equal(t.tier, CORDON_TIER_CONTAINER);
  assert_int_equal(t.layer, AGENT_TIER_LAYER_SYSTEM);
  assert_string_equal(t.evidence, "from the system file");
  agent_host_tier_clear(&t);
  assert_int_equal(agent_tier_resolve_env(f->dir, "vm", "said so", &t, NULL), 0);
  assert_int_equal(t.layer, AGENT_TIER_LAYER_FLAG);
  assert_string_equal(t.evidence, "said so");
  agent_host_tier_clear(&t);
  unsetenv("CORDON_SYSTEM_CONFIG");
  unsetenv("XDG_CONFIG_HOME");
}

static void test_audit_details(void **state) {
  (void)state;
  struct agent_host_tier t = {CORDON_TIER_VM, (char *)"firecracker", AGENT_TIER_LAYER_FLAG};
  json_t *d = agent_tier_audit_details(&t, true, "claude");
  assert_non_null(d);
  char *text = json_dumps(d, JSON_COMPACT | JSON_SORT_KEYS);
  assert_string_equal(text, "{\"adapter\":\"claude\",\"agent_sandbox_dropped\":true,"
                            "\"evidence\":\"firecracker\",\"layer\":\"flag\",\"tier\":\"vm\"}");
  free(text);
  json_decref(d);
  struct agent_host_tier none = {CORDON_TIER_NONE, NULL, AGENT_TIER_LAYER_DEFAULT};
  d = agent_tier_audit_details(&none, false, NULL);
  text = json_dumps(d, JSON_COMPACT | JSON_SORT_KEYS);
  assert_string_equal(text, "{\"agent_sandbox_dropped\":false,\"evidence\":null,"
                            "\"layer\":\"default\",\"tier\":\"none\"}");
  free(text);
  json_decref(d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_names),
      cmocka_unit_test(test_config_parse),
      cmocka_unit_test(test_config_refused),
      cmocka_unit_test_setup_teardown(test_chain_order, files_setup, files_teardown),
      cmocka_unit_test_setup_teardown(test_chain_refuses, files_setup, files_teardown),
      cmocka_unit_test(test_sources_from_env),
      cmocka_unit_test_setup_teardown(test_resolve_env, files_setup, files_teardown),
      cmocka_unit_test(test_audit_details),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
