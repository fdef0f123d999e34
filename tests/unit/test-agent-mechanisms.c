/* Unit tests of the agent mechanisms built apart from the CLI (issue 18, item 3): landlock's
 * pure decisions (rights per ABI, grants, refused projects, unenforced lines), gvisor's OCI
 * spec, the seatbelt profile's content and quoting; then, where the host allows, landlock and
 * gvisor confining a shell from inside on a scratch project (under AGENT_TEST_ROOT, the build
 * directory, or /var/tmp when that lies under /tmp: landlock refuses a project under /tmp).
 * Policies are built by hand here. */
#include <errno.h>
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

#include "agent/gvisor.h"
#include "agent/landlock.h"
#include "agent/mechanism.h"
#include "base/fs.h"
#include "base/strv.h"

#define LIST(...) ((char *[]){__VA_ARGS__, NULL})

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

static void assert_contains(const char *text, const char *fragment) {
  if (!strstr(text, fragment))
    fail_msg("missing \"%s\" in:\n%s", fragment, text);
}

/* A policy on static storage: nothing to free. */
static char *policy_read_only[] = {"ro", NULL};
static char *policy_hidden_dirs[] = {".cordon", NULL};
static char *policy_hidden_files[] = {".env", NULL};
static char *policy_allow_ro[] = {"/srv/data", NULL};
static char *policy_allow_rw[] = {"/var/cache/agent", NULL};
static char *policy_env[] = {"PATH=/usr/bin:/bin", "HOME=/home/me", NULL};

static struct agent_policy static_policy(char *project) {
  return (struct agent_policy){
      .project = project,
      .cwd = project,
      .read_only = policy_read_only,
      .hidden_dirs = policy_hidden_dirs,
      .hidden_files = policy_hidden_files,
      .agent_visible = ".cordon/agent-visible",
      .allow_ro = policy_allow_ro,
      .allow_rw = policy_allow_rw,
      .env = policy_env,
      .net = "none",
      .tmp_bytes = 1 << 20,
  };
}

/* ---- landlock, pure ---- */

static void test_landlock_handled_by_abi(void **state) {
  (void)state;
  struct agent_landlock_handled h;
  agent_landlock_handled_for(1, "none", &h);
  assert_int_equal(h.fs, (1ULL << 13) - 1);
  assert_int_equal(h.net, 0);
  assert_int_equal(h.scoped, 0);
  agent_landlock_handled_for(4, "none", &h);
  assert_int_equal(h.fs, (1ULL << 15) - 1);
  assert_int_equal(h.net, AGENT_LL_NET_BIND_TCP | AGENT_LL_NET_CONNECT_TCP);
  agent_landlock_handled_for(7, "open", &h);
  assert_int_equal(h.fs, (1ULL << 16) - 1);
  assert_int_equal(h.net, 0); /* open network: TCP not handled at all */
  assert_int_equal(h.scoped, AGENT_LL_SCOPE_ABSTRACT_UNIX_SOCKET | AGENT_LL_SCOPE_SIGNAL);
}

static const struct agent_landlock_grant *find_grant(const struct agent_landlock_grant *g, size_t n,
                                                     const char *path) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(g[i].path, path))
      return &g[i];
  fail_msg("no grant for %s", path);
  return NULL;
}

static void test_landlock_grants(void **state) {
  (void)state;
  struct agent_policy p = static_policy("/home/me/proj");
  struct agent_landlock_grant *g = NULL;
  size_t n = 0;
  struct cordon_error *err = NULL;
  assert_int_equal(agent_landlock_grants(&p, "/tmp/cordon-agent-x", 3, &g, &n, &err), 0);
  uint64_t all = (1ULL << 15) - 1,
           read_exec = AGENT_LL_EXECUTE | AGENT_LL_READ_FILE | AGENT_LL_READ_DIR;
  assert_int_equal(find_grant(g, n, "/home/me/proj")->access, all);
  assert_false(find_grant(g, n, "/home/me/proj")->optional);
  assert_int_equal(find_grant(g, n, "/var/cache/agent")->access, all);
  assert_int_equal(find_grant(g, n, "/tmp/cordon-agent-x")->access, all);
  assert_int_equal(find_grant(g, n, "/srv/data")->access, read_exec);
  assert_int_equal(find_grant(g, n, "/usr")->access, read_exec);
  assert_true(find_grant(g, n, "/usr")->optional);
  /* No device ioctls below ABI 5; never write rights on a system tree or the home. */
  assert_int_equal(find_grant(g, n, "/dev/null")->access, AGENT_LL_READ_FILE | AGENT_LL_WRITE_FILE);
  for (size_t i = 0; i < n; i++) {
    assert_true(strcmp(g[i].path, "/") != 0);
    assert_true(strcmp(g[i].path, "/home/me") != 0);
    assert_true(strcmp(g[i].path, "/tmp") != 0);
    if (!strcmp(g[i].path, "/etc") || !strcmp(g[i].path, "/proc"))
      assert_int_equal(g[i].access & AGENT_LL_WRITE_FILE, 0);
  }
  free(g);
}

static void test_landlock_refused_projects(void **state) {
  (void)state;
  struct cordon_error *err = NULL;
  struct agent_policy p = static_policy("/tmp/proj");
  expect_error(agent_landlock_check_project(&p, "/tmp", &err), &err, CORDON_ERR_DENIED,
               "lies under /tmp");
  p.project = "/tmp";
  expect_error(agent_landlock_check_project(&p, "/tmp", &err), &err, CORDON_ERR_DENIED, "/tmp");
  p.project = "/var/cache/agent/proj";
  expect_error(agent_landlock_check_project(&p, "/tmp", &err), &err, CORDON_ERR_DENIED,
               "writable grant /var/cache/agent");
  p.project = "/";
  expect_error(agent_landlock_check_project(&p, "/tmp", &err), &err, CORDON_ERR_DENIED, NULL);
  p.project = "/opt";
  expect_error(agent_landlock_check_project(&p, "/tmp", &err), &err, CORDON_ERR_DENIED,
               "contains the system tree /opt");
  p.project = "/usr/src/proj"; /* its own rights add to /usr's read-only ones */
  assert_int_equal(agent_landlock_check_project(&p, "/tmp", &err), 0);
  p.project = "/home/me/proj";
  assert_int_equal(agent_landlock_check_project(&p, "/tmp", &err), 0);
  p.project = "/tmpfoo/proj"; /* a sibling name, not beneath /tmp */
  assert_int_equal(agent_landlock_check_project(&p, "/tmp", &err), 0);
}

static void test_landlock_unenforced_lines(void **state) {
  (void)state;
  struct agent_policy p = static_policy("/home/me/proj");
  char **lines = NULL;
  struct cordon_error *err = NULL;
  assert_int_equal(agent_landlock_unenforced_lines(&p, 7, &lines, &err), 0);
  assert_string_equal(lines[0], "hidden path .cordon/ is NOT enforced under landlock");
  assert_string_equal(lines[1], "hidden path .env is NOT enforced under landlock");
  assert_string_equal(lines[2], "read-only path ro is NOT enforced under landlock");
  assert_string_equal(lines[3],
                      "read-only path .cordon/agent-visible is NOT enforced under landlock");
  assert_contains(lines[4], "size cap (1048576 bytes) is NOT enforced under landlock");
  assert_contains(lines[5], "network 'none' is only partly enforced under landlock: every socket "
                            "but AF_UNIX is refused");
  assert_contains(lines[6], "unix sockets by path");
  assert_null(lines[7]);
  strv_free(lines);
  p.net = "open";
  p.read_only = NULL;
  p.hidden_files = NULL;
  assert_int_equal(agent_landlock_unenforced_lines(&p, 3, &lines, &err), 0);
  assert_int_equal(strv_length((const char *const *)lines), 4); /* no network line but unix */
  strv_free(lines);
  p.net = "loopback";
  assert_int_equal(agent_landlock_unenforced_lines(&p, 3, &lines, &err), 0);
  assert_contains(lines[3], "network 'loopback' is only partly enforced under landlock");
  assert_contains(lines[4], "(kernel ABI 3)");
  strv_free(lines);
}

/* ---- gvisor's spec, pure ---- */

static json_t *mount_at(json_t *spec, const char *destination) {
  json_t *mounts = json_object_get(spec, "mounts"), *m;
  size_t i;
  json_array_foreach(mounts, i, m) if (!strcmp(json_string_value(json_object_get(m, "destination")),
                                               destination)) return m;
  fail_msg("no mount at %s", destination);
  return NULL;
}

static size_t mount_index(json_t *spec, const char *destination) {
  json_t *mounts = json_object_get(spec, "mounts"), *m;
  size_t i;
  json_array_foreach(mounts, i, m) if (!strcmp(json_string_value(json_object_get(m, "destination")),
                                               destination)) return i;
  fail_msg("no mount at %s", destination);
  return 0;
}

static bool has_option(json_t *mount, const char *option) {
  json_t *o;
  size_t i;
  json_array_foreach(json_object_get(mount, "options"), i,
                     o) if (!strcmp(json_string_value(o), option)) return true;
  return false;
}

static void test_gvisor_spec(void **state) {
  (void)state;
  struct agent_policy p = static_policy("/home/me/proj");
  p.cwd = "/home/me/proj/src";
  const char *argv[] = {"claude", "--print", NULL};
  struct agent_launch launch = {.policy = &p, .argv = argv, .tty = false};
  char *masks[] = {"/home", NULL};
  struct agent_gvisor_params params = {1000, 1001, "/bundle/empty", masks};
  json_t *spec = NULL;
  struct cordon_error *err = NULL;
  assert_int_equal(agent_gvisor_spec(&launch, &params, &spec, &err), 0);

  json_t *process = json_object_get(spec, "process");
  assert_string_equal(json_string_value(json_object_get(process, "cwd")), "/home/me/proj/src");
  assert_string_equal(json_string_value(json_array_get(json_object_get(process, "args"), 1)),
                      "--print");
  assert_int_equal(json_integer_value(json_object_get(json_object_get(process, "user"), "uid")),
                   1000);
  assert_true(json_is_true(json_object_get(process, "noNewPrivileges")));
  assert_int_equal(
      json_array_size(json_object_get(json_object_get(process, "capabilities"), "effective")), 0);
  char *env = json_dumps(json_object_get(process, "env"), 0);
  assert_contains(env, "\"TMPDIR=/tmp\"");
  assert_contains(env, "\"TEMP=/tmp\"");
  assert_contains(env, "\"HOME=/home/me\"");
  free(env);
  assert_true(json_is_true(json_object_get(json_object_get(spec, "root"), "readonly")));

  json_t *m = mount_at(spec, "/home/me/proj");
  assert_string_equal(json_string_value(json_object_get(m, "source")), "/home/me/proj");
  assert_true(has_option(m, "rw"));
  assert_true(has_option(mount_at(spec, "/home/me/proj/ro"), "ro"));
  m = mount_at(spec, "/home/me/proj/.cordon");
  assert_string_equal(json_string_value(json_object_get(m, "type")), "tmpfs");
  assert_true(has_option(m, "mode=111")); /* searchable only: agent-visible is mounted in it */
  m = mount_at(spec, "/home/me/proj/.env");
  assert_string_equal(json_string_value(json_object_get(m, "source")), "/bundle/empty");
  assert_true(has_option(m, "ro"));
  assert_true(has_option(mount_at(spec, "/home/me/proj/.cordon/agent-visible"), "ro"));
  assert_true(has_option(mount_at(spec, "/srv/data"), "ro"));
  assert_true(has_option(mount_at(spec, "/var/cache/agent"), "rw"));
  assert_true(has_option(mount_at(spec, "/tmp"), "size=1048576"));
  assert_string_equal(json_string_value(json_object_get(mount_at(spec, "/home"), "type")), "tmpfs");
  /* Stacking order: masks first, the project before what is carved out of it, agent-visible
   * last. */
  assert_true(mount_index(spec, "/home") < mount_index(spec, "/home/me/proj"));
  assert_true(mount_index(spec, "/home/me/proj") < mount_index(spec, "/home/me/proj/ro"));
  assert_true(mount_index(spec, "/home/me/proj/.cordon") <
              mount_index(spec, "/home/me/proj/.cordon/agent-visible"));
  char *ns = json_dumps(json_object_get(json_object_get(spec, "linux"), "namespaces"), 0);
  assert_contains(ns, "\"network\"");
  free(ns);
  json_decref(spec);
  assert_string_equal(agent_gvisor_network("none"), "none");
  assert_string_equal(agent_gvisor_network("loopback"), "none");

  p.net = "open";
  p.agent_visible = NULL;
  assert_int_equal(agent_gvisor_spec(&launch, &params, &spec, &err), 0);
  assert_true(has_option(mount_at(spec, "/home/me/proj/.cordon"), "mode=000"));
  ns = json_dumps(json_object_get(json_object_get(spec, "linux"), "namespaces"), 0);
  assert_null(strstr(ns, "network"));
  free(ns);
  json_decref(spec);
  assert_string_equal(agent_gvisor_network("open"), "host");
}

static void test_gvisor_mask_candidates(void **state) {
  (void)state;
  struct agent_policy p = static_policy("/work/me/proj");
  char *ro[] = {"/usr/share/dict", "/data/sets", "/", NULL};
  p.allow_ro = ro;
  char **masks = NULL;
  struct cordon_error *err = NULL;
  assert_int_equal(agent_gvisor_mask_candidates(&p, &masks, &err), 0);
  const char *want[] = {
      "/home",  "/root",    "/run",  "/srv",  "/mnt",
      "/media", "/var/tmp", "/work", "/data", NULL}; /* /var/cache/agent: /var is a system tree */
  for (size_t i = 0; want[i]; i++) {
    assert_non_null(masks[i]);
    assert_string_equal(masks[i], want[i]);
  }
  assert_null(masks[9]);
  strv_free(masks);
  p.project = "/home/me/proj"; /* already listed: no duplicate */
  p.allow_ro = NULL;
  assert_int_equal(agent_gvisor_mask_candidates(&p, &masks, &err), 0);
  assert_int_equal(strv_length((const char *const *)masks), 7);
  strv_free(masks);
}

/* ---- seatbelt, pure ---- */

static void test_seatbelt_profile(void **state) {
  (void)state;
  struct agent_policy p = static_policy("/Users/me/proj");
  char *profile = NULL;
  struct cordon_error *err = NULL;
  assert_int_equal(agent_seatbelt_profile(&p, &profile, &err), 0);
  assert_true(strncmp(profile, "(version 1)\n", 12) == 0);
  assert_contains(profile, "(allow default)");
  assert_contains(profile, "(deny file-write*)\n(allow file-write*\n  (subpath \"/Users/me/proj\")"
                           "\n  (subpath \"/var/cache/agent\")");
  assert_contains(profile, "(deny file-read*\n  (subpath \"/Users\")\n  (subpath \"/Users/me\"))");
  assert_contains(profile, "(allow file-read-metadata\n  (literal \"/Users\")\n  (literal "
                           "\"/Users/me\"))");
  assert_contains(profile, "(allow file-read*\n  (subpath \"/Users/me/proj\")\n  (subpath "
                           "\"/srv/data\")");
  assert_contains(profile, "(deny file-read* file-write*\n  (subpath \"/Users/me/proj/.cordon\")\n"
                           "  (literal \"/Users/me/proj/.env\"))");
  assert_contains(profile, "(deny file-write*\n  (subpath \"/Users/me/proj/ro\"))");
  assert_contains(profile,
                  "(allow file-read*\n  (subpath \"/Users/me/proj/.cordon/agent-visible\"))");
  assert_contains(profile, "(deny network*)");
  assert_null(strstr(profile, "localhost"));
  /* The hidden paths' deny comes after the project's allow: SBPL's later rule wins. */
  assert_true(strstr(profile, "(deny file-read* file-write*") >
              strstr(profile, "(allow file-read*"));
  free(profile);

  p.net = "loopback";
  assert_int_equal(agent_seatbelt_profile(&p, &profile, &err), 0);
  assert_contains(profile, "(allow network* (remote ip \"localhost:*\"))");
  free(profile);
  p.net = "open";
  assert_int_equal(agent_seatbelt_profile(&p, &profile, &err), 0);
  assert_null(strstr(profile, "network"));
  free(profile);
}

static void test_seatbelt_quoting(void **state) {
  (void)state;
  struct agent_policy p = static_policy("/Users/me/a \"quoted\" \\dir");
  p.hidden_files = LIST("x\"y");
  char *profile = NULL;
  struct cordon_error *err = NULL;
  assert_int_equal(agent_seatbelt_profile(&p, &profile, &err), 0);
  assert_contains(profile, "(subpath \"/Users/me/a \\\"quoted\\\" \\\\dir\")");
  assert_contains(profile, "(literal \"/Users/me/a \\\"quoted\\\" \\\\dir/x\\\"y\")");
  free(profile);
  p.hidden_files = LIST("new\nline");
  expect_error(agent_seatbelt_profile(&p, &profile, &err), &err, CORDON_ERR_INVALID,
               "control character");
  p = static_policy("relative/proj");
  expect_error(agent_seatbelt_profile(&p, &profile, &err), &err, CORDON_ERR_INVALID, "absolute");
}

/* ---- landlock and gvisor, from inside ---- */

struct scratch {
  char *root;    /* the scratch directory, removed afterwards */
  char *project; /* root/proj */
  char *outside; /* root/outside: neither granted nor the project */
  char *env_p, *env_out;
};

static void write_file(const char *dir, const char *name, const char *text) {
  char *path = NULL;
  assert_true(asprintf(&path, "%s/%s", dir, name) > 0);
  struct cordon_error *err = NULL;
  if (fs_write_atomic(path, text, strlen(text), 0644, &err) < 0)
    fail_msg("%s", err->message);
  free(path);
}

static void make_dir(const char *dir, const char *name) {
  char *path = NULL;
  assert_true(asprintf(&path, "%s/%s", dir, name) > 0);
  assert_int_equal(mkdir(path, 0755), 0);
  free(path);
}

/* 0 with the scratch made, -1 when AGENT_TEST_ROOT is unset (the test skips). */
static int scratch_make(struct scratch *s) {
  const char *base = getenv("AGENT_TEST_ROOT");
  if (!base || base[0] != '/')
    return -1;
  /* A build directory under /tmp (a clone there): landlock refuses a project beneath /tmp. */
  if (!strcmp(base, "/tmp") || !strncmp(base, "/tmp/", 5))
    base = "/var/tmp";
  assert_true(asprintf(&s->root, "%s/agent-test-XXXXXX", base) > 0);
  assert_non_null(mkdtemp(s->root));
  assert_true(asprintf(&s->project, "%s/proj", s->root) > 0);
  assert_true(asprintf(&s->outside, "%s/outside", s->root) > 0);
  make_dir(s->root, "proj");
  make_dir(s->root, "outside");
  make_dir(s->project, ".cordon");
  make_dir(s->project, ".cordon/agent-visible");
  make_dir(s->project, "ro");
  write_file(s->project, ".cordon/secret", "state\n");
  write_file(s->project, ".cordon/agent-visible/doc", "for the agent\n");
  write_file(s->project, ".env", "TOKEN=1\n");
  write_file(s->project, "ro/file", "frozen\n");
  write_file(s->outside, "secret", "outside\n");
  assert_true(asprintf(&s->env_p, "P=%s", s->project) > 0);
  assert_true(asprintf(&s->env_out, "OUT=%s", s->outside) > 0);
  return 0;
}

static void scratch_free(struct scratch *s) {
  struct cordon_error *err = NULL;
  if (s->root && fs_remove_tree(s->root, &err) < 0)
    cordon_error_free(err);
  free(s->root);
  free(s->project);
  free(s->outside);
  free(s->env_p);
  free(s->env_out);
}

static struct agent_policy scratch_policy(struct scratch *s, char **env) {
  struct agent_policy p = static_policy(s->project);
  p.allow_ro = NULL;
  p.allow_rw = NULL;
  p.env = env;
  return p;
}

/* Every check a mechanism must pass, one exit code each so a failure names itself. */
#define COMMON_CHECKS                                                      \
  "[ \"$(pwd)\" = \"$P\" ] || exit 20; "                                   \
  "echo made > written.txt || exit 21; "                                   \
  "[ -n \"$TMPDIR\" ] && echo t > \"$TMPDIR/t\" || exit 22; "              \
  "[ \"$TMP\" = \"$TMPDIR\" ] && [ \"$TEMP\" = \"$TMPDIR\" ] || exit 23; " \
  "touch \"$OUT/planted\" 2>/dev/null && exit 24; "

static int run_script(const struct agent_mechanism *m, struct agent_policy *p, const char *script) {
  const char *argv[] = {"/bin/sh", "-c", script, NULL};
  struct agent_launch launch = {.policy = p, .argv = argv};
  int code = -1;
  struct cordon_error *err = NULL;
  if (m->run(&launch, &code, &err) < 0)
    fail_msg("%s: %s", m->name, err->message);
  return code;
}

static void assert_written(struct scratch *s) {
  char *path = NULL;
  assert_true(asprintf(&path, "%s/written.txt", s->project) > 0);
  assert_int_equal(access(path, F_OK), 0); /* landed in the project on the host */
  free(path);
  assert_true(asprintf(&path, "%s/planted", s->outside) > 0);
  assert_int_equal(access(path, F_OK), -1);
  free(path);
}

static void test_landlock_from_inside(void **state) {
  (void)state;
  struct cordon_error *err = NULL;
  if (agent_mechanism_landlock.preflight(NULL, &err) < 0) {
    printf("# skip: %s\n", err->message);
    cordon_error_free(err);
    skip();
  }
  struct scratch s = {0};
  if (scratch_make(&s) < 0)
    skip();
  char *env[] = {"PATH=/usr/bin:/bin", s.env_p, s.env_out, NULL};
  struct agent_policy p = scratch_policy(&s, env);
  int code = run_script(&agent_mechanism_landlock, &p,
                        COMMON_CHECKS
                        "cat \"$OUT/secret\" 2>/dev/null && exit 25; "
                        "ls \"$OUT\" >/dev/null 2>&1 && exit 26; "
                        "touch /tmp/cordon-landlock-planted 2>/dev/null && exit 27; "
                        "cat /etc/passwd >/dev/null || exit 28; "
                        "if command -v perl >/dev/null; then "
                        "  perl -MSocket -e 'socket(my $s, AF_INET, SOCK_DGRAM, 0) or exit 1' "
                        "    && exit 29; "
                        "  perl -MSocket -e 'socket(my $s, AF_UNIX, SOCK_STREAM, 0) or exit 1' "
                        "    || exit 30; "
                        "fi; "
                        "exit 0");
  assert_int_equal(code, 0);
  assert_written(&s);
  assert_int_equal(access("/tmp/cordon-landlock-planted", F_OK), -1);
  /* The agent's own exit code, and 128+signal. */
  assert_int_equal(run_script(&agent_mechanism_landlock, &p, "exit 7"), 7);
  assert_int_equal(run_script(&agent_mechanism_landlock, &p, "kill -TERM $$"), 128 + 15);
  scratch_free(&s);
}

static void test_landlock_refuses_project_under_tmp(void **state) {
  (void)state;
  struct cordon_error *err = NULL;
  if (agent_mechanism_landlock.preflight(NULL, &err) < 0) {
    cordon_error_free(err);
    skip();
  }
  char dir[] = "/tmp/cordon-agent-proj-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char *env[] = {"PATH=/usr/bin:/bin", NULL};
  struct agent_policy p = static_policy(dir);
  p.env = env;
  const char *argv[] = {"/bin/sh", "-c", "touch ran", NULL};
  struct agent_launch launch = {.policy = &p, .argv = argv};
  int code = -1;
  expect_error(agent_mechanism_landlock.preflight(&p, &err), &err, CORDON_ERR_DENIED,
               "lies under /tmp");
  expect_error(agent_mechanism_landlock.run(&launch, &code, &err), &err, CORDON_ERR_DENIED,
               "lies under /tmp");
  assert_int_equal(code, -1);
  char ran[sizeof(dir) + 8];
  snprintf(ran, sizeof(ran), "%s/ran", dir);
  assert_int_equal(access(ran, F_OK), -1); /* never launched */
  rmdir(dir);
}

static void test_gvisor_from_inside(void **state) {
  (void)state;
  struct cordon_error *err = NULL;
  if (agent_mechanism_gvisor.preflight(NULL, &err) < 0) {
    printf("# skip: %s\n", err->message);
    cordon_error_free(err);
    skip();
  }
  struct scratch s = {0};
  if (scratch_make(&s) < 0)
    skip();
  char *env[] = {"PATH=/usr/bin:/bin", s.env_p, s.env_out, NULL};
  struct agent_policy p = scratch_policy(&s, env);
  int code =
      run_script(&agent_mechanism_gvisor, &p,
                 COMMON_CHECKS "cat .env 2>/dev/null && exit 30; "
                               "cat .cordon/secret 2>/dev/null && exit 31; "
                               "ls .cordon/ 2>/dev/null | grep -q secret && exit 32; "
                               "{ echo x > ro/file; } 2>/dev/null && exit 33; "
                               "{ echo x > ro/new; } 2>/dev/null && exit 34; "
                               "grep -q 'for the agent' .cordon/agent-visible/doc || exit 35; "
                               "{ echo x > .cordon/agent-visible/doc; } 2>/dev/null && exit 36; "
                               "{ echo x > .env; } 2>/dev/null && exit 37; "
                               "cat \"$OUT/secret\" 2>/dev/null && exit 38; "
                               "exit 0");
  assert_int_equal(code, 0);
  assert_written(&s);
  assert_int_equal(run_script(&agent_mechanism_gvisor, &p, "exit 9"), 9);
  char **lines = NULL;
  assert_int_equal(agent_mechanism_gvisor.unenforced(&p, &lines, &err), 0);
  assert_null(lines[0]);
  strv_free(lines);
  scratch_free(&s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_landlock_handled_by_abi),
      cmocka_unit_test(test_landlock_grants),
      cmocka_unit_test(test_landlock_refused_projects),
      cmocka_unit_test(test_landlock_unenforced_lines),
      cmocka_unit_test(test_gvisor_spec),
      cmocka_unit_test(test_gvisor_mask_candidates),
      cmocka_unit_test(test_seatbelt_profile),
      cmocka_unit_test(test_seatbelt_quoting),
      cmocka_unit_test(test_landlock_from_inside),
      cmocka_unit_test(test_landlock_refuses_project_under_tmp),
      cmocka_unit_test(test_gvisor_from_inside),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
