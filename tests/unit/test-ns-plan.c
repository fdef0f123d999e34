/* Unit tests of the ns plan's pure builder (src/backends/ns/plan.c): from a manifest and the
 * caller's ids to what the sandbox will be (host trees, workspace lists, identity and its maps,
 * one-shot and overlay, cgroups, rlimits, network, identity files), and the refusals it makes
 * by name alone. No root, no kernel features, nothing on the host is touched. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backends/ns/plan.h"
#include "base/strv.h"
#include "confine/policy.h"

#define LIST(...) ((const char *const[]){__VA_ARGS__, NULL})

static const struct ns_plan_host rootless = {
    .euid = 1234,
    .egid = 2345,
    .sandbox_host_uid = 65534,
    .sandbox_host_gid = 65534,
    .root = "/workspace",
    .overlay_forks = true,
};

static struct ns_plan_host as_root(void) {
  struct ns_plan_host h = rootless;
  h.euid = h.egid = 0;
  h.sandbox_host_uid = 70000;
  h.sandbox_host_gid = 70001;
  return h;
}

static void build(const struct cordon_manifest *m, const struct ns_plan_host *host,
                  struct ns_plan *plan) {
  struct cordon_error *err = NULL;
  if (ns_plan_build(m, host, plan, &err) < 0)
    fail_msg("plan: %s", err->message);
  assert_null(err);
}

static void expect_refusal(const struct cordon_manifest *m, const char *fragment) {
  struct ns_plan plan = {0};
  struct cordon_error *err = NULL;
  assert_int_equal(ns_plan_build(m, &rootless, &plan, &err), -1);
  assert_non_null(err);
  if (fragment && !strstr(err->message, fragment))
    fail_msg("error \"%s\" does not mention \"%s\"", err->message, fragment);
  cordon_error_free(err);
  /* A refused plan holds nothing. */
  assert_null(plan.system_paths);
  assert_null(plan.passwd);
}

static void test_defaults_rootless(void **state) {
  (void)state;
  struct cordon_manifest m = {0};
  struct ns_plan plan = {0};
  build(&m, &rootless, &plan);
  /* the default system paths, each optional on this host */
  assert_true(plan.system_optional);
  assert_int_equal(strv_length((const char *const *)plan.system_paths),
                   strv_length(confine_default_system_paths));
  assert_string_equal(plan.system_paths[0], confine_default_system_paths[0]);
  assert_null(plan.grants);
  assert_null(plan.read_only);
  assert_null(plan.hidden);
  /* rootless: the sandbox uid maps to ours, and setgroups is denied */
  assert_true(plan.rootless);
  assert_int_equal(plan.identity.uid, CONFINE_SANDBOX_UID);
  assert_int_equal(plan.identity.gid, CONFINE_SANDBOX_GID);
  assert_false(plan.identity.can_setgroups);
  assert_int_equal(plan.outer_uid, 1234);
  assert_int_equal(plan.outer_gid, 2345);
  /* no egress: a network namespace of its own, without even loopback */
  assert_true(plan.new_network);
  assert_false(plan.loopback);
  assert_int_equal(plan.rlimits.fsize, CORDON_DEFAULT_FSIZE_BYTES);
  assert_int_equal(plan.rlimits.nofile, 0);
  /* a holder takes cgroups even without limits (a leaf per exec) */
  assert_false(plan.one_shot);
  assert_true(plan.needs_cgroups);
  assert_false(plan.oom_shield);
  assert_false(plan.overlay);
  assert_non_null(strstr(plan.passwd, "cordon:x:1000:1000:cordon sandbox:/home/sandbox:/bin/sh\n"));
  assert_non_null(strstr(plan.group, "cordon:x:1000:\n"));
  ns_plan_clear(&plan);
  assert_null(plan.passwd);
}

static void test_identity_as_root(void **state) {
  (void)state;
  struct cordon_manifest m = {0};
  m.policy.egress = CORDON_EGRESS_OPEN;
  struct ns_plan_host host = as_root();
  host.root = "/src";
  struct ns_plan plan = {0};
  build(&m, &host, &plan);
  assert_false(plan.rootless);
  assert_true(plan.identity.can_setgroups);
  assert_int_equal(plan.outer_uid, 70000);
  assert_int_equal(plan.outer_gid, 70001);
  /* open egress: the host's network namespace */
  assert_false(plan.new_network);
  /* HOME is the private home, wherever the workspace appears */
  assert_non_null(strstr(plan.passwd, ":/home/sandbox:/bin/sh\n"));
  ns_plan_clear(&plan);
}

static void test_lists_normalised(void **state) {
  (void)state;
  struct cordon_manifest m = {0};
  m.policy.system_paths = LIST("/usr", "/etc/");
  m.policy.allow_ro = LIST("/opt/tools");
  m.policy.read_only = LIST("./src/", "docs");
  m.policy.hidden = LIST("secrets");
  m.policy.egress = CORDON_EGRESS_LOOPBACK;
  m.policy.limits.nofile = 64;
  m.policy.limits.fsize_bytes = 4096;
  struct ns_plan plan = {0};
  build(&m, &rootless, &plan);
  assert_false(plan.system_optional);
  assert_int_equal(strv_length((const char *const *)plan.system_paths), 2);
  assert_string_equal(plan.system_paths[1], "/etc");
  assert_string_equal(plan.grants[0], "/opt/tools");
  assert_string_equal(plan.read_only[0], "src");
  assert_string_equal(plan.read_only[1], "docs");
  assert_string_equal(plan.hidden[0], "secrets");
  assert_true(plan.new_network);
  assert_true(plan.loopback);
  assert_int_equal(plan.rlimits.nofile, 64);
  assert_int_equal(plan.rlimits.fsize, 4096);
  ns_plan_clear(&plan);
  /* restricted: its own network namespace with lo up, where the bridge to the proxy listens */
  m.policy.egress = CORDON_EGRESS_RESTRICTED;
  build(&m, &rootless, &plan);
  assert_true(plan.new_network);
  assert_true(plan.loopback);
  ns_plan_clear(&plan);
}

static void test_one_shot_and_overlay(void **state) {
  (void)state;
  struct cordon_manifest m = {0};
  m.one_shot = true;
  struct ns_plan plan = {0};
  /* one-shot without limits or devices: no cgroups, its pid namespace dies with its command */
  build(&m, &rootless, &plan);
  assert_true(plan.one_shot);
  assert_false(plan.needs_cgroups);
  assert_false(plan.oom_shield);
  ns_plan_clear(&plan);
  /* a device grant: cgroups, for the device cgroup rule */
  const char *devices[] = {"/dev/null:/dev/granted", NULL};
  m.devices = devices;
  build(&m, &rootless, &plan);
  assert_true(plan.needs_cgroups);
  ns_plan_clear(&plan);
  m.devices = NULL;
  /* a memory limit: cgroups, and pid 1 shielded from the OOM killer */
  m.policy.limits.memory_bytes = 64 << 20;
  build(&m, &rootless, &plan);
  assert_true(plan.needs_cgroups);
  assert_true(plan.oom_shield);
  ns_plan_clear(&plan);

  /* a resume as root is an overlay; rootless, or without overlay forks, a copy */
  struct ns_plan_host host = as_root();
  host.from_snapshot = true;
  m = (struct cordon_manifest){.one_shot = true};
  build(&m, &host, &plan);
  assert_true(plan.overlay);
  assert_true(plan.one_shot);
  ns_plan_clear(&plan);
  /* the manifest's files of an overlay session go in through the holder */
  struct cordon_file_spec files[1] = {{0}};
  m.files = files;
  m.n_files = 1;
  build(&m, &host, &plan);
  assert_true(plan.overlay);
  assert_false(plan.one_shot);
  ns_plan_clear(&plan);
  host.overlay_forks = false;
  build(&m, &host, &plan);
  assert_false(plan.overlay);
  assert_true(plan.one_shot);
  ns_plan_clear(&plan);
  struct ns_plan_host resumed = rootless;
  resumed.from_snapshot = true;
  build(&m, &resumed, &plan);
  assert_false(plan.overlay);
  ns_plan_clear(&plan);
}

static void test_refusals(void **state) {
  (void)state;
  struct cordon_manifest m = {0};
  m.policy.read_only = LIST("../outside");
  expect_refusal(&m, NULL);

  m = (struct cordon_manifest){0};
  m.policy.read_only = LIST("data");
  m.policy.hidden = LIST("data");
  expect_refusal(&m, "is also hidden");

  m = (struct cordon_manifest){0};
  m.policy.hidden = LIST("/etc/passwd");
  expect_refusal(&m, NULL);

  m = (struct cordon_manifest){0};
  m.policy.system_paths = LIST("usr");
  expect_refusal(&m, NULL);

  m = (struct cordon_manifest){0};
  m.policy.allow_ro = LIST("/proc/self");
  expect_refusal(&m, NULL);

  /* the workspace may not land on a system path */
  m = (struct cordon_manifest){0};
  struct ns_plan_host host = rootless;
  host.root = "/usr/ws";
  struct ns_plan plan = {0};
  struct cordon_error *err = NULL;
  assert_int_equal(ns_plan_build(&m, &host, &plan, &err), -1);
  assert_non_null(err);
  cordon_error_free(err);
}

/* --user root: uid/gid 0 inside, mapped to the same unprivileged host ids as the sandbox user. */
static void test_user_root(void **state) {
  (void)state;
  struct cordon_manifest m = {0};
  m.user_root = true;
  struct ns_plan_host host = as_root();
  struct ns_plan plan = {0};
  build(&m, &host, &plan);
  assert_int_equal(plan.identity.uid, 0);
  assert_int_equal(plan.identity.gid, 0);
  assert_int_equal(plan.outer_uid, 70000);
  assert_int_equal(plan.outer_gid, 70001);
  ns_plan_clear(&plan);
  build(&m, &rootless, &plan);
  assert_int_equal(plan.identity.uid, 0);
  assert_int_equal(plan.outer_uid, 1234);
  ns_plan_clear(&plan);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_defaults_rootless), cmocka_unit_test(test_identity_as_root),
      cmocka_unit_test(test_lists_normalised),  cmocka_unit_test(test_one_shot_and_overlay),
      cmocka_unit_test(test_refusals),          cmocka_unit_test(test_user_root),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
