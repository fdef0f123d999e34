/* Unit tests of the pure confinement policy (src/confine/policy.c): path normalisation and
 * overlap rules, host-path and sandbox-root checks, limits, egress, id maps, cgroup path
 * arithmetic from /proc/self/cgroup and mountinfo text. No root, no kernel features. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "confine/policy.h"

#define LIST(...) ((const char *const[]){__VA_ARGS__, NULL})

/* errp, not err: the call filling it is another argument, evaluated in unspecified order. */
static void expect_error(int r, struct cordon_error **errp, enum cordon_error_kind kind,
                         const char *fragment) {
  struct cordon_error *err = *errp;
  *errp = NULL;
  assert_true(r < 0);
  assert_non_null(err);
  assert_int_equal(err->kind, kind);
  if (fragment && !strstr(err->message, fragment))
    fail_msg("error \"%s\" does not mention \"%s\"", err->message, fragment);
  cordon_error_free(err);
}

static void check_norm(const char *in, const char *want) {
  char *out = NULL;
  struct cordon_error *err = NULL;
  int r = confine_normalize_workspace_path(in, "read-only path", &out, &err);
  if (r < 0)
    fail_msg("%s: %s", in, err->message);
  assert_string_equal(out, want);
  free(out);
}

static void test_workspace_path_normalisation(void **state) {
  check_norm("a", "a");
  check_norm("a/b/c", "a/b/c");
  check_norm("a//b/./c/", "a/b/c");
  check_norm("./a", "a");
  check_norm(".cordon", ".cordon");
  check_norm("...", "..."); /* a name, not a parent reference */
  check_norm("a/..b", "a/..b");
}

static void test_workspace_path_refusals(void **state) {
  const char *bad[] = {"", ".", "./", "/abs", "..", "a/..", "a/../b", "../x", "a/b/../../c"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    char *out = NULL;
    struct cordon_error *err = NULL;
    int r = confine_normalize_workspace_path(bad[i], "hidden path", &out, &err);
    if (r == 0)
      fail_msg("%s was accepted as %s", bad[i], out);
    assert_non_null(err);
    assert_non_null(strstr(err->message, "hidden path"));
    cordon_error_free(err);
  }
  char *out = NULL;
  struct cordon_error *err = NULL;
  expect_error(confine_normalize_workspace_path(NULL, "x", &out, &err), &err, CORDON_ERR_USAGE,
               "empty");
}

static void test_host_path_normalisation(void **state) {
  char *out = NULL;
  struct cordon_error *err = NULL;
  assert_int_equal(confine_normalize_host_path("/usr//share/./doc/", "grant", &out, &err), 0);
  assert_string_equal(out, "/usr/share/doc");
  free(out);
  expect_error(confine_normalize_host_path("/", "grant", &out, &err), &err, CORDON_ERR_USAGE,
               "host root");
  expect_error(confine_normalize_host_path("usr", "grant", &out, &err), &err, CORDON_ERR_USAGE,
               "absolute");
  expect_error(confine_normalize_host_path("/usr/../etc", "grant", &out, &err), &err,
               CORDON_ERR_DENIED, "..");
}

static void test_covers(void **state) {
  assert_true(confine_path_covers("a", "a"));
  assert_true(confine_path_covers("a", "a/b"));
  assert_false(confine_path_covers("a", "ab"));
  assert_false(confine_path_covers("a/b", "a"));
  assert_true(confine_path_covers("/", "/usr"));
  assert_true(confine_path_covers("/usr", "/usr/lib"));
  assert_false(confine_path_covers("/usr", "/usrx"));
}

static void test_workspace_overlaps(void **state) {
  struct cordon_error *err = NULL;
  assert_int_equal(
      confine_check_workspace_lists(LIST("src", "docs"), LIST("secrets", "src/private"), &err), 0);
  assert_int_equal(confine_check_workspace_lists(NULL, NULL, &err), 0);
  expect_error(confine_check_workspace_lists(LIST("a", "a/b"), NULL, &err), &err, CORDON_ERR_USAGE,
               "overlaps");
  expect_error(confine_check_workspace_lists(LIST("a", "a"), NULL, &err), &err, CORDON_ERR_USAGE,
               "overlaps");
  expect_error(confine_check_workspace_lists(NULL, LIST("x/y", "x"), &err), &err, CORDON_ERR_USAGE,
               "hidden path");
  expect_error(confine_check_workspace_lists(LIST("s/t"), LIST("s"), &err), &err, CORDON_ERR_USAGE,
               "under hidden path");
  expect_error(confine_check_workspace_lists(LIST("s"), LIST("s"), &err), &err, CORDON_ERR_USAGE,
               "under hidden path");
}

static void test_host_lists(void **state) {
  struct cordon_error *err = NULL;
  const char *const *sys = LIST("/usr", "/etc");
  assert_int_equal(
      confine_check_host_lists(sys, LIST("/srv/data", "/usr/share"), "/workspace", &err), 0);
  expect_error(confine_check_host_lists(LIST("/usr", "/usr/lib"), NULL, "/workspace", &err), &err,
               CORDON_ERR_USAGE, "system path");
  expect_error(confine_check_host_lists(sys, LIST("/var"), "/var/ws", &err), &err, CORDON_ERR_USAGE,
               "workspace");
  expect_error(confine_check_host_lists(sys, LIST("/workspace/x"), "/workspace", &err), &err,
               CORDON_ERR_USAGE, "workspace");
  expect_error(confine_check_host_lists(sys, LIST("/proc/1"), "/workspace", &err), &err,
               CORDON_ERR_USAGE, "/proc");
  expect_error(confine_check_host_lists(sys, LIST("/dev"), "/workspace", &err), &err,
               CORDON_ERR_USAGE, "/dev");
  expect_error(confine_check_host_lists(LIST("/usr", "/tmp"), NULL, "/workspace", &err), &err,
               CORDON_ERR_USAGE, "/tmp");
  expect_error(confine_check_host_lists(LIST("/"), NULL, "/workspace", &err), &err,
               CORDON_ERR_USAGE, "provides");
  /* a grant may sit under /tmp (mounted on the sandbox's own /tmp) */
  assert_int_equal(confine_check_host_lists(sys, LIST("/tmp/shared"), "/workspace", &err), 0);
}

static void test_sandbox_root(void **state) {
  struct cordon_error *err = NULL;
  const char *const *sys = confine_default_system_paths;
  assert_int_equal(confine_check_sandbox_root("/workspace", sys, &err), 0);
  assert_int_equal(confine_check_sandbox_root("/home/agent/src", sys, &err), 0);
  expect_error(confine_check_sandbox_root("/", sys, &err), &err, CORDON_ERR_USAGE, "other than");
  expect_error(confine_check_sandbox_root("/usr/src", sys, &err), &err, CORDON_ERR_USAGE,
               "system path");
  expect_error(confine_check_sandbox_root("/proc/x", sys, &err), &err, CORDON_ERR_USAGE, "/proc");
  expect_error(confine_check_sandbox_root("/a//b", sys, &err), &err, CORDON_ERR_USAGE,
               "normalised");
  expect_error(confine_check_sandbox_root("/a/../b", sys, &err), &err, CORDON_ERR_DENIED, "..");
}

static void test_workspace_dir(void **state) {
  struct cordon_error *err = NULL;
  assert_int_equal(confine_check_workspace_dir("/home/me/project", &err), 0);
  assert_int_equal(confine_check_workspace_dir("/tmp/ws", &err), 0);
  assert_int_equal(confine_check_workspace_dir("/usr/local/src/p", &err), 0); /* under: fine */
  assert_int_equal(confine_check_workspace_dir("/variable", &err), 0);
  expect_error(confine_check_workspace_dir("/", &err), &err, CORDON_ERR_DENIED, "covers");
  expect_error(confine_check_workspace_dir("/etc", &err), &err, CORDON_ERR_DENIED, "/etc");
  expect_error(confine_check_workspace_dir("/var", &err), &err, CORDON_ERR_DENIED, "/var");
  expect_error(confine_check_workspace_dir("relative", &err), &err, CORDON_ERR_USAGE, "absolute");
}

static void test_limits(void **state) {
  struct cordon_error *err = NULL;
  struct cordon_limits ok = {.memory_bytes = 64u << 20, .pids = 64, .cpus = 0.5, .nofile = 256};
  assert_int_equal(confine_check_limits(&ok, &err), 0);
  struct cordon_limits none = {0};
  assert_int_equal(confine_check_limits(&none, &err), 0);
  struct cordon_limits tiny_mem = {.memory_bytes = 4096};
  expect_error(confine_check_limits(&tiny_mem, &err), &err, CORDON_ERR_USAGE, "memory");
  struct cordon_limits tiny_cpu = {.cpus = 0.001};
  expect_error(confine_check_limits(&tiny_cpu, &err), &err, CORDON_ERR_USAGE, "cpu");
  struct cordon_limits negative_cpu = {.cpus = -1};
  expect_error(confine_check_limits(&negative_cpu, &err), &err, CORDON_ERR_USAGE, "cpu");
  struct cordon_limits few_files = {.nofile = 2};
  expect_error(confine_check_limits(&few_files, &err), &err, CORDON_ERR_USAGE, "open-file");
  struct cordon_limits tiny_tmp = {.tmp_bytes = 100};
  expect_error(confine_check_limits(&tiny_tmp, &err), &err, CORDON_ERR_USAGE, "/tmp");
}

/* /tmp and /dev/shm are never unbounded (size=0 is tmpfs for half the host's memory). */
static void test_tmp_bytes(void **state) {
  struct cordon_limits none = {0};
  assert_int_equal(confine_tmp_bytes(&none), CORDON_DEFAULT_TMP_BYTES);
  assert_int_equal(CORDON_DEFAULT_TMP_BYTES, 1ull << 30);
  struct cordon_limits memory = {.memory_bytes = 64u << 20};
  assert_int_equal(confine_tmp_bytes(&memory), 64u << 20);
  struct cordon_limits both = {.memory_bytes = 64u << 20, .tmp_bytes = 8u << 20};
  assert_int_equal(confine_tmp_bytes(&both), 8u << 20);
  struct cordon_limits larger = {.memory_bytes = 64u << 20, .tmp_bytes = 2ull << 30};
  assert_int_equal(confine_tmp_bytes(&larger), 2ull << 30);
}

static void test_cpu_quota(void **state) {
  assert_int_equal(confine_cpu_quota_us(1.0), 100000);
  assert_int_equal(confine_cpu_quota_us(0.5), 50000);
  assert_int_equal(confine_cpu_quota_us(2.25), 225000);
  assert_int_equal(confine_cpu_quota_us(0.01), 1000);
  assert_int_equal(confine_cpu_quota_us(0.001), 1000); /* clamped to the kernel minimum */
}

static void test_egress(void **state) {
  struct cordon_error *err = NULL;
  assert_int_equal(confine_check_egress(CORDON_EGRESS_NONE, &err), 0);
  assert_int_equal(confine_check_egress(CORDON_EGRESS_LOOPBACK, &err), 0);
  assert_int_equal(confine_check_egress(CORDON_EGRESS_OPEN, &err), 0);
  expect_error(confine_check_egress(CORDON_EGRESS_RESTRICTED, &err), &err, CORDON_ERR_UNAVAILABLE,
               "not implemented");
}

static void test_id_map(void **state) {
  char buf[64];
  assert_int_equal(confine_format_id_map(1000, 65534, buf, sizeof(buf)), 13);
  assert_string_equal(buf, "1000 65534 1\n");
  assert_int_equal(confine_format_id_map(1000, 65534, buf, 5), -1);
}

static const char proc_cgroup_hybrid[] = "9:name=systemd:/\n"
                                         "8:pids:/\n"
                                         "4:memory:/process_api/9a00\n"
                                         "2:cpu,cpuacct:/grp\n"
                                         "0::/unified/path\n";

static void test_cgroup_own_path(void **state) {
  char *p = NULL;
  assert_int_equal(confine_cgroup_own_path(proc_cgroup_hybrid, "memory", &p), 0);
  assert_string_equal(p, "/process_api/9a00");
  free(p);
  assert_int_equal(confine_cgroup_own_path(proc_cgroup_hybrid, "cpu", &p), 0);
  assert_string_equal(p, "/grp");
  free(p);
  assert_int_equal(confine_cgroup_own_path(proc_cgroup_hybrid, "cpuacct", &p), 0);
  free(p);
  assert_int_equal(confine_cgroup_own_path(proc_cgroup_hybrid, NULL, &p), 0);
  assert_string_equal(p, "/unified/path");
  free(p);
  assert_int_equal(confine_cgroup_own_path(proc_cgroup_hybrid, "blkio", &p), -1);
  assert_int_equal(confine_cgroup_own_path(proc_cgroup_hybrid, "cpuset", &p), -1);
  assert_int_equal(confine_cgroup_own_path("0::/\n", "memory", &p), -1);
  assert_int_equal(confine_cgroup_own_path("", NULL, &p), -1);
}

static const char mountinfo_hybrid[] =
    "21 26 0:20 / /proc rw,relatime - proc proc rw\n"
    "30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "31 30 0:28 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "32 30 0:29 / /sys/fs/cgroup/cpu\\040acct rw,relatime shared:5 - cgroup cgroup rw,cpuacct\n"
    "34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "38 30 0:35 /nested /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"
    "40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

static void test_cgroup_mounts(void **state) {
  char *mp = NULL, *root = NULL;
  assert_int_equal(confine_cgroup_find_mount(mountinfo_hybrid, NULL, &mp, &root), 0);
  assert_string_equal(mp, "/sys/fs/cgroup/unified");
  assert_string_equal(root, "/");
  free(mp);
  free(root);
  assert_int_equal(confine_cgroup_find_mount(mountinfo_hybrid, "memory", &mp, &root), 0);
  assert_string_equal(mp, "/sys/fs/cgroup/memory");
  free(mp);
  free(root);
  assert_int_equal(confine_cgroup_find_mount(mountinfo_hybrid, "cpuacct", &mp, &root), 0);
  assert_string_equal(mp, "/sys/fs/cgroup/cpu acct"); /* \040 decoded */
  free(mp);
  free(root);
  assert_int_equal(confine_cgroup_find_mount(mountinfo_hybrid, "pids", &mp, &root), 0);
  assert_string_equal(root, "/nested");
  free(mp);
  free(root);
  assert_int_equal(confine_cgroup_find_mount(mountinfo_hybrid, "blkio", &mp, &root), -1);
  assert_int_equal(
      confine_cgroup_find_mount("21 26 0:20 / /proc rw - proc proc rw\n", NULL, &mp, &root), -1);
}

static void test_cgroup_dir(void **state) {
  char *d = confine_cgroup_dir("/sys/fs/cgroup/memory", "/", "/process_api/x", "cordon-1");
  assert_string_equal(d, "/sys/fs/cgroup/memory/process_api/x/cordon-1");
  free(d);
  d = confine_cgroup_dir("/sys/fs/cgroup/unified", "/", "/", "cordon-1");
  assert_string_equal(d, "/sys/fs/cgroup/unified/cordon-1");
  free(d);
  d = confine_cgroup_dir("/sys/fs/cgroup/unified/", "/", "/", NULL);
  assert_string_equal(d, "/sys/fs/cgroup/unified");
  free(d);
  /* a hierarchy mounted from a sub-cgroup (a container's view) */
  d = confine_cgroup_dir("/sys/fs/cgroup/pids", "/nested", "/nested/me", "c");
  assert_string_equal(d, "/sys/fs/cgroup/pids/me/c");
  free(d);
  d = confine_cgroup_dir("/sys/fs/cgroup/pids", "/nested", "/nested", "c");
  assert_string_equal(d, "/sys/fs/cgroup/pids/c");
  free(d);
  assert_null(confine_cgroup_dir("/sys/fs/cgroup/pids", "/nested", "/elsewhere", "c"));
}

static void test_cgroup_list(void **state) {
  assert_true(confine_cgroup_list_has("cpu io memory pids\n", "memory"));
  assert_true(confine_cgroup_list_has("memory", "memory"));
  assert_false(confine_cgroup_list_has("hugetlb\n", "memory"));
  assert_false(confine_cgroup_list_has("memoryx", "memory"));
  assert_false(confine_cgroup_list_has("", "pids"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_workspace_path_normalisation),
      cmocka_unit_test(test_workspace_path_refusals),
      cmocka_unit_test(test_host_path_normalisation),
      cmocka_unit_test(test_covers),
      cmocka_unit_test(test_workspace_overlaps),
      cmocka_unit_test(test_host_lists),
      cmocka_unit_test(test_sandbox_root),
      cmocka_unit_test(test_workspace_dir),
      cmocka_unit_test(test_limits),
      cmocka_unit_test(test_tmp_bytes),
      cmocka_unit_test(test_cpu_quota),
      cmocka_unit_test(test_egress),
      cmocka_unit_test(test_id_map),
      cmocka_unit_test(test_cgroup_own_path),
      cmocka_unit_test(test_cgroup_mounts),
      cmocka_unit_test(test_cgroup_dir),
      cmocka_unit_test(test_cgroup_list),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
