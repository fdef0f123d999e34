/* Tests of the ns backend through the public session API, beyond the conformance suite: the
 * path policy (read-only, hidden, .cordon/, grants, refusals), identity, egress classes,
 * sessions re-opened from another handle, a dead holder, limits. Skips (with the reason) where
 * the host cannot run the backend at all. The attack-by-attack checks live in tests/escape. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include <cordon/cas.h>
#include <cordon/session.h>
#include <cordon/snapshot.h>

#include "backends/builtin.h"
#include "base/fs.h"

#define ARGV(...) ((const char *const[]){__VA_ARGS__, NULL})
#define LIST(...) ((const char *const[]){__VA_ARGS__, NULL})

static char project[256];
static struct cordon_context *ctx;
static const struct cordon_backend *ns = &cordon_backend_ns;

static void write_host(const char *rel, const char *content) {
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", project, rel);
  char *slash = strrchr(path, '/');
  *slash = 0;
  struct cordon_error *err = NULL;
  assert_int_equal(fs_mkdir_p(path, 0755, &err), 0);
  *slash = '/';
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(content, f);
  fclose(f);
}

static char *read_host(const char *rel) {
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", project, rel);
  unsigned char *data = NULL;
  size_t len = 0;
  if (fs_read_file(path, 1 << 20, &data, &len, NULL) < 0)
    return NULL;
  return (char *)data;
}

static struct cordon_session *create(struct cordon_manifest *m) {
  struct cordon_session *s = NULL;
  struct cordon_error *err = NULL;
  if (cordon_session_create(ctx, ns, m, &s, &err) < 0)
    fail_msg("create: %s", err->message);
  return s;
}

static struct cordon_error *create_fails(struct cordon_manifest *m) {
  struct cordon_session *s = NULL;
  struct cordon_error *err = NULL;
  if (cordon_session_create(ctx, ns, m, &s, &err) == 0) {
    cordon_session_destroy(s, NULL);
    fail_msg("create succeeded, expected a refusal");
  }
  assert_non_null(err);
  return err;
}

/* Run `sh -c script`; returns the exit code, stdout in *out (malloc'd) when out != NULL. */
static int sh(struct cordon_session *s, const char *script, char **out) {
  struct cordon_exec_request req = {.argv = ARGV("sh", "-c", script), .timeout = 30};
  struct cordon_exec_result res;
  struct cordon_error *err = NULL;
  if (cordon_session_exec(s, &req, &res, &err) < 0)
    fail_msg("exec %s: %s", script, err->message);
  int code = res.exit_code;
  if (out)
    *out = strdup((char *)res.stdout_data);
  cordon_exec_result_clear(&res);
  return code;
}

static void expect_stdout(struct cordon_session *s, const char *script, const char *want) {
  char *out = NULL;
  int code = sh(s, script, &out);
  if (code != 0 || strcmp(out, want) != 0)
    fail_msg("%s: exit %d, stdout \"%s\", expected \"%s\"", script, code, out, want);
  free(out);
}

static struct cordon_manifest project_manifest(void) {
  struct cordon_manifest m = {0};
  m.workspace = project;
  m.policy.require_enforcement = true;
  return m;
}

static void test_identity_and_root(void **state) {
  struct cordon_manifest m = {0};
  struct cordon_session *s = create(&m);
  expect_stdout(s, "id -u; id -g; id -G", "1000\n1000\n1000\n");
  expect_stdout(s, "pwd", "/workspace\n");
  expect_stdout(s, "hostname", "cordon\n");
  /* no capabilities in any set; no_new_privs; seccomp filter */
  expect_stdout(s,
                "grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):' "
                "/proc/self/status | tr -s '\\t' ' '",
                "CapInh: 0000000000000000\nCapPrm: 0000000000000000\n"
                "CapEff: 0000000000000000\nCapBnd: 0000000000000000\n"
                "CapAmb: 0000000000000000\nNoNewPrivs: 1\nSeccomp: 2\n");
  /* the sandbox uid maps to an unprivileged host uid, never 0 */
  char *out = NULL;
  assert_int_equal(sh(s, "cat /proc/self/uid_map", &out), 0);
  unsigned inner = 0, outer = 0, count = 0;
  assert_int_equal(sscanf(out, "%u %u %u", &inner, &outer, &count), 3);
  assert_int_equal(inner, 1000);
  assert_int_equal(count, 1);
  assert_int_not_equal(outer, 0);
  free(out);
  /* pid 1 is the runtime's (not dumpable): with hidepid it is invisible, command line and all */
  expect_stdout(s, "test -e /proc/1/cmdline && echo visible || echo hidden", "hidden\n");
  assert_int_not_equal(sh(s, "cat /etc/shadow", NULL), 0);
  /* the root is read-only, /tmp is writable, the workspace is writable */
  assert_int_not_equal(sh(s, "touch /newfile 2>/dev/null", NULL), 0);
  assert_int_not_equal(sh(s, "touch /usr/newfile 2>/dev/null", NULL), 0);
  assert_int_not_equal(sh(s, "touch /dev/newfile 2>/dev/null", NULL), 0);
  expect_stdout(s, "echo hi > /tmp/t && cat /tmp/t", "hi\n");
  expect_stdout(s, "echo made > made.txt && cat made.txt", "made\n");
  unsigned char *data = NULL;
  size_t len = 0;
  struct cordon_error *err = NULL;
  assert_int_equal(cordon_session_read(s, "made.txt", &data, &len, &err), 0);
  assert_memory_equal(data, "made\n", 5);
  free(data);
  /* files the sandbox makes belong to the workspace's owner on the host */
  char path[512];
  snprintf(path, sizeof(path), "%s/made.txt", s->workspace);
  struct stat st, ws;
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(stat(s->workspace, &ws), 0);
  assert_int_equal(st.st_uid, ws.st_uid);
  assert_int_equal(cordon_session_destroy(s, &err), 0);
}

static void test_read_only_and_hidden(void **state) {
  write_host("src/main.c", "int main;\n");
  write_host("secrets/key", "TOPSECRET\n");
  write_host("conf/token", "TOKEN\n");
  write_host("src/private/notes", "PRIVATE\n");
  write_host("keys/signing.key", "KEY\n");
  char keys[400];
  snprintf(keys, sizeof(keys), "%s/keys", project);
  setenv("CORDON_KEY_DIR", keys, 1);
  struct cordon_manifest m = project_manifest();
  m.policy.read_only = LIST("src");
  m.policy.hidden = LIST("secrets", "conf/token", "src/private");
  struct cordon_session *s = create(&m);
  expect_stdout(s, "cat src/main.c", "int main;\n");
  assert_int_not_equal(sh(s, "echo x > src/main.c", NULL), 0);
  assert_int_not_equal(sh(s, "echo x > src/new.c", NULL), 0);
  assert_int_not_equal(sh(s, "rm src/main.c", NULL), 0);
  assert_int_not_equal(sh(s, "mv src src2", NULL), 0);
  expect_stdout(s, "ls -A secrets | wc -l", "0\n");
  assert_int_not_equal(sh(s, "touch secrets/x", NULL), 0);
  expect_stdout(s, "wc -c < conf/token", "0\n");
  assert_int_not_equal(sh(s, "echo x > conf/token", NULL), 0);
  expect_stdout(s, "ls -A src/private | wc -l", "0\n");
  /* cordon's own state is hidden when the workspace holds it, and so are its keys */
  expect_stdout(s, "ls -A .cordon | wc -l", "0\n");
  expect_stdout(s, "ls -A keys | wc -l; cat keys/signing.key | wc -c", "0\n0\n");
  /* the rest of the workspace stays writable */
  expect_stdout(s, "echo ok > conf/other && cat conf/other", "ok\n");
  struct cordon_error *err = NULL;
  assert_int_equal(cordon_session_destroy(s, &err), 0);
  unsetenv("CORDON_KEY_DIR");
  char *c = read_host("src/main.c");
  assert_string_equal(c, "int main;\n");
  free(c);
  c = read_host("secrets/key");
  assert_string_equal(c, "TOPSECRET\n");
  free(c);
}

static void test_policy_refusals(void **state) {
  write_host("data/file", "x\n");
  write_host("data/sub/file", "y\n");
  char link[512];
  snprintf(link, sizeof(link), "%s/escape-link", project);
  unlink(link);
  assert_int_equal(symlink("/etc", link), 0);
  snprintf(link, sizeof(link), "%s/inner-link", project);
  unlink(link);
  assert_int_equal(symlink("data", link), 0);

  struct cordon_manifest m = project_manifest();
  m.policy.read_only = LIST("escape-link");
  struct cordon_error *err = create_fails(&m);
  assert_int_equal(err->kind, CORDON_ERR_DENIED);
  cordon_error_free(err);

  m = project_manifest();
  m.policy.hidden = LIST("no/such/path");
  err = create_fails(&m);
  assert_int_equal(err->kind, CORDON_ERR_NOT_FOUND);
  cordon_error_free(err);

  m = project_manifest();
  m.policy.read_only = LIST("../outside");
  err = create_fails(&m);
  cordon_error_free(err);

  m = project_manifest();
  m.policy.read_only = LIST("data");
  m.policy.hidden = LIST("data");
  err = create_fails(&m);
  assert_non_null(strstr(err->message, "is also hidden"));
  cordon_error_free(err);

  /* disjoint by name, overlapping once the symlink is resolved */
  m = project_manifest();
  m.policy.read_only = LIST("data", "inner-link/sub");
  err = create_fails(&m);
  assert_non_null(strstr(err->message, "overlaps"));
  cordon_error_free(err);

  /* restricted: a bad rule is refused, named, before anything is made */
  m = project_manifest();
  m.policy.egress = CORDON_EGRESS_RESTRICTED;
  struct cordon_egress_rules bad_rules = {.allow_domains = LIST("ok.example", "*")};
  m.egress_rules = &bad_rules;
  err = create_fails(&m);
  assert_non_null(strstr(err->message, "*"));
  cordon_error_free(err);
  /* rules with another class would be ignored: refused */
  m = project_manifest();
  struct cordon_egress_rules rules = {.allow_domains = LIST("ok.example")};
  m.egress_rules = &rules;
  err = create_fails(&m);
  assert_non_null(strstr(err->message, "restricted"));
  cordon_error_free(err);

  m = project_manifest();
  m.policy.allow_ro = LIST("/no/such/host/path");
  err = create_fails(&m);
  cordon_error_free(err);

  m = project_manifest();
  m.root = "/usr/ws";
  err = create_fails(&m);
  cordon_error_free(err);

  /* a workspace covering the host's system directories */
  m = project_manifest();
  m.workspace = "/";
  err = create_fails(&m);
  assert_int_equal(err->kind, CORDON_ERR_DENIED);
  cordon_error_free(err);
}

static void test_allow_ro(void **state) {
  char dir[] = "/tmp/cordon-grant-XXXXXX";
  assert_non_null(mkdtemp(dir));
  chmod(dir, 0755);
  char file[300];
  snprintf(file, sizeof(file), "%s/granted.txt", dir);
  FILE *f = fopen(file, "w");
  fputs("granted\n", f);
  fclose(f);
  chmod(file, 0644);
  struct cordon_manifest m = {0};
  m.policy.allow_ro = (const char *const[]){dir, NULL};
  struct cordon_session *s = create(&m);
  char script[400];
  snprintf(script, sizeof(script), "cat %s", file);
  expect_stdout(s, script, "granted\n");
  snprintf(script, sizeof(script), "echo x > %s", file);
  assert_int_not_equal(sh(s, script, NULL), 0);
  /* a host path not granted is simply not there */
  assert_int_not_equal(sh(s, "ls /home /root /var 2>/dev/null", NULL), 0);
  struct cordon_error *err = NULL;
  assert_int_equal(cordon_session_destroy(s, &err), 0);
  unlink(file);
  rmdir(dir);
}

static void test_egress(void **state) {
  struct cordon_manifest m = {0};
  m.policy.egress = CORDON_EGRESS_NONE;
  struct cordon_session *s = create(&m);
  expect_stdout(s, "ip -o link | wc -l; ip -o link show lo | grep -c 'state DOWN'", "1\n1\n");
  cordon_session_destroy(s, NULL);
  m.policy.egress = CORDON_EGRESS_LOOPBACK;
  s = create(&m);
  expect_stdout(s, "ip -o link | wc -l; ip -o addr show lo | grep -c 'inet 127.0.0.1'", "1\n1\n");
  cordon_session_destroy(s, NULL);
}

static void test_reopen_and_dead_holder(void **state) {
  struct cordon_manifest m = {0};
  struct cordon_session *s = create(&m);
  char *id = strdup(s->id);
  expect_stdout(s, "echo one > /tmp/persist; echo ok", "ok\n");
  cordon_session_close(s);

  struct cordon_registry *reg = NULL;
  struct cordon_error *err = NULL;
  assert_int_equal(cordon_registry_load(&reg, &err), 0);
  assert_int_equal(cordon_session_open(ctx, reg, id, &s, &err), 0);
  /* the same namespaces: /tmp survived between handles */
  expect_stdout(s, "cat /tmp/persist", "one\n");

  /* kill the holder behind the session's back */
  json_t *st = json_loads(s->backend_state, 0, NULL);
  pid_t holder = (pid_t)json_integer_value(json_object_get(st, "holder_pid"));
  json_decref(st);
  assert_true(holder > 1);
  assert_int_equal(kill(holder, SIGKILL), 0);
  for (int i = 0; i < 200 && kill(holder, 0) == 0; i++)
    usleep(10000);
  cordon_session_close(s);
  assert_int_equal(cordon_session_open(ctx, reg, id, &s, &err), 0);
  struct cordon_exec_request req = {.argv = ARGV("true")};
  struct cordon_exec_result res;
  assert_true(cordon_session_exec(s, &req, &res, &err) < 0);
  assert_non_null(strstr(err->message, "gone"));
  cordon_error_free(err);
  err = NULL;
  assert_int_equal(cordon_session_destroy(s, &err), 0);
  assert_int_equal(cordon_session_destroy_id(ctx, reg, id, &err), 0);
  cordon_registry_free(reg);
  free(id);
}

/* The state file sits in the project tree, where a sandbox may rewrite it: a session's cgroup,
 * holder and socket are taken from it only when they are the session's own. --env values are
 * not in it at all. */
static char *state_file(const char *id) {
  char *path = NULL;
  assert_true(asprintf(&path, "%s/sessions/%s/state.json", cordon_context_state_dir(ctx), id) > 0);
  return path;
}

static void rewrite_backend_state(const char *id, const char *key, json_t *value) {
  char *path = state_file(id);
  json_t *doc = json_load_file(path, 0, NULL);
  assert_non_null(doc);
  json_object_set_new(json_object_get(doc, "backend_state"), key, value);
  assert_int_equal(json_dump_file(doc, path, JSON_INDENT(2)), 0);
  json_decref(doc);
  free(path);
}

static void test_untrusted_state(void **state) {
  struct cordon_manifest m = {0};
  m.env = LIST("TOKEN=cordon-test-secret-value");
  struct cordon_session *s = create(&m);
  char *id = strdup(s->id);
  expect_stdout(s, "echo $TOKEN", "cordon-test-secret-value\n");
  json_t *st = json_loads(s->backend_state, 0, NULL);
  json_t *saved = json_deep_copy(st);
  cordon_session_close(s);

  char *path = state_file(id);
  unsigned char *text = NULL;
  size_t len = 0;
  assert_int_equal(fs_read_file(path, 1 << 20, &text, &len, NULL), 0);
  assert_null(strstr((char *)text, "cordon-test-secret-value"));
  free(text);

  struct cordon_registry *reg = NULL;
  struct cordon_error *err = NULL;
  assert_int_equal(cordon_registry_load(&reg, &err), 0);

  /* A cgroup that is not the session's own: destroy refuses, acting on nothing. */
  if (json_object_get(st, "cgroup_v2")) {
    rewrite_backend_state(id, "cgroup_v2", json_string("/sys/fs/cgroup/system.slice"));
    assert_true(cordon_session_destroy_id(ctx, reg, id, &err) < 0);
    assert_int_equal(err->kind, CORDON_ERR_INVALID);
    assert_non_null(strstr(err->message, "not its own"));
    cordon_error_free(err);
    err = NULL;
    rewrite_backend_state(id, "cgroup_v2", json_incref(json_object_get(saved, "cgroup_v2")));
  }
  /* A holder pid naming another live process (with its true start time). */
  rewrite_backend_state(id, "holder_pid", json_integer(getpid()));
  char stat_path[64], buf[1024];
  snprintf(stat_path, sizeof(stat_path), "/proc/%d/stat", (int)getpid());
  FILE *f = fopen(stat_path, "r");
  assert_non_null(f);
  assert_non_null(fgets(buf, sizeof(buf), f));
  fclose(f);
  char *p = strrchr(buf, ')');
  unsigned long long start = 0;
  for (int field = 2; p && field < 22; field++)
    p = strchr(p + 1, ' ');
  assert_non_null(p);
  start = strtoull(p + 1, NULL, 10);
  rewrite_backend_state(id, "holder_start", json_integer((json_int_t)start));
  assert_true(cordon_session_destroy_id(ctx, reg, id, &err) < 0);
  assert_int_equal(err->kind, CORDON_ERR_INVALID);
  assert_non_null(strstr(err->message, "not its holder"));
  cordon_error_free(err);
  err = NULL;
  rewrite_backend_state(id, "holder_pid", json_incref(json_object_get(saved, "holder_pid")));
  rewrite_backend_state(id, "holder_start", json_incref(json_object_get(saved, "holder_start")));

  /* A socket somewhere else: exec refuses to connect anywhere. */
  rewrite_backend_state(id, "socket", json_string("/tmp/planted.sock"));
  assert_int_equal(cordon_session_open(ctx, reg, id, &s, &err), 0);
  struct cordon_exec_request req = {.argv = ARGV("true")};
  struct cordon_exec_result res;
  assert_true(cordon_session_exec(s, &req, &res, &err) < 0);
  assert_int_equal(err->kind, CORDON_ERR_INVALID);
  cordon_error_free(err);
  err = NULL;
  cordon_session_close(s);
  rewrite_backend_state(id, "socket", json_incref(json_object_get(saved, "socket")));

  /* Restored: a later handle finds the environment in the runtime directory. */
  assert_int_equal(cordon_session_open(ctx, reg, id, &s, &err), 0);
  expect_stdout(s, "echo $TOKEN", "cordon-test-secret-value\n");
  assert_int_equal(cordon_session_destroy(s, &err), 0);
  json_decref(st);
  json_decref(saved);
  free(path);
  free(id);
  cordon_registry_free(reg);
}

static void test_cwd_and_exec_errors(void **state) {
  struct cordon_manifest m = {0};
  struct cordon_session *s = create(&m);
  struct cordon_exec_request req = {.argv = ARGV("pwd"), .cwd = "no/such/dir"};
  struct cordon_exec_result res;
  struct cordon_error *err = NULL;
  assert_true(cordon_session_exec(s, &req, &res, &err) < 0);
  assert_non_null(strstr(err->message, "no/such/dir"));
  cordon_error_free(err);
  err = NULL;
  req = (struct cordon_exec_request){.argv = ARGV("pwd"), .cwd = "/tmp"};
  assert_int_equal(cordon_session_exec(s, &req, &res, &err), 0);
  assert_string_equal((char *)res.stdout_data, "/tmp\n");
  cordon_exec_result_clear(&res);
  /* not executable: 126, with a message */
  assert_int_equal(sh(s, "printf 'x' > noexec; chmod 644 noexec; ./noexec", NULL), 126);
  req = (struct cordon_exec_request){.argv = ARGV("/workspace/noexec")};
  assert_int_equal(cordon_session_exec(s, &req, &res, &err), 0);
  assert_int_equal(res.exit_code, 126);
  assert_non_null(strstr((char *)res.stderr_data, "noexec"));
  cordon_exec_result_clear(&res);
  assert_int_equal(cordon_session_destroy(s, &err), 0);
}

static void test_limits(void **state) {
  struct cordon_manifest m = {0};
  m.policy.limits.pids = 16;
  m.policy.limits.memory_bytes = 64u << 20;
  m.policy.limits.nofile = 64;
  struct cordon_session *s = NULL;
  struct cordon_error *err = NULL;
  if (cordon_session_create(ctx, ns, &m, &s, &err) < 0) {
    /* refused by name when the host cannot enforce them: that is the contract */
    assert_int_equal(err->kind, CORDON_ERR_UNAVAILABLE);
    assert_non_null(strstr(err->message, "limit"));
    cordon_error_free(err);
    skip();
  }
  expect_stdout(s, "ulimit -n", "64\n");
  /* the limits sit in the session's cgroups on the host (v2, or v1 on hybrid hosts) */
  json_t *st = json_loads(s->backend_state, 0, NULL);
  const char *pids_dir = json_string_value(json_object_get(st, "cgroup_pids"));
  const char *mem_dir = json_string_value(json_object_get(st, "cgroup_memory"));
  const char *v2 = json_string_value(json_object_get(st, "cgroup_v2"));
  char path[600];
  snprintf(path, sizeof(path), "%s/pids.max", pids_dir ? pids_dir : v2);
  char *text = NULL;
  size_t len = 0;
  assert_int_equal(fs_read_file(path, 4096, (unsigned char **)&text, &len, &err), 0);
  assert_int_equal(atoi(text), 16 + 6); /* + the holder, 3 workers, 2 idle commands */
  free(text);
  if (mem_dir)
    snprintf(path, sizeof(path), "%s/memory.limit_in_bytes", mem_dir);
  else
    snprintf(path, sizeof(path), "%s/memory.max", v2);
  assert_int_equal(fs_read_file(path, 4096, (unsigned char **)&text, &len, &err), 0);
  assert_int_equal(strtoull(text, NULL, 10), 64u << 20);
  free(text);
  json_decref(st);
  /* a memory hog dies (OOM kill: 128 + 9) instead of taking the host's memory */
  assert_int_equal(sh(s, "head -c 200m /dev/zero | tail > /dev/null", NULL) != 0, 1);
  assert_int_equal(cordon_session_destroy(s, &err), 0);
}

/* Out of memory in a one-shot sandbox (whose pid 1 shares this process's memory) through /tmp,
 * whose pages are no process's resident memory: only the command may die, never the caller;
 * /tmp and /dev/shm are capped at the memory limit. */
static void test_one_shot_out_of_memory(void **state) {
  struct cordon_manifest m = {.one_shot = true, .ephemeral = true};
  m.policy.limits.memory_bytes = 64u << 20;
  struct cordon_session *s = NULL;
  struct cordon_error *err = NULL;
  if (cordon_session_create(ctx, ns, &m, &s, &err) < 0) {
    assert_int_equal(err->kind, CORDON_ERR_UNAVAILABLE);
    cordon_error_free(err);
    skip();
  }
  json_t *st = json_loads(s->backend_state, 0, NULL);
  const char *mem = json_string_value(json_object_get(st, "cgroup_memory"));
  if (!mem)
    mem = json_string_value(json_object_get(st, "cgroup_v2"));
  char *mem_dir = mem ? strdup(mem) : NULL;
  json_decref(st);
  struct cordon_exec_request req = {
      .argv = ARGV("sh", "-c",
                   "grep -E ' /(tmp|dev/shm) ' /proc/mounts; head -c 256m /dev/zero > /tmp/fill"),
      .timeout = 60};
  struct cordon_exec_result res;
  assert_int_equal(cordon_session_exec(s, &req, &res, &err), 0);
  /* killed (137), or the write failed (1): we are alive to see it */
  assert_true(res.exit_code == 137 || res.exit_code == 1);
  assert_non_null(strstr((char *)res.stdout_data, "/tmp tmpfs"));
  assert_non_null(strstr((char *)res.stdout_data, "size=65536k"));
  cordon_exec_result_clear(&res);
  assert_int_equal(cordon_session_destroy(s, &err), 0);
  struct stat sb;
  if (mem_dir)
    assert_true(stat(mem_dir, &sb) < 0 && errno == ENOENT);
  free(mem_dir);
}

/* A multi-threaded caller must not clone raw: the backend goes through an intermediate. */
static pthread_mutex_t idle_lock = PTHREAD_MUTEX_INITIALIZER;
static void *idle_thread(void *arg) {
  pthread_mutex_lock(&idle_lock); /* blocks until the test is done */
  pthread_mutex_unlock(&idle_lock);
  return NULL;
}

/* Whether pid maps a file whose name holds marker: a fork's copy of this process would. */
static bool maps_name(pid_t pid, const char *marker) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
  unsigned char *maps = NULL;
  size_t length = 0;
  struct cordon_error *err = NULL;
  if (fs_read_file(path, 1 << 22, &maps, &length, &err) < 0)
    fail_msg("%s", err->message);
  bool found = strstr((char *)maps, marker) != NULL;
  free(maps);
  return found;
}

/* A caller with threads: its session's holder is a fresh image of the program, not a copy of
 * the caller's memory (holder.c, the spawner): a mapping the caller made before is not in it. */
static void test_threaded_caller(void **state) {
  pthread_mutex_lock(&idle_lock);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, idle_thread, NULL), 0);
  int marker = memfd_create("cordon-test-threaded-caller", MFD_CLOEXEC);
  assert_true(marker >= 0 && ftruncate(marker, 4096) == 0);
  void *mapped = mmap(NULL, 4096, PROT_READ, MAP_SHARED, marker, 0);
  assert_true(mapped != MAP_FAILED);
  assert_true(maps_name(getpid(), "cordon-test-threaded-caller"));
  struct cordon_manifest m = {0};
  struct cordon_session *s = create(&m);
  expect_stdout(s, "echo threaded", "threaded\n");
  json_t *st = json_loads(s->backend_state, 0, NULL);
  pid_t holder = (pid_t)json_integer_value(json_object_get(st, "holder_pid"));
  json_decref(st);
  assert_true(holder > 1);
  assert_false(maps_name(holder, "cordon-test-threaded-caller"));
  munmap(mapped, 4096);
  close(marker);
  struct cordon_error *err = NULL;
  assert_int_equal(cordon_session_destroy(s, &err), 0);
  pthread_mutex_unlock(&idle_lock);
  pthread_join(t, NULL);
}

/* A copy of a threaded caller (a fork) keeps held whatever lock another thread held at that
 * instant (ASan's thread registry, through its prctl(PR_SET_NAME) hook, hung a holder made in
 * such a copy): the holder is a spawner's, a fresh image. Sessions made while four threads
 * start and end threads without pause. */
static bool churn_stop; /* atomic */
static void *short_thread(void *arg) {
  return arg;
}
static void *thread_churn(void *arg) {
  (void)arg;
  while (!__atomic_load_n(&churn_stop, __ATOMIC_RELAXED)) {
    pthread_t t;
    if (pthread_create(&t, NULL, short_thread, NULL) == 0)
      pthread_join(t, NULL);
  }
  return NULL;
}

static void test_threaded_caller_busy(void **state) {
  __atomic_store_n(&churn_stop, false, __ATOMIC_RELAXED);
  pthread_t churn[4];
  for (int i = 0; i < 4; i++)
    assert_int_equal(pthread_create(&churn[i], NULL, thread_churn, NULL), 0);
  for (int i = 0; i < 100; i++) {
    struct cordon_manifest m = {0};
    struct cordon_session *s = create(&m);
    expect_stdout(s, "echo busy", "busy\n");
    struct cordon_error *err = NULL;
    assert_int_equal(cordon_session_destroy(s, &err), 0);
  }
  __atomic_store_n(&churn_stop, true, __ATOMIC_RELAXED);
  for (int i = 0; i < 4; i++)
    pthread_join(churn[i], NULL);
}

/* One-shot sandboxes started from several threads at once, each on a workspace of its own (so
 * each also makes the throw-away user namespace of an id-mapped mount): every thread's
 * processes are cloned while the others hold fresh pipes, and none may wait on a copy another
 * thread's child holds (a deadlock once, between two id-map helpers: the test then hangs until
 * meson's timeout fails it). */
#define ONE_SHOT_THREADS 4
#define ONE_SHOT_ROUNDS 15

struct one_shot_thread {
  char workspace[64];
  int index;
  int ok;
};

static void *one_shot_thread(void *arg) {
  struct one_shot_thread *t = arg;
  for (int round = 0; round < ONE_SHOT_ROUNDS; round++) {
    struct cordon_manifest m = {.workspace = t->workspace, .one_shot = true, .ephemeral = true};
    struct cordon_session *s = NULL;
    struct cordon_error *err = NULL;
    char script[64];
    snprintf(script, sizeof(script), "echo %d-%d", t->index, round);
    struct cordon_exec_request req = {.argv = ARGV("sh", "-c", script), .timeout = 20};
    struct cordon_exec_result res;
    if (cordon_session_create(ctx, ns, &m, &s, &err) < 0) {
      cordon_error_free(err);
      return NULL;
    }
    int r = cordon_session_exec(s, &req, &res, &err);
    char want[80];
    snprintf(want, sizeof(want), "%s\n", script + 5);
    if (r == 0 && res.exit_code == 0 && strcmp((char *)res.stdout_data, want) == 0)
      t->ok++;
    if (r == 0)
      cordon_exec_result_clear(&res);
    /* A one-shot session runs one command. */
    struct cordon_error *again = NULL;
    if (cordon_session_exec(s, &req, &res, &again) == 0) {
      cordon_exec_result_clear(&res);
      t->ok = -1000;
    }
    cordon_error_free(again);
    cordon_error_free(err);
    err = NULL;
    cordon_session_destroy(s, &err);
    cordon_error_free(err);
  }
  return NULL;
}

static void test_concurrent_one_shot(void **state) {
  struct one_shot_thread t[ONE_SHOT_THREADS];
  pthread_t threads[ONE_SHOT_THREADS];
  for (int i = 0; i < ONE_SHOT_THREADS; i++) {
    t[i] = (struct one_shot_thread){.index = i};
    snprintf(t[i].workspace, sizeof(t[i].workspace), "/tmp/cordon-one-shot-ws.XXXXXX");
    assert_non_null(mkdtemp(t[i].workspace));
    assert_int_equal(pthread_create(&threads[i], NULL, one_shot_thread, &t[i]), 0);
  }
  for (int i = 0; i < ONE_SHOT_THREADS; i++)
    pthread_join(threads[i], NULL);
  for (int i = 0; i < ONE_SHOT_THREADS; i++) {
    assert_int_equal(t[i].ok, ONE_SHOT_ROUNDS);
    rmdir(t[i].workspace);
  }
}

/* Several execs at once in one session: each gets its own worker and command process (made on
 * demand when the idle one is taken), its own output and status. */
struct concurrent_exec {
  struct cordon_session *s;
  int index;
  int exit_code;
  char out[32];
};

static void *concurrent_exec_thread(void *arg) {
  struct concurrent_exec *c = arg;
  char script[64];
  snprintf(script, sizeof(script), "sleep 0.3; echo %d; exit %d", c->index, c->index);
  struct cordon_exec_request req = {.argv = ARGV("sh", "-c", script), .timeout = 20};
  struct cordon_exec_result res;
  struct cordon_error *err = NULL;
  c->exit_code = -1;
  if (cordon_session_exec(c->s, &req, &res, &err) == 0) {
    c->exit_code = res.exit_code;
    snprintf(c->out, sizeof(c->out), "%s", (char *)res.stdout_data);
    cordon_exec_result_clear(&res);
  }
  cordon_error_free(err);
  return NULL;
}

#define IDLE_PAIRS 2 /* IDLE_TARGET in holder.c */
static void test_concurrent_execs(void **state) {
  struct cordon_manifest m = {0};
  struct cordon_session *s = create(&m);
  enum { N = 4 };
  struct concurrent_exec c[N];
  pthread_t t[N];
  double start = fs_now();
  for (int i = 0; i < N; i++) {
    c[i] = (struct concurrent_exec){.s = s, .index = i + 1};
    assert_int_equal(pthread_create(&t[i], NULL, concurrent_exec_thread, &c[i]), 0);
  }
  for (int i = 0; i < N; i++)
    pthread_join(t[i], NULL);
  double took = fs_now() - start;
  for (int i = 0; i < N; i++) {
    char want[8];
    snprintf(want, sizeof(want), "%d\n", i + 1);
    assert_int_equal(c[i].exit_code, i + 1);
    assert_string_equal(c[i].out, want);
  }
  /* they ran side by side, not one after the other */
  if (took > 0.3 * N)
    fail_msg("%d concurrent execs of 0.3 s took %.2f s", N, took);
  /* and back to back afterwards, many times */
  for (int i = 0; i < 20; i++)
    expect_stdout(s, "echo again", "again\n");
  /* The workers made for the concurrent execs do not all stay: the holder keeps two idle pairs
   * (and a third at worst, for a moment), not one per exec that ever ran at once. */
  json_t *st = json_loads(s->backend_state, 0, NULL);
  pid_t holder = (pid_t)json_integer_value(json_object_get(st, "holder_pid"));
  json_decref(st);
  char path[64], kids[512] = "";
  snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)holder, (int)holder);
  size_t workers = 0;
  for (int tries = 0; tries < 100; tries++) { /* workers finish and go within a moment */
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(kids, 1, sizeof(kids) - 1, f);
    fclose(f);
    kids[n] = 0;
    workers = 0;
    for (char *p = strtok(kids, " \n"); p; p = strtok(NULL, " \n"))
      workers++;
    if (workers <= IDLE_PAIRS)
      break;
    usleep(20000);
  }
  if (workers > IDLE_PAIRS)
    fail_msg("%zu workers stay after %d concurrent execs, expected at most %d", workers, N,
             IDLE_PAIRS);
  struct cordon_error *err = NULL;
  assert_int_equal(cordon_session_destroy(s, &err), 0);
}

/* A worker serves execs one after the other (up to 64), and nothing of an exec outlives it on
 * the next ones: seen from inside, through the parent of each command (its worker). */
static void test_workers_are_reused_and_clean(void **state) {
  struct cordon_manifest m = {0};
  struct cordon_session *s = create(&m);
  /* Each exec leaves a background child that writes a marker a second later: it outlives its
   * exec (as with docker exec), kept by its worker, which serves no more execs then. */
  for (int i = 0; i < 6; i++) {
    char script[160];
    snprintf(script, sizeof(script),
             "(sleep 1; echo left > /tmp/left-%d) >/dev/null 2>&1 & echo $PPID", i);
    char *out = NULL;
    assert_int_equal(sh(s, script, &out), 0);
    free(out);
  }
  sleep(2);
  expect_stdout(s, "ls /tmp | grep -c '^left-' || true", "6\n");
  /* 140 execs: a worker per exec would be 140 workers; 2 taking turns up to 64 execs each are
   * 3 to 6. */
  enum { EXECS = 140 };
  pid_t workers[EXECS];
  size_t distinct = 0;
  for (int i = 0; i < EXECS; i++) {
    char *out = NULL;
    assert_int_equal(sh(s, "echo $PPID", &out), 0);
    pid_t w = (pid_t)atoi(out);
    free(out);
    assert_true(w > 1);
    bool seen = false;
    for (size_t k = 0; k < distinct; k++)
      seen = seen || workers[k] == w;
    if (!seen)
      workers[distinct++] = w;
  }
  if (distinct < 3 || distinct > 8)
    fail_msg("%d execs were served by %zu workers, expected 3 to 8", EXECS, distinct);
  struct cordon_error *err = NULL;
  assert_int_equal(cordon_session_destroy(s, &err), 0);
}

/* The conformance suite, through the same entry point as `cordon conformance ns`. */
/* Fork: 8 sessions resumed from one snapshot, each changing one file of its own from inside;
 * each terminal snapshot holds the base's entries plus exactly its own file. */
#define FORKS 8
static void test_fork_sessions(void **state) {
  struct cordon_manifest m = {0};
  m.policy.require_enforcement = true;
  struct cordon_session *origin = create(&m);
  struct cordon_error *err = NULL;
  assert_int_equal(cordon_session_write(origin, "base/a.txt", "a", 1, 0644, &err), 0);
  assert_int_equal(cordon_session_write(origin, "base/deep/b.txt", "bb", 2, 0600, &err), 0);
  assert_int_equal(sh(origin, "ln -s base/a.txt link && mkdir empty", NULL), 0);
  char *base_id = NULL;
  if (cordon_session_snapshot(origin, &base_id, &err) < 0)
    fail_msg("snapshot: %s", err->message);
  cordon_session_destroy(origin, NULL);

  struct cordon_cas *cas = NULL;
  assert_int_equal(cordon_cas_open_project(ctx, &cas, &err), 0);
  struct cordon_snapshot_entry *base = NULL;
  size_t n_base = 0;
  assert_int_equal(cordon_snapshot_entries(cas, base_id, &base, &n_base, &err), 0);

  struct cordon_session *forks[FORKS] = {0};
  double start = fs_now();
  for (int i = 0; i < FORKS; i++) {
    struct cordon_manifest fm = {0};
    fm.policy.require_enforcement = true;
    if (cordon_session_resume(ctx, ns, &fm, base_id, &forks[i], &err) < 0)
      fail_msg("resume %d: %s", i, err->message);
  }
  printf("# %d forks in %.3f s\n", FORKS, fs_now() - start);
  for (int i = 0; i < FORKS; i++) {
    char script[128];
    snprintf(script, sizeof(script), "own-%d.txt", i);
    /* written on the host first: the sandbox must still own it and overwrite it */
    assert_int_equal(cordon_session_write(forks[i], script, "h\n", 2, 0644, &err), 0);
    snprintf(script, sizeof(script), "cat base/a.txt && echo %d > own-%d.txt", i, i);
    expect_stdout(forks[i], script, "a");
  }
  for (int i = 0; i < FORKS; i++) {
    char *id = NULL;
    if (cordon_session_snapshot(forks[i], &id, &err) < 0)
      fail_msg("snapshot %d: %s", i, err->message);
    struct cordon_snapshot_entry *e = NULL;
    size_t n = 0;
    assert_int_equal(cordon_snapshot_entries(cas, id, &e, &n, &err), 0);
    /* Exactly one entry more than the base, and it is this fork's own file. */
    assert_int_equal(n, n_base + 1);
    char own[32];
    snprintf(own, sizeof(own), "own-%d.txt", i);
    size_t j = 0, k = 0;
    bool seen = false;
    while (j < n) {
      if (!seen && strcmp(e[j].path, own) == 0) {
        assert_int_equal(e[j].kind, CORDON_SNAPSHOT_FILE);
        assert_int_equal(e[j].size, 2);
        seen = true;
        j++;
        continue;
      }
      assert_true(k < n_base);
      assert_string_equal(e[j].path, base[k].path);
      assert_int_equal(e[j].kind, base[k].kind);
      assert_int_equal(e[j].mode, base[k].mode);
      assert_string_equal(e[j].digest, base[k].digest);
      j++, k++;
    }
    assert_true(seen);
    unsigned char *data = NULL;
    size_t len = 0;
    assert_int_equal(cordon_session_read(forks[i], own, &data, &len, &err), 0);
    assert_int_equal(len, 2);
    assert_int_equal(data[0], '0' + i);
    free(data);
    cordon_snapshot_entries_free(e, n);
    free(id);
  }
  /* As root the forks share one base (.cordon/bases/<id>) and each has only an upper layer:
   * no session holds a copy of the tree. Rootless resumes restore a full copy instead. */
  if (geteuid() == 0) {
    char path[512];
    snprintf(path, sizeof(path), "%s/.cordon/bases/%s/base/a.txt", project, base_id);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    snprintf(path, sizeof(path), "%s/.cordon/bases", project);
    DIR *d = opendir(path);
    assert_non_null(d);
    int bases = 0;
    for (struct dirent *de; (de = readdir(d));)
      bases += de->d_name[0] != '.';
    closedir(d);
    assert_int_equal(bases, 1);
    snprintf(path, sizeof(path), "%s/.cordon/sessions", project);
    d = opendir(path);
    assert_non_null(d);
    int uppers = 0;
    for (struct dirent *de; (de = readdir(d));) {
      if (de->d_name[0] == '.')
        continue;
      char sub[1024];
      snprintf(sub, sizeof(sub), "%s/%s/workspace", path, de->d_name);
      assert_int_not_equal(lstat(sub, &st), 0); /* no private copy */
      snprintf(sub, sizeof(sub), "%s/%s/upper/base", path, de->d_name);
      assert_int_not_equal(lstat(sub, &st), 0); /* base untouched: nothing copied up */
      snprintf(sub, sizeof(sub), "%s/%s/upper", path, de->d_name);
      uppers += lstat(sub, &st) == 0;
    }
    closedir(d);
    assert_int_equal(uppers, FORKS);
  }
  for (int i = 0; i < FORKS; i++)
    assert_int_equal(cordon_session_destroy(forks[i], &err), 0);
  cordon_snapshot_entries_free(base, n_base);
  cordon_cas_close(cas);
  free(base_id);
}

static void test_conformance_suite(void **state) {
  char *text = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&text, &len);
  assert_non_null(out);
  struct cordon_conformance_summary summary = {0};
  struct cordon_error *err = NULL;
  int r = cordon_conformance_run(ctx, ns, out, false, &summary, &err);
  fclose(out);
  if (r < 0 || summary.failed != 0 || summary.passed == 0)
    fail_msg("conformance: %s\n%s", err ? err->message : "", text);
  free(text);
}

static int setup(void **state) {
  char *reason = NULL;
  if (ns->available(ns, &reason) != 1) {
    printf("# skip: the ns backend is unavailable here: %s\n", reason ? reason : "?");
    free(reason);
    return -1;
  }
  snprintf(project, sizeof(project), "/tmp/cordon-ns-test-XXXXXX");
  if (!mkdtemp(project))
    return -1;
  chmod(project, 0755);
  struct cordon_error *err = NULL;
  if (cordon_context_open(project, &ctx, &err) < 0)
    return -1;
  /* make .cordon/ exist so the hidden-state rule has something to hide */
  char dir[400];
  snprintf(dir, sizeof(dir), "%s/.cordon", project);
  mkdir(dir, 0700);
  return 0;
}

static int teardown(void **state) {
  /* A failed check leaves its session behind: destroy every one (holder, cgroups included). */
  char **ids = NULL;
  struct cordon_registry *reg = NULL;
  if (cordon_session_list(ctx, &ids, NULL) == 0 && cordon_registry_load(&reg, NULL) == 0)
    for (size_t i = 0; ids[i]; i++)
      cordon_session_destroy_id(ctx, reg, ids[i], NULL);
  cordon_strv_free(ids);
  cordon_registry_free(reg);
  cordon_context_free(ctx);
  struct cordon_error *err = NULL;
  fs_remove_tree(project, &err);
  cordon_error_free(err);
  return 0;
}

int main(void) {
  char *reason = NULL;
  if (cordon_backend_ns.available(&cordon_backend_ns, &reason) != 1) {
    printf("1..0 # SKIP the ns backend is unavailable here: %s\n", reason ? reason : "?");
    free(reason);
    return 0;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_identity_and_root),
      cmocka_unit_test(test_read_only_and_hidden),
      cmocka_unit_test(test_policy_refusals),
      cmocka_unit_test(test_allow_ro),
      cmocka_unit_test(test_egress),
      cmocka_unit_test(test_reopen_and_dead_holder),
      cmocka_unit_test(test_untrusted_state),
      cmocka_unit_test(test_cwd_and_exec_errors),
      cmocka_unit_test(test_limits),
      cmocka_unit_test(test_threaded_caller),
      cmocka_unit_test(test_threaded_caller_busy),
      cmocka_unit_test(test_concurrent_execs),
      cmocka_unit_test(test_workers_are_reused_and_clean),
      cmocka_unit_test(test_concurrent_one_shot),
      cmocka_unit_test(test_one_shot_out_of_memory),
      cmocka_unit_test(test_fork_sessions),
      cmocka_unit_test(test_conformance_suite),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
