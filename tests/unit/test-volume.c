/* Unit tests of the pure parts of volumes (-v): names, targets and the state file's record
 * (src/protocol/volume.c), and the ns plan's volumes (src/backends/ns/plan.c). No root, nothing
 * on the host is touched. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <cordon/volume.h>

#include "backends/ns/plan.h"
#include "protocol/volume.h"

static void test_names(void **state) {
  (void)state;
  const char *good[] = {"a", "cache", "A.b_c-9", "0",
                        "x1234567890123456789012345678901234567890"
                        "12345678901234567890123"};
  for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
    assert_true(cordon_volume_name_valid(good[i]));
  char long_name[CORDON_VOLUME_NAME_MAX + 2];
  memset(long_name, 'a', sizeof(long_name) - 1);
  long_name[sizeof(long_name) - 1] = 0;
  const char *bad[] = {"",    ".",    "..",  ".hidden", "-x",      "_x", "a/b",
                       "a b", "bad!", "a:b", "é",       long_name, NULL};
  for (size_t i = 0; bad[i]; i++)
    assert_false(cordon_volume_name_valid(bad[i]));
  assert_false(cordon_volume_name_valid(NULL));
  long_name[CORDON_VOLUME_NAME_MAX] = 0; /* exactly the maximum */
  assert_true(cordon_volume_name_valid(long_name));
}

static void expect_target(const char *target, const char *root, const char *want) {
  struct cordon_error *err = NULL;
  char *out = NULL;
  int r = volume_check_target(target, root, &out, &err);
  if (want) {
    if (r < 0)
      fail_msg("%s refused: %s", target, err->message);
    assert_string_equal(out, want);
    free(out);
  } else {
    if (r == 0)
      fail_msg("%s accepted as %s", target, out);
    assert_true(err->kind == CORDON_ERR_USAGE || err->kind == CORDON_ERR_DENIED); /* ".." */
    assert_non_null(strstr(err->message, "volume target"));
    cordon_error_free(err);
  }
}

static void test_targets(void **state) {
  (void)state;
  expect_target("/data", "/workspace", "/data");
  expect_target("/data//cache/", "/workspace", "/data/cache");
  expect_target("/home/agent/.cache", "/workspace", "/home/agent/.cache");
  expect_target("/work", "/workspace", "/work"); /* a prefix by name only */
  expect_target("/workspace", "/work", "/workspace");
  const char *refused[] = {"data",
                           "",
                           "/",
                           "/..",
                           "/data/../etc",
                           "/workspace",
                           "/workspace/x",
                           "/usr",
                           "/usr/local/x",
                           "/proc/x",
                           "/sys",
                           "/dev/x",
                           "/tmp",
                           "/tmp/x",
                           "/run/x",
                           "/boot",
                           "/etc/x",
                           "/bin",
                           "/lib64/x",
                           "/opt/tool",
                           "/.cordon-init",
                           "/.cordon-agent/x",
                           "/a/.cordon",
                           "/a/.cordon/b",
                           NULL};
  for (size_t i = 0; refused[i]; i++)
    expect_target(refused[i], "/workspace", NULL);
  expect_target("/srv", "/srv/ws", NULL); /* above the workspace root */
  expect_target(NULL, "/workspace", NULL);
}

static void test_record(void **state) {
  (void)state;
  json_t *ok = json_loads("[{\"name\":\"c\",\"source\":\"/p/.cordon/volumes/c\",\"target\":\"/c\","
                          "\"read_only\":false},{\"source\":\"/srv\",\"target\":\"/d\","
                          "\"read_only\":true}]",
                          0, NULL);
  assert_true(volumes_record_valid(ok));
  json_decref(ok);
  const char *bad[] = {
      "{}",
      "[1]",
      "[{\"source\":\"/s\",\"target\":\"/t\"}]",
      "[{\"source\":\"s\",\"target\":\"/t\",\"read_only\":true}]",
      "[{\"source\":\"/s\",\"target\":\"t\",\"read_only\":true}]",
      "[{\"source\":\"/s\",\"target\":\"/t\",\"read_only\":true,\"extra\":1}]",
      "[{\"source\":\"/s\",\"target\":\"/t\",\"read_only\":true,\"name\":\"../x\"}]",
      NULL,
  };
  for (size_t i = 0; bad[i]; i++) {
    json_t *doc = json_loads(bad[i], 0, NULL);
    assert_non_null(doc);
    assert_false(volumes_record_valid(doc));
    json_decref(doc);
  }
}

static const struct ns_plan_host host = {
    .euid = 1234,
    .egid = 2345,
    .sandbox_host_uid = 65534,
    .sandbox_host_gid = 65534,
    .root = "/workspace",
};

static void test_ns_plan(void **state) {
  (void)state;
  struct cordon_volume v[] = {{"/p/.cordon/volumes/c", "/data//c", false},
                              {"/srv/x", "/mnt/x", true}};
  struct cordon_manifest m = {.volumes = v, .n_volumes = 2};
  struct ns_plan plan = {0};
  struct cordon_error *err = NULL;
  assert_int_equal(ns_plan_build(&m, &host, &plan, &err), 0);
  assert_int_equal(plan.n_volumes, 2);
  assert_string_equal(plan.volumes[0].target, "/data/c");
  assert_string_equal(plan.volumes[0].source, "/p/.cordon/volumes/c");
  assert_false(plan.volumes[0].read_only);
  assert_true(plan.volumes[1].read_only);
  ns_plan_clear(&plan);

  /* A target on a grant or a system path has no mount point to make. */
  const char *grants[] = {"/srv/data", NULL};
  m.policy.allow_ro = grants;
  v[1].target = "/srv/data/sub";
  assert_int_equal(ns_plan_build(&m, &host, &plan, &err), -1);
  assert_non_null(strstr(err->message, "read-only grant /srv/data"));
  cordon_error_free(err);
  err = NULL;
  m.policy.allow_ro = NULL;
  const char *sys[] = {"/usr", "/nix", NULL};
  m.policy.system_paths = sys;
  v[1].target = "/nix";
  assert_int_equal(ns_plan_build(&m, &host, &plan, &err), -1);
  assert_non_null(strstr(err->message, "system path /nix"));
  cordon_error_free(err);
  err = NULL;
  /* The backend is only ever given host paths. */
  m.policy.system_paths = NULL;
  v[1].target = "/mnt/x";
  v[1].source = "name";
  assert_int_equal(ns_plan_build(&m, &host, &plan, &err), -1);
  cordon_error_free(err);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_names),
      cmocka_unit_test(test_targets),
      cmocka_unit_test(test_record),
      cmocka_unit_test(test_ns_plan),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
