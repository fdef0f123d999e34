/* Unit tests of the OCI spec pieces shared by the gvisor backend and the agent's gvisor
 * mechanism (src/confine/oci.c), and of the backend's spec built on them
 * (src/backends/gvisor/spec.c): the protected paths' ancestors pinned as mount points, in an
 * order where every mount lands on the one above it. Pure: no runsc. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backends/gvisor/spec.h"
#include "base/cleanup.h"
#include "base/strv.h"
#include "confine/oci.h"
#include "confine/policy.h"

#define LIST(...) ((char *[]){__VA_ARGS__, NULL})

/* The index of the (last) mount at destination, or -1. */
static int mount_index(json_t *mounts, const char *destination) {
  int found = -1;
  for (size_t i = 0; i < json_array_size(mounts); i++)
    if (!strcmp(json_string_value(json_object_get(json_array_get(mounts, i), "destination")),
                destination))
      found = (int)i;
  return found;
}

static bool has_option(json_t *mount, const char *option) {
  json_t *opts = json_object_get(mount, "options");
  for (size_t i = 0; i < json_array_size(opts); i++)
    if (!strcmp(json_string_value(json_array_get(opts, i)), option))
      return true;
  return false;
}

static json_t *at(json_t *mounts, const char *destination) {
  int i = mount_index(mounts, destination);
  assert_true(i >= 0);
  return json_array_get(mounts, (size_t)i);
}

/* `--ro deep/hooks --hide conf/token --hide a/b/secrets`: every directory between the root and a
 * protected path is bound onto itself read-write, before what lies beneath it. */
static void test_pins(void **state) {
  (void)state;
  _cleanup_(strv_freep) char **pinned = NULL;
  char **ro = LIST("deep/hooks", "ro");
  char **hidden_dirs = LIST("a/b/secrets");
  char **hidden_files = LIST("conf/token");
  assert_int_equal(confine_protected_ancestors((const char *const *)ro,
                                               (const char *const *)hidden_dirs,
                                               (const char *const *)hidden_files, &pinned, NULL),
                   0);
  json_t *mounts = json_array();
  const struct oci_workspace w = {.host = "/host/ws",
                                  .inside = "/workspace",
                                  .pinned = pinned,
                                  .read_only = ro,
                                  .hidden_dirs = hidden_dirs,
                                  .hidden_files = hidden_files,
                                  .empty_file = "/run/empty"};
  assert_int_equal(oci_workspace_mounts(mounts, &w), 0);
  assert_int_equal(mount_index(mounts, "/workspace"), 0);
  const char *const pins[] = {"/workspace/deep", "/workspace/conf", "/workspace/a",
                              "/workspace/a/b"};
  for (size_t i = 0; i < sizeof(pins) / sizeof(pins[0]); i++) {
    json_t *m = at(mounts, pins[i]);
    assert_true(has_option(m, "rw"));
    assert_string_equal(json_string_value(json_object_get(m, "type")), "bind");
    assert_string_equal(json_string_value(json_object_get(m, "source")) + strlen("/host/ws"),
                        pins[i] + strlen("/workspace"));
  }
  assert_true(mount_index(mounts, "/workspace/a") < mount_index(mounts, "/workspace/a/b"));
  assert_true(mount_index(mounts, "/workspace/a/b") <
              mount_index(mounts, "/workspace/a/b/secrets"));
  assert_true(mount_index(mounts, "/workspace/deep") <
              mount_index(mounts, "/workspace/deep/hooks"));
  assert_true(mount_index(mounts, "/workspace/conf") <
              mount_index(mounts, "/workspace/conf/token"));
  assert_true(has_option(at(mounts, "/workspace/deep/hooks"), "ro"));
  assert_true(has_option(at(mounts, "/workspace/a/b/secrets"), "mode=000"));
  assert_string_equal(
      json_string_value(json_object_get(at(mounts, "/workspace/conf/token"), "source")),
      "/run/empty");
  /* The protected paths themselves are not pinned read-write: a read-only path is bound once,
   * read-only; a hidden one is its mask. */
  assert_false(has_option(at(mounts, "/workspace/ro"), "rw"));
  assert_int_equal(json_array_size(mounts), 1 + 4 + 2 + 1 + 1);
  json_decref(mounts);
}

/* A pin inside a read-only tree lands on it, not beneath it: sorted by path, not by list. */
static void test_pin_inside_read_only(void **state) {
  (void)state;
  json_t *mounts = json_array();
  const struct oci_workspace w = {.host = "/h",
                                  .inside = "/w",
                                  .pinned = LIST("x/y"),
                                  .read_only = LIST("x"),
                                  .hidden_files = LIST("x/y/z"),
                                  .empty_file = "/e"};
  assert_int_equal(oci_workspace_mounts(mounts, &w), 0);
  assert_true(mount_index(mounts, "/w/x") < mount_index(mounts, "/w/x/y"));
  assert_true(mount_index(mounts, "/w/x/y") < mount_index(mounts, "/w/x/y/z"));
  json_decref(mounts);
}

/* agent-visible: on top of its hidden parent, which keeps search rights only. */
static void test_visible(void **state) {
  (void)state;
  json_t *mounts = json_array();
  const struct oci_workspace w = {.host = "/p",
                                  .inside = "/p",
                                  .hidden_dirs = LIST(".cordon", "other"),
                                  .empty_file = "/e",
                                  .visible = ".cordon/agent-visible"};
  assert_int_equal(oci_workspace_mounts(mounts, &w), 0);
  assert_true(has_option(at(mounts, "/p/.cordon"), "mode=111"));
  assert_true(has_option(at(mounts, "/p/other"), "mode=000"));
  assert_true(mount_index(mounts, "/p/.cordon") < mount_index(mounts, "/p/.cordon/agent-visible"));
  assert_true(has_option(at(mounts, "/p/.cordon/agent-visible"), "ro"));
  json_decref(mounts);
}

static void test_process_and_namespaces(void **state) {
  (void)state;
  const char *const argv[] = {"/bin/true", NULL};
  const char *const env[] = {"A=1", NULL};
  json_t *p = oci_process(argv, env, "/w", 7, 8, false);
  assert_non_null(p);
  assert_true(json_is_true(json_object_get(p, "noNewPrivileges")));
  assert_int_equal(json_array_size(json_object_get(json_object_get(p, "capabilities"), "bounding")),
                   0);
  assert_int_equal(json_integer_value(json_object_get(json_object_get(p, "user"), "gid")), 8);
  json_decref(p);
  json_t *ns = oci_namespaces(true, false);
  assert_int_equal(json_array_size(ns), 6);
  json_decref(ns);
  ns = oci_namespaces(false, true);
  assert_int_equal(json_array_size(ns), 4);
  json_decref(ns);
  assert_string_equal(oci_runsc_network(true), "host");
  assert_string_equal(oci_runsc_network(false), "none");
}

/* The backend's spec carries the pins it is given, after the system directories. */
static void test_backend_spec(void **state) {
  (void)state;
  struct cordon_policy policy = {0};
  policy.egress = CORDON_EGRESS_LOOPBACK;
  const struct gvisor_spec_params p = {
      .rootfs = "/run/b/rootfs",
      .workspace = "/host/ws",
      .root = "/workspace",
      .control = "/run/b/control",
      .helper = "/usr/libexec/cordon-gvisor-exec",
      .empty_file = "/run/b/empty",
      .system_binds = LIST("/usr", "/etc"),
      .policy = &policy,
      .pinned = LIST("deep"),
      .read_only = LIST("deep/hooks"),
      .hidden_files = LIST("conf"),
      .owner_uid = 1234,
      .owner_gid = 1234,
  };
  json_t *spec = NULL;
  assert_int_equal(gvisor_spec(&p, &spec, NULL), 0);
  json_t *mounts = json_object_get(spec, "mounts");
  assert_true(mount_index(mounts, "/etc") < mount_index(mounts, "/workspace"));
  assert_true(mount_index(mounts, "/workspace") < mount_index(mounts, "/workspace/deep"));
  assert_true(mount_index(mounts, "/workspace/deep") <
              mount_index(mounts, "/workspace/deep/hooks"));
  assert_true(has_option(at(mounts, "/workspace/deep"), "rw"));
  json_t *linux_ = json_object_get(spec, "linux");
  assert_int_equal(json_array_size(json_object_get(linux_, "uidMappings")), 2);
  assert_int_equal(json_array_size(json_object_get(linux_, "namespaces")), 6);
  json_t *args = json_object_get(json_object_get(spec, "process"), "args");
  assert_string_equal(json_string_value(json_array_get(args, 1)), "pause");
  json_decref(spec);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pins),         cmocka_unit_test(test_pin_inside_read_only),
      cmocka_unit_test(test_visible),      cmocka_unit_test(test_process_and_namespaces),
      cmocka_unit_test(test_backend_spec),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
