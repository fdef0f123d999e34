/* Unit tests of the pure confinement policy (src/confine/policy.c): path normalisation and
 * overlap rules, host-path and sandbox-root checks, limits, egress, id maps, cgroup path
 * arithmetic from /proc/self/cgroup and mountinfo text, the directories to pin above protected
 * paths and the decisions on protected files with other names (hard links), whose walk
 * (confine/resolve.c) is tried on a temporary tree; the always-hidden set's decisions, and the
 * set itself with the registry of projects (confine/private.c), in a scratch directory. No
 * root, no kernel features. */
#include <fcntl.h>
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

#include "base/fs.h"
#include "base/strv.h"
#include "confine/cpus.h"
#include "confine/policy.h"
#include "confine/resolve.h"
#include "confine/private.h"

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

/* `--ro .`: only spellings of the workspace root itself, never a parent or an absolute path. */
static void test_names_workspace_root(void **state) {
  const char *root[] = {".", "./", "./.", ".//./"};
  const char *other[] = {"", "/", "..", "./..", ".a", "a", "./a", "...", "/."};
  for (size_t i = 0; i < sizeof(root) / sizeof(root[0]); i++)
    if (!confine_names_workspace_root(root[i]))
      fail_msg("%s is the workspace root", root[i]);
  for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++)
    if (confine_names_workspace_root(other[i]))
      fail_msg("%s is not the workspace root", other[i]);
  bool had = false;
  const char *list[] = {"a", ".", "b/c", "./", NULL};
  char **rest = confine_without_workspace_root(list, &had);
  assert_true(had);
  assert_non_null(rest);
  assert_string_equal(rest[0], "a");
  assert_string_equal(rest[1], "b/c");
  assert_null(rest[2]);
  strv_free(rest);
  rest = confine_without_workspace_root(NULL, &had);
  assert_false(had);
  assert_null(rest[0]);
  strv_free(rest);
}

/* `--cpus N`: a whole N narrows the affinity to the first N allowed CPUs; a fraction does not. */
static void test_cpus_visible(void **state) {
  assert_int_equal(confine_cpus_visible(1), 1);
  assert_int_equal(confine_cpus_visible(2.0), 2);
  assert_int_equal(confine_cpus_visible(0.5), 0);
  assert_int_equal(confine_cpus_visible(1.5), 0);
  assert_int_equal(confine_cpus_visible(0), 0);
  cpu_set_t allowed, out;
  CPU_ZERO(&allowed);
  CPU_SET(1, &allowed);
  CPU_SET(3, &allowed);
  CPU_SET(4, &allowed);
  assert_int_equal(confine_affinity_pick(&allowed, 2, &out), 0);
  assert_int_equal(CPU_COUNT(&out), 2);
  assert_true(CPU_ISSET(1, &out) && CPU_ISSET(3, &out));
  assert_int_equal(confine_affinity_pick(&allowed, 4, &out), -1);
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
  /* Strictly beneath a hidden directory, a read-only path is that part shown read-only. */
  assert_int_equal(confine_check_workspace_lists(LIST("s/t", "s/u/v"), LIST("s"), &err), 0);
  expect_error(confine_check_workspace_lists(LIST("s"), LIST("s"), &err), &err, CORDON_ERR_USAGE,
               "read-only path s is also hidden");
  expect_error(confine_check_workspace_lists(LIST("s/t", "s"), LIST("s"), &err), &err,
               CORDON_ERR_USAGE, "overlaps");
}

/* The rule of a mechanism that cannot show a path inside a mask (docker). */
static void test_no_reshown(void **state) {
  struct cordon_error *err = NULL;
  assert_int_equal(confine_check_no_reshown(LIST("src"), LIST("secrets", "src/private"), &err), 0);
  assert_int_equal(confine_check_no_reshown(NULL, LIST("s"), &err), 0);
  expect_error(confine_check_no_reshown(LIST("s/t"), LIST("s"), &err), &err, CORDON_ERR_USAGE,
               "read-only path s/t lies under hidden path s");
  expect_error(confine_check_no_reshown(LIST("s"), LIST("s"), &err), &err, CORDON_ERR_USAGE,
               "under hidden path");
}

static void test_reshown(void **state) {
  (void)state;
  assert_true(confine_reshown("s/t", LIST("x", "s")));
  assert_true(confine_reshown(".cordon/agent-visible", LIST(".cordon")));
  assert_false(confine_reshown("s", LIST("s")));    /* on it, not beneath */
  assert_false(confine_reshown("st/u", LIST("s"))); /* a name that only starts alike */
  assert_false(confine_reshown("s", LIST("s/t")));  /* a hidden path inside a read-only one */
  assert_false(confine_reshown("s/t", NULL));
}

/* cordon's own state stays hidden: only a .cordon/'s agent-visible may be shown. */
static void test_private_reshown(void **state) {
  struct cordon_error *err = NULL;
  const char *const *priv = LIST(".cordon", "sub/.cordon", ".local/state/cordon");
  assert_int_equal(confine_check_private_reshown(LIST(".cordon/agent-visible", "docs"), priv, &err),
                   0);
  assert_int_equal(confine_check_private_reshown(LIST("sub/.cordon/agent-visible"), priv, &err), 0);
  assert_int_equal(confine_check_private_reshown(LIST("x"), NULL, &err), 0);
  expect_error(confine_check_private_reshown(LIST(".cordon/keys"), priv, &err), &err,
               CORDON_ERR_DENIED, "read-only path .cordon/keys lies in cordon's private state");
  expect_error(confine_check_private_reshown(LIST(".cordon/agent-visible/sub"), priv, &err), &err,
               CORDON_ERR_DENIED, "private state .cordon,");
  expect_error(confine_check_private_reshown(LIST(".cordon"), priv, &err), &err, CORDON_ERR_DENIED,
               "private state");
  /* The state home is no project's .cordon/: nothing in it may be shown. */
  expect_error(confine_check_private_reshown(LIST(".local/state/cordon/agent-visible"), priv, &err),
               &err, CORDON_ERR_DENIED, "private state .local/state/cordon");
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
  /* restricted: lo, and the proxy the ns backend runs outside the sandbox */
  assert_int_equal(confine_check_egress(CORDON_EGRESS_RESTRICTED, &err), 0);
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

static void test_protected_ancestors(void **state) {
  (void)state;
  struct cordon_error *err = NULL;
  char **dirs = NULL;
  /* Each directory once, parents first, the read-only paths themselves left out; a top-level
   * path needs nothing (the workspace root is a mount). */
  assert_int_equal(confine_protected_ancestors(LIST(".git/hooks", "a", "a/b/c/ro"),
                                               LIST("a/b/hidden", "a-b/x"), LIST("conf/token"),
                                               &dirs, &err),
                   0);
  assert_int_equal(strv_length((const char *const *)dirs), 5);
  /* strcmp order: "a-b" < "a/b" ('-' < '/'), and a parent before what lies under it */
  const char *sorted[] = {".git", "a-b", "a/b", "a/b/c", "conf"};
  for (size_t i = 0; i < 5; i++)
    assert_string_equal(dirs[i], sorted[i]);
  strv_free(dirs);
  dirs = NULL;
  assert_int_equal(confine_protected_ancestors(LIST("ro"), NULL, LIST(".env"), &dirs, &err), 0);
  assert_non_null(dirs);
  assert_null(dirs[0]);
  strv_free(dirs);
  dirs = NULL;
  /* A hidden directory is a mount point (its mask) and nothing in it is writable: neither it
   * nor the directories between it and a read-only path shown inside it are pinned. */
  assert_int_equal(confine_protected_ancestors(LIST(".cordon/agent-visible", "h/a/b", "x/y"),
                                               LIST(".cordon", "h"), NULL, &dirs, &err),
                   0);
  assert_int_equal(strv_length((const char *const *)dirs), 1);
  assert_string_equal(dirs[0], "x");
  strv_free(dirs);
}

static void test_protection_of(void **state) {
  (void)state;
  const char *by = NULL;
  assert_int_equal(confine_protection_of("a/b/c", LIST("a"), LIST("a/b"), &by), CONFINE_HIDDEN);
  assert_string_equal(by, "a/b");
  assert_int_equal(confine_protection_of("a/x", LIST("a"), LIST("a/b"), &by), CONFINE_READ_ONLY);
  assert_string_equal(by, "a");
  assert_int_equal(confine_protection_of("ab", LIST("a"), LIST("a/b"), &by), CONFINE_UNPROTECTED);
  assert_null(by);
  /* The innermost entry decides: a read-only path shown inside a hidden directory. */
  assert_int_equal(confine_protection_of("h/shown/f", LIST("h/shown"), LIST("h"), &by),
                   CONFINE_READ_ONLY);
  assert_string_equal(by, "h/shown");
  assert_int_equal(confine_protection_of("h/other", LIST("h/shown"), LIST("h"), &by),
                   CONFINE_HIDDEN);
  assert_string_equal(by, "h");
}

static int check_linked(unsigned long nlink, const char *const *names, bool searched,
                        const char *const *ro, const char *const *hidden,
                        struct cordon_error **err) {
  struct confine_linked_file f = {.nlink = nlink, .names = names, .searched = searched};
  return confine_check_linked_file(&f, ro, hidden, err);
}

static void test_linked_file(void **state) {
  (void)state;
  struct cordon_error *err = NULL;
  /* Every name found and hidden: fine; a missing name: search first, then refuse. */
  assert_int_equal(check_linked(2, LIST("h/a", "x"), false, NULL, LIST("h", "x"), &err), 0);
  assert_int_equal(check_linked(2, LIST("h/a"), false, NULL, LIST("h"), &err), 1);
  expect_error(check_linked(3, LIST("h/a"), true, NULL, LIST("h"), &err), &err, CORDON_ERR_DENIED,
               "hidden path h holds h/a, which has 2 other names");
  expect_error(check_linked(2, LIST("t"), true, NULL, LIST("t"), &err), &err, CORDON_ERR_DENIED,
               "hidden path t has 1 other name (hard links)");
  /* An unprotected name: refused naming both, without a search. */
  expect_error(check_linked(2, LIST("h/a", "w"), false, NULL, LIST("h"), &err), &err,
               CORDON_ERR_DENIED, "hidden path h holds h/a, which has another name, w,");
  expect_error(check_linked(2, LIST("w", "t"), false, NULL, LIST("t"), &err), &err,
               CORDON_ERR_DENIED,
               "hidden path t has another name, w, through which the sandbox "
               "could read it");
  /* A read-only name does not hide: a hidden file's other name may not be read-only. */
  expect_error(check_linked(2, LIST("r/a", "h/a"), false, LIST("r"), LIST("h"), &err), &err,
               CORDON_ERR_DENIED, "which has another name, r/a,");
  /* A read-only file's other names must be read-only (or, all of them, hidden), else it could
   * be written. */
  assert_int_equal(check_linked(2, LIST("r/a", "s/a"), false, LIST("r", "s"), NULL, &err), 0);
  expect_error(check_linked(2, LIST("r/a", "w"), false, LIST("r"), NULL, &err), &err,
               CORDON_ERR_DENIED,
               "read-only path r holds r/a, which has another name, w, through "
               "which the sandbox could write it");
  /* Names outside the workspace (a complete search did not find them): nothing there is
   * writable from the sandbox, so a read-only file may keep them, a hidden one may not. */
  struct confine_linked_file outside = {
      .nlink = 2, .names = LIST("r/a"), .searched = true, .complete = true};
  assert_int_equal(confine_check_linked_file(&outside, LIST("r"), NULL, &err), 0);
  expect_error(confine_check_linked_file(&outside, NULL, LIST("r"), &err), &err, CORDON_ERR_DENIED,
               "hidden path r holds r/a, which has 1 other name (hard links) outside the "
               "workspace: remove the links");
  outside.complete = false; /* the search stopped at its bound: the name may be inside */
  expect_error(confine_check_linked_file(&outside, LIST("r"), NULL, &err), &err, CORDON_ERR_DENIED,
               "read-only path r holds r/a, which has 1 other name (hard links) outside the "
               "workspace or beyond the bounded search");
  /* No protected name at all: not ours to judge. */
  assert_int_equal(check_linked(2, LIST("w", "v"), true, LIST("r"), LIST("h"), &err), 0);
}

/* A temporary workspace; paths ending in '/' are directories, "A=B" a hard link A to B. */
static char *make_tree(const char *const *entries) {
  char *dir = strdup("/tmp/cordon-test-links.XXXXXX");
  assert_non_null(mkdtemp(dir));
  char a[4200], b[4200];
  for (size_t i = 0; entries[i]; i++) {
    const char *eq = strchr(entries[i], '=');
    size_t n = strlen(entries[i]);
    if (eq) {
      snprintf(a, sizeof(a), "%s/%.*s", dir, (int)(eq - entries[i]), entries[i]);
      snprintf(b, sizeof(b), "%s/%s", dir, eq + 1);
      assert_int_equal(link(b, a), 0);
    } else if (entries[i][n - 1] == '/') {
      snprintf(a, sizeof(a), "%s/%s", dir, entries[i]);
      assert_int_equal(mkdir(a, 0755), 0);
    } else {
      snprintf(a, sizeof(a), "%s/%s", dir, entries[i]);
      int fd = open(a, O_WRONLY | O_CREAT | O_EXCL, 0644);
      assert_true(fd >= 0);
      close(fd);
    }
  }
  return dir;
}

static int check_tree(const char *dir, const char *const *ro, const char *const *hidden,
                      struct cordon_error **err) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  assert_true(fd >= 0);
  int r = confine_check_hard_links(fd, ro, hidden, err);
  close(fd);
  return r;
}

static void test_hard_link_walk(void **state) {
  (void)state;
  struct cordon_error *err = NULL;
  char *dir = make_tree(LIST("conf/", "conf/token", "h/", "h/d/", "h/d/s", "h/d/t=h/d/s", "other/",
                             "other/link=conf/token", "r/", "r/f", "w=r/f"));
  /* Links inside one hidden directory are fine; a hidden file linked elsewhere is not. */
  assert_int_equal(check_tree(dir, NULL, LIST("h"), &err), 0);
  expect_error(check_tree(dir, NULL, LIST("conf/token"), &err), &err, CORDON_ERR_DENIED,
               "hidden path conf/token has another name, other/link,");
  expect_error(check_tree(dir, NULL, LIST("conf"), &err), &err, CORDON_ERR_DENIED,
               "hidden path conf holds conf/token, which has another name, other/link,");
  assert_int_equal(check_tree(dir, NULL, LIST("conf", "other/link"), &err), 0);
  expect_error(check_tree(dir, LIST("r"), NULL, &err), &err, CORDON_ERR_DENIED,
               "read-only path r holds r/f, which has another name, w,");
  assert_int_equal(check_tree(dir, LIST("r", "w"), NULL, &err), 0);
  /* Hiding the other name does not do: the hidden w stays readable as r/f. */
  expect_error(check_tree(dir, LIST("r"), LIST("w"), &err), &err, CORDON_ERR_DENIED,
               "hidden path w has another name, r/f, through which the sandbox could read it");
  /* A name outside the workspace: refused, counted. */
  char inner[4200], outside[4200];
  snprintf(inner, sizeof(inner), "%s/h/d/s", dir);
  snprintf(outside, sizeof(outside), "%s.outside", dir);
  assert_int_equal(link(inner, outside), 0);
  expect_error(check_tree(dir, NULL, LIST("h"), &err), &err, CORDON_ERR_DENIED,
               "which has 1 other name (hard links) outside the workspace");
  /* A read-only one may keep it: nothing outside the workspace is writable from the sandbox. */
  assert_int_equal(check_tree(dir, LIST("h"), NULL, &err), 0);
  unlink(outside);
  /* A missing protected path is an error, not a pass. */
  assert_true(check_tree(dir, NULL, LIST("gone"), &err) < 0);
  cordon_error_free(err);
  err = NULL;
  assert_int_equal(fs_remove_tree(dir, NULL), 0);
  free(dir);
}

static void test_hidden_beneath(void **state) {
  struct cordon_error *err = NULL;
  char **out = NULL;
  /* Strictly beneath only; "/a/bc" is not beneath "/a/b"; the root itself is not listed. */
  assert_int_equal(
      confine_hidden_beneath(LIST("/w/p/.cordon", "/w", "/wx/.cordon", "/k", "/w/deep/er/.cordon"),
                             "/w", &out, &err),
      0);
  assert_int_equal(strv_length((const char *const *)out), 2);
  assert_string_equal(out[0], "p/.cordon");
  assert_string_equal(out[1], "deep/er/.cordon");
  /* Nested entries: the outer one stays, in either order, and a repeat is not added. */
  assert_int_equal(confine_hidden_beneath(LIST("/w/deep/er/.cordon/sub", "/w/deep", "/w/p/.cordon"),
                                          "/w", &out, &err),
                   0);
  assert_int_equal(strv_length((const char *const *)out), 2);
  assert_string_equal(out[0], "p/.cordon");
  assert_string_equal(out[1], "deep");
  strv_free(out);
  out = NULL;
  /* A grant of "/" (refused elsewhere) still computes relative paths. */
  assert_int_equal(confine_hidden_beneath(LIST("/k/keys"), "/", &out, &err), 0);
  assert_string_equal(out[0], "k/keys");
  strv_free(out);
  out = NULL;
  assert_int_equal(confine_hidden_beneath(NULL, "/w", &out, &err), 0);
  assert_null(out);
}

static void test_not_private(void **state) {
  struct cordon_error *err = NULL;
  const char *const *set = LIST("/home/u/.local/state/cordon", "/srv/p/.cordon");
  assert_int_equal(confine_check_not_private("/home/u/work", "workspace", set, &err), 0);
  assert_int_equal(confine_check_not_private("/srv/p", "workspace", set, &err), 0);
  assert_int_equal(confine_check_not_private("/srv/p/.cordonx/a", "workspace", set, &err), 0);
  expect_error(confine_check_not_private("/srv/p/.cordon/sessions/x", "workspace", set, &err), &err,
               CORDON_ERR_DENIED, "workspace /srv/p/.cordon/sessions/x is or lies inside");
  expect_error(
      confine_check_not_private("/home/u/.local/state/cordon", "read-only grant", set, &err), &err,
      CORDON_ERR_DENIED, "state directory /home/u/.local/state/cordon");
  /* Any directory named .cordon, registered or not, names the part that is one. */
  expect_error(confine_check_not_private("/a/.cordon/b", "workspace", NULL, &err), &err,
               CORDON_ERR_DENIED, "state directory /a/.cordon:");
  expect_error(confine_check_not_private("/a/.cordon", "workspace", NULL, &err), &err,
               CORDON_ERR_DENIED, "inside cordon's state directory /a/.cordon:");
}

static bool has(char **set, const char *path) {
  for (size_t i = 0; set && set[i]; i++)
    if (strcmp(set[i], path) == 0)
      return true;
  return false;
}

/* The set, end to end: fixed members from the environment, registered projects (canonical,
 * once each), gone ones ignored and pruned, a .cordon/ at the top of a tree added. */
static void test_private_set(void **state) {
  char tmpl[] = "/tmp/cordon-test-private.XXXXXX";
  assert_non_null(mkdtemp(tmpl));
  char base[4096], p[4200], q[4200], keys[4200], a[4200], b[4200];
  assert_non_null(realpath(tmpl, base));
  snprintf(p, sizeof(p), "%s/state", base);
  setenv("XDG_STATE_HOME", p, 1);
  snprintf(keys, sizeof(keys), "%s/keys", base);
  setenv("CORDON_KEY_DIR", keys, 1);
  snprintf(p, sizeof(p), "%s/run", base);
  setenv("CORDON_RUNTIME_DIR", p, 1); /* missing: left out */
  assert_int_equal(mkdir(keys, 0700), 0);
  snprintf(a, sizeof(a), "%s/a/.cordon", base);
  snprintf(b, sizeof(b), "%s/b/.cordon", base);
  struct cordon_error *err = NULL;
  assert_int_equal(fs_mkdir_p(a, 0700, &err), 0);
  assert_int_equal(fs_mkdir_p(b, 0700, &err), 0);
  assert_int_equal(confine_projects_register(a, &err), 0);
  assert_int_equal(confine_projects_register(a, &err), 0); /* once */
  /* Registered through a symlink: the real path is what counts. */
  snprintf(p, sizeof(p), "%s/link", base);
  snprintf(q, sizeof(q), "%s/b", base);
  assert_int_equal(symlink(q, p), 0);
  snprintf(q, sizeof(q), "%s/link/.cordon", base);
  assert_int_equal(confine_projects_register(q, &err), 0);
  snprintf(p, sizeof(p), "%s/state/cordon/projects", base);
  struct stat st;
  assert_int_equal(stat(p, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0700);

  char **set = NULL;
  assert_int_equal(confine_private_set(NULL, &set, &err), 0);
  snprintf(p, sizeof(p), "%s/state/cordon", base);
  assert_true(has(set, keys));
  assert_true(has(set, p));
  assert_true(has(set, a));
  assert_true(has(set, b));
  assert_int_equal(strv_length((const char *const *)set), 4);
  /* Beneath a tree: the members present there by that name, and a .cordon/ at its top when
   * asked (not a symlink named .cordon). */
  char **rel = NULL;
  assert_int_equal(confine_private_beneath((const char *const *)set, base, true, &rel, &err), 0);
  assert_int_equal(strv_length((const char *const *)rel), 4); /* keys, state, a, b */
  assert_true(has(rel, "a/.cordon"));
  strv_free(rel);
  rel = NULL;
  snprintf(p, sizeof(p), "%s/c/.cordon", base);
  assert_int_equal(fs_mkdir_p(p, 0700, &err), 0);
  snprintf(q, sizeof(q), "%s/c", base);
  snprintf(p, sizeof(p), "%s/d", base);
  assert_int_equal(mkdir(p, 0700), 0);
  snprintf(p, sizeof(p), "%s/d/.cordon", base);
  assert_int_equal(symlink(q, p), 0);
  assert_int_equal(confine_private_beneath((const char *const *)set, q, true, &rel, &err), 0);
  assert_true(has(rel, ".cordon"));
  assert_int_equal(strv_length((const char *const *)rel), 1);
  strv_free(rel);
  rel = NULL;
  snprintf(p, sizeof(p), "%s/d", base);
  assert_int_equal(confine_private_beneath((const char *const *)set, p, true, &rel, &err), 0);
  assert_null(rel);
  strv_free(set);

  /* A project deleted: still in the set (unchecked), but nothing beneath a tree; then pruned.
   * Garbage in the registry is ignored. */
  snprintf(p, sizeof(p), "%s/b", base);
  assert_int_equal(fs_remove_tree(p, &err), 0);
  snprintf(p, sizeof(p), "%s/state/cordon/projects/not-a-digest", base);
  assert_int_equal(fs_write_atomic(p, "/etc\n", 5, 0600, &err), 0);
  set = NULL;
  assert_int_equal(confine_private_set(a, &set, &err), 0);
  assert_false(has(set, "/etc"));
  assert_int_equal(strv_length((const char *const *)set), 5); /* a as own and registered, b */
  assert_int_equal(confine_private_beneath((const char *const *)set, base, false, &rel, &err), 0);
  assert_int_equal(strv_length((const char *const *)rel), 3);
  assert_false(has(rel, "b/.cordon"));
  strv_free(rel);
  strv_free(set);
  size_t removed = 0;
  assert_int_equal(confine_projects_prune(&removed, &err), 0);
  assert_int_equal(removed, 2);
  assert_int_equal(confine_projects_prune(&removed, &err), 0);
  assert_int_equal(removed, 0);

  unsetenv("XDG_STATE_HOME");
  unsetenv("CORDON_KEY_DIR");
  unsetenv("CORDON_RUNTIME_DIR");
  assert_int_equal(fs_remove_tree(base, &err), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_workspace_path_normalisation),
      cmocka_unit_test(test_workspace_path_refusals),
      cmocka_unit_test(test_names_workspace_root),
      cmocka_unit_test(test_cpus_visible),
      cmocka_unit_test(test_host_path_normalisation),
      cmocka_unit_test(test_covers),
      cmocka_unit_test(test_workspace_overlaps),
      cmocka_unit_test(test_no_reshown),
      cmocka_unit_test(test_reshown),
      cmocka_unit_test(test_private_reshown),
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
      cmocka_unit_test(test_protected_ancestors),
      cmocka_unit_test(test_protection_of),
      cmocka_unit_test(test_linked_file),
      cmocka_unit_test(test_hard_link_walk),
      cmocka_unit_test(test_hidden_beneath),
      cmocka_unit_test(test_not_private),
      cmocka_unit_test(test_private_set),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
