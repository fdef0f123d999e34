/* The session layer: what backends receive, state files, re-attach, idempotent destroy, the
 * registry and plugin refusal, and the one enforcement check (policy features asked for
 * against those a backend enforces; a waiver is audited). A recording fake backend shows
 * exactly what the library hands a backend. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include <cordon/audit.h>
#include <cordon/keys.h>
#include <cordon/session.h>

#include "base/fs.h"
#include "base/strv.h"
#include "protocol/session-id.h"
#include "protocol/session-json.h"
#include "protocol/session-record.h"

/* ---- a fake backend that records its last exec request and path -------------------------- */

static char *last_path;
static char **last_env;
static char *last_cwd;
static double last_timeout;
static int creates_to_fail;
static size_t creates; /* create calls that reached the backend */

static int fake_available(const struct cordon_backend *self, char **reason) {
  return 1;
}
static int fake_create(struct cordon_session *s, const struct cordon_manifest *m,
                       struct cordon_error **err) {
  creates++;
  if (creates_to_fail > 0) {
    creates_to_fail--;
    return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0, "fake refuses");
  }
  if (asprintf(&s->workspace, "%s/ws", s->state_dir) < 0 || mkdir(s->workspace, 0755) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "ws");
  s->backend_state = strdup("{\"fake\":true}");
  return 0;
}
static int fake_ok(struct cordon_session *s, struct cordon_error **err) {
  return 0;
}
static int fake_read(struct cordon_session *s, const char *path, unsigned char **data,
                     size_t *length, struct cordon_error **err) {
  free(last_path);
  last_path = strdup(path);
  *data = (unsigned char *)strdup("x");
  *length = 1;
  return 0;
}
static int fake_write(struct cordon_session *s, const char *path, const void *data, size_t length,
                      unsigned mode, struct cordon_error **err) {
  free(last_path);
  last_path = strdup(path);
  return 0;
}
static int fake_ls(struct cordon_session *s, const char *path, struct cordon_dirent **entries,
                   size_t *count, struct cordon_error **err) {
  *entries = NULL;
  *count = 0;
  return 0;
}
static int fake_exec(struct cordon_session *s, const struct cordon_exec_request *req,
                     struct cordon_exec_result *res, struct cordon_error **err) {
  strv_free(last_env);
  last_env = strv_copy(req->env);
  free(last_cwd);
  last_cwd = req->cwd ? strdup(req->cwd) : NULL;
  last_timeout = req->timeout;
  assert_true(req->clear_env);
  assert_int_equal(req->max_output, CORDON_EXEC_DEFAULT_MAX_OUTPUT);
  res->exit_code = 0;
  return 0;
}

static const struct cordon_backend fake = {
    .abi_version = CORDON_BACKEND_ABI_VERSION,
    .name = "fake",
    .capabilities = CORDON_CAP_FILE_RW | CORDON_CAP_EXEC,
    .enforces = CORDON_FEATURE_NET_NONE,
    .available = fake_available,
    .create = fake_create,
    .attach = fake_ok,
    .destroy = fake_ok,
    .shutdown = fake_ok,
    .read = fake_read,
    .write = fake_write,
    .ls = fake_ls,
    .exec = fake_exec,
};

/* A backend whose sessions become ready later (like ns): resume returns early when asked. */
static size_t resumes, readies, resumes_deferred, resumes_before_first_ready, destroys;
static size_t ready_to_fail = SIZE_MAX; /* the ready call (0-based) that fails */

static int deferring_resume(struct cordon_session *s, const struct cordon_manifest *m,
                            const char *snapshot_id, struct cordon_error **err) {
  resumes++;
  resumes_deferred += s->defer_ready;
  return fake_create(s, m, err);
}
static int deferring_ready(struct cordon_session *s, struct cordon_error **err) {
  assert_true(s->defer_ready);
  if (readies == 0)
    resumes_before_first_ready = resumes;
  if (readies++ == ready_to_fail)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, 0, "fake not ready");
  return 0;
}
static int deferring_destroy(struct cordon_session *s, struct cordon_error **err) {
  destroys++;
  return 0;
}
static int deferring_snapshot(struct cordon_session *s, char **id, struct cordon_error **err) {
  return cordon_error_set(err, CORDON_ERR_UNSUPPORTED, 0, "not in this test");
}

static const struct cordon_backend deferring = {
    .abi_version = CORDON_BACKEND_ABI_VERSION,
    .name = "deferring",
    .capabilities = CORDON_CAP_SNAPSHOT,
    .enforces = CORDON_FEATURE_NET_NONE,
    .available = fake_available,
    .create = fake_create,
    .resume = deferring_resume,
    .attach = fake_ok,
    .destroy = deferring_destroy,
    .shutdown = fake_ok,
    .snapshot = deferring_snapshot,
    .ready = deferring_ready,
};

static char *project;
static struct cordon_context *ctx;

static int setup(void **state) {
  char tmpl[] = "/tmp/cordon-test-session.XXXXXX";
  project = strdup(mkdtemp(tmpl));
  return cordon_context_open(project, &ctx, NULL);
}

static int teardown(void **state) {
  cordon_context_free(ctx);
  fs_remove_tree(project, NULL);
  free(project);
  free(last_path);
  free(last_cwd);
  strv_free(last_env);
  last_path = last_cwd = NULL;
  last_env = NULL;
  return 0;
}

static struct cordon_session *create_fake(const char *const *env, double timeout) {
  struct cordon_manifest m = {.env = env, .default_timeout = timeout, .root = "/work"};
  struct cordon_session *s = NULL;
  struct cordon_error *err = NULL;
  assert_int_equal(cordon_session_create(ctx, &fake, &m, &s, &err), 0);
  return s;
}

static void test_paths_reach_backend_normalised(void **state) {
  struct cordon_session *s = create_fake(NULL, 0);
  struct cordon_error *err = NULL;
  unsigned char *d = NULL;
  size_t n = 0;
  assert_int_equal(cordon_session_read(s, "./a//b/", &d, &n, &err), 0);
  free(d);
  assert_string_equal(last_path, "a/b");
  assert_int_equal(cordon_session_read(s, "/work/x/y", &d, &n, &err), 0);
  free(d);
  assert_string_equal(last_path, "x/y");
  const char *bad[] = {"../x", "/etc/passwd", "/workother/x", "a/../../b"};
  for (size_t i = 0; i < 4; i++) {
    assert_true(cordon_session_read(s, bad[i], &d, &n, &err) < 0);
    assert_int_equal(err->kind, CORDON_ERR_DENIED);
    cordon_error_free(err);
    err = NULL;
  }
  assert_true(cordon_session_write(s, "", "x", 1, 0, &err) < 0);
  cordon_error_free(err);
  err = NULL;
  assert_true(cordon_session_write(s, "f", "x", 1, 010000, &err) < 0);
  assert_int_equal(err->kind, CORDON_ERR_USAGE);
  cordon_error_free(err);
  err = NULL;
  /* snapshot is refused by capability, not passed to a backend without it */
  char *snap = NULL;
  assert_true(cordon_session_snapshot(s, &snap, &err) < 0);
  assert_int_equal(err->kind, CORDON_ERR_UNSUPPORTED);
  cordon_error_free(err);
  assert_int_equal(cordon_session_destroy(s, NULL), 0);
}

static void test_exec_environment_and_timeout(void **state) {
  const char *env[] = {"SESSION=1", "LANG=fr", NULL};
  struct cordon_session *s = create_fake(env, 9);
  const char *argv[] = {"true", NULL};
  const char *req_env[] = {"REQ=2", "SESSION=override", NULL};
  struct cordon_exec_request req = {.argv = argv, .env = req_env, .cwd = "/work/sub/"};
  struct cordon_exec_result res;
  struct cordon_error *err = NULL;
  assert_int_equal(cordon_session_exec(s, &req, &res, &err), 0);
  const char *const *e = (const char *const *)last_env;
  assert_string_equal(strv_env_get(e, "SESSION"), "override");
  assert_string_equal(strv_env_get(e, "REQ"), "2");
  assert_string_equal(strv_env_get(e, "LANG"), "fr");
  assert_string_equal(strv_env_get(e, "HOME"), "/work");
  assert_non_null(strv_env_get(e, "PATH"));
  assert_string_equal(last_cwd, "sub");
  assert_true(last_timeout == 9);
  /* clear_env: nothing but the request's own entries; a negative timeout means none */
  req.clear_env = true;
  req.timeout = -1;
  req.cwd = "/tmp";
  assert_int_equal(cordon_session_exec(s, &req, &res, &err), 0);
  assert_int_equal(strv_length((const char *const *)last_env), 2);
  assert_true(last_timeout == 0);
  assert_string_equal(last_cwd, "/tmp");
  /* malformed requests never reach the backend */
  const char *bad_env[] = {"NOEQUALS", NULL};
  req.env = bad_env;
  assert_true(cordon_session_exec(s, &req, &res, &err) < 0);
  assert_int_equal(err->kind, CORDON_ERR_USAGE);
  cordon_error_free(err);
  err = NULL;
  const char *empty[] = {NULL};
  struct cordon_exec_request none = {.argv = empty};
  assert_true(cordon_session_exec(s, &none, &res, &err) < 0);
  cordon_error_free(err);
  assert_int_equal(cordon_session_destroy(s, NULL), 0);
}

static void test_failed_create_leaves_nothing(void **state) {
  creates_to_fail = 1;
  struct cordon_manifest m = {0};
  struct cordon_session *s = NULL;
  struct cordon_error *err = NULL;
  assert_true(cordon_session_create(ctx, &fake, &m, &s, &err) < 0);
  assert_non_null(strstr(err->message, "fake refuses"));
  cordon_error_free(err);
  char **ids = NULL;
  assert_int_equal(cordon_session_list(ctx, &ids, NULL), 0);
  assert_null(ids[0]);
  cordon_strv_free(ids);
}

/* A session directory whose state was never written (its creator was killed between the two)
 * is listed, and destroy removes it with what it holds. */
static void test_destroy_removes_stateless_directory(void **state) {
  char dir[PATH_MAX], file[PATH_MAX + 16];
  snprintf(dir, sizeof(dir), "%s/.cordon/sessions/00112233aabbccdd", project);
  assert_int_equal(fs_mkdir_p(dir, 0700, NULL), 0);
  snprintf(file, sizeof(file), "%s/upper", dir);
  assert_int_equal(mkdir(file, 0755), 0);
  char **ids = NULL;
  assert_int_equal(cordon_session_list(ctx, &ids, NULL), 0);
  assert_string_equal(ids[0], "00112233aabbccdd");
  cordon_strv_free(ids);
  struct cordon_registry *reg = NULL;
  assert_int_equal(cordon_registry_load(&reg, NULL), 0);
  assert_int_equal(cordon_session_destroy_id(ctx, reg, "00112233aabbccdd", NULL), 0);
  struct stat st;
  assert_int_equal(stat(dir, &st), -1);
  assert_int_equal(cordon_session_destroy_id(ctx, reg, "00112233aabbccdd", NULL), 0);
  cordon_registry_free(reg);
}

static size_t session_count(void) {
  char **ids = NULL;
  assert_int_equal(cordon_session_list(ctx, &ids, NULL), 0);
  size_t n = 0;
  while (ids[n])
    n++;
  cordon_strv_free(ids);
  return n;
}

/* A backend with `ready`: the batch starts every session first (each told it may return
 * early), then waits for each; a failed wait undoes the whole batch. */
static void test_batch_starts_all_then_waits(void **state) {
  struct cordon_manifest m = {0};
  struct cordon_session *out[4] = {0};
  struct cordon_session_batch batch = {.count = 4};
  struct cordon_error *err = NULL;
  resumes = readies = resumes_deferred = destroys = 0;
  ready_to_fail = SIZE_MAX;
  assert_int_equal(cordon_session_resume_many(ctx, &deferring, &m, "base", &batch, out, &err), 0);
  assert_int_equal(resumes, 4);
  assert_int_equal(resumes_deferred, 4);
  assert_int_equal(resumes_before_first_ready, 4);
  assert_int_equal(readies, 4);
  for (size_t i = 0; i < 4; i++) {
    assert_non_null(out[i]);
    assert_false(out[i]->defer_ready);
    cordon_session_close(out[i]);
  }
  assert_int_equal(session_count(), 4);

  /* The third wait fails: nothing of the batch is left, and the failure names its index. */
  resumes = readies = resumes_deferred = destroys = 0;
  ready_to_fail = 2;
  struct cordon_session *failed[4] = {0};
  assert_true(cordon_session_resume_many(ctx, &deferring, &m, "base", &batch, failed, &err) < 0);
  assert_non_null(strstr(err->message, "fake not ready"));
  assert_int_equal(batch.failed_index, 2);
  assert_int_equal(readies, 3);
  assert_int_equal(destroys, 4);
  for (size_t i = 0; i < 4; i++)
    assert_null(failed[i]);
  assert_int_equal(session_count(), 4);
  cordon_error_free(err);
}

static void test_state_roundtrip_and_corruption(void **state) {
  struct cordon_registry *reg = NULL;
  assert_int_equal(cordon_registry_load(&reg, NULL), 0);
  const struct cordon_backend *wt = NULL;
  assert_int_equal(cordon_registry_find(reg, "worktree", &wt, NULL), 0);
  const char *env[] = {"K=V", NULL};
  struct cordon_manifest m = {.env = env, .default_timeout = 4};
  m.policy.egress = CORDON_EGRESS_OPEN; /* worktree enforces no network class */
  struct cordon_session *s = NULL;
  struct cordon_error *err = NULL;
  assert_int_equal(cordon_session_create(ctx, wt, &m, &s, &err), 0);
  char *id = strdup(s->id);
  char *workspace = strdup(s->workspace);
  cordon_session_close(s);

  struct cordon_session *again = NULL;
  assert_int_equal(cordon_session_open(ctx, reg, id, &again, &err), 0);
  assert_string_equal(again->workspace, workspace);
  assert_string_equal(again->env[0], "K=V");
  assert_true(again->default_timeout == 4);
  cordon_session_close(again);

  /* Every truncation of the state file is refused cleanly as corrupt. */
  char path[1024];
  snprintf(path, sizeof(path), "%s/.cordon/sessions/%s/state.json", project, id);
  unsigned char *text = NULL;
  size_t len = 0;
  assert_int_equal(fs_read_file(path, 1 << 20, &text, &len, NULL), 0);
  for (size_t cut = 0; cut + 1 < len; cut++) {
    assert_int_equal(fs_write_atomic(path, text, cut, 0600, NULL), 0);
    assert_true(cordon_session_open(ctx, reg, id, &again, &err) < 0);
    assert_int_equal(err->kind, CORDON_ERR_INVALID);
    assert_null(strchr(err->message, '\n'));
    cordon_error_free(err);
    err = NULL;
  }
  /* Well-formed JSON that lies is refused too. */
  const char *lies[] = {"[]", "{\"version\":1}", "{\"version\":2,\"id\":\"x\"}"};
  for (size_t i = 0; i < 3; i++) {
    assert_int_equal(fs_write_atomic(path, lies[i], strlen(lies[i]), 0600, NULL), 0);
    assert_true(cordon_session_open(ctx, reg, id, &again, &err) < 0);
    assert_int_equal(err->kind, CORDON_ERR_INVALID);
    cordon_error_free(err);
    err = NULL;
  }
  /* A corrupt session cannot be destroyed blindly: the error names it. */
  assert_true(cordon_session_destroy_id(ctx, reg, id, &err) < 0);
  cordon_error_free(err);
  err = NULL;
  assert_int_equal(fs_write_atomic(path, text, len, 0600, NULL), 0);
  assert_int_equal(cordon_session_destroy_id(ctx, reg, id, &err), 0);
  assert_int_equal(cordon_session_destroy_id(ctx, reg, id, &err), 0);
  struct stat st;
  assert_true(stat(workspace, &st) < 0);
  /* Ids are validated before they touch the filesystem. */
  assert_true(cordon_session_open(ctx, reg, "../../etc", &again, &err) < 0);
  assert_int_equal(err->kind, CORDON_ERR_USAGE);
  cordon_error_free(err);
  free(text);
  free(id);
  free(workspace);
  cordon_registry_free(reg);
}

static void test_registry_and_plugins(void **state) {
  const char *dir = getenv("CORDON_TEST_PLUGIN_DIR");
  if (!dir) {
    print_message("CORDON_TEST_PLUGIN_DIR not set: plugin half skipped\n");
    skip();
  }
  setenv("CORDON_PLUGIN_PATH", dir, 1);
  struct cordon_registry *reg = NULL;
  assert_int_equal(cordon_registry_load(&reg, NULL), 0);
  unsetenv("CORDON_PLUGIN_PATH");
  bool saw_example = false, saw_broken = false, saw_old = false;
  for (size_t i = 0; i < cordon_registry_count(reg); i++) {
    const struct cordon_registry_entry *e = cordon_registry_entry(reg, i);
    if (!strcmp(e->name, "example")) {
      saw_example = e->backend != NULL && e->load_error == NULL;
    }
    if (e->load_error && strstr(e->load_error, "ABI version 999"))
      saw_broken = true;
    /* Built before backends declared what they enforce: refused, named by its file. */
    if (!strcmp(e->name, "cordon-old.so") && !e->backend && e->load_error &&
        strstr(e->load_error, "ABI version 2, cordon speaks 3"))
      saw_old = true;
  }
  assert_true(saw_example);
  assert_true(saw_broken);
  assert_true(saw_old);
  const struct cordon_backend *b = NULL;
  struct cordon_error *err = NULL;
  assert_true(cordon_registry_find(reg, "nosuch", &b, &err) < 0);
  assert_int_equal(err->kind, CORDON_ERR_NOT_FOUND);
  cordon_error_free(err);
  cordon_registry_free(reg);
}

static void test_backend_check(void **state) {
  struct cordon_backend b = fake;
  struct cordon_error *err = NULL;
  assert_int_equal(cordon_backend_check(&b, &err), 0);
  b.abi_version = CORDON_BACKEND_ABI_VERSION + 1;
  assert_true(cordon_backend_check(&b, &err) < 0);
  cordon_error_free(err);
  err = NULL;
  b = fake;
  b.exec = NULL;
  assert_true(cordon_backend_check(&b, &err) < 0);
  cordon_error_free(err);
  err = NULL;
  b = fake;
  b.name = "bad name";
  assert_true(cordon_backend_check(&b, &err) < 0);
  cordon_error_free(err);
  err = NULL;
  b = fake;
  b.capabilities |= CORDON_CAP_SNAPSHOT;
  assert_true(cordon_backend_check(&b, &err) < 0);
  cordon_error_free(err);
  err = NULL;
  b = fake;
  b.enforces |= 1u << CORDON_FEATURE_COUNT; /* a feature this cordon does not know */
  assert_true(cordon_backend_check(&b, &err) < 0);
  assert_non_null(strstr(err->message, "policy features"));
  cordon_error_free(err);
}

/* ---- enforcement: what a manifest asks for against what a backend enforces ---------------- */

static void test_policy_features(void **state) {
  struct cordon_policy p = {0};
  /* Nothing but the egress class, which defaults to none: a request like any other. */
  assert_int_equal(cordon_policy_features(&p), CORDON_FEATURE_NET_NONE);
  p.egress = CORDON_EGRESS_OPEN; /* restricts nothing */
  assert_int_equal(cordon_policy_features(&p), 0);
  const char *one[] = {"x", NULL}, *none[] = {NULL};
  p.read_only = none; /* an empty list asks for nothing */
  assert_int_equal(cordon_policy_features(&p), 0);
  p.read_only = one;
  p.hidden = one;
  p.allow_ro = one;
  p.limits = (struct cordon_limits){
      .memory_bytes = 1, .pids = 1, .cpus = 0.5, .nofile = 1, .fsize_bytes = 1};
  p.egress = CORDON_EGRESS_LOOPBACK;
  uint32_t all = CORDON_FEATURE_READ_ONLY_PATHS | CORDON_FEATURE_HIDDEN_PATHS |
                 CORDON_FEATURE_HOST_GRANTS | CORDON_FEATURE_MEMORY | CORDON_FEATURE_PIDS |
                 CORDON_FEATURE_CPU | CORDON_FEATURE_NOFILE | CORDON_FEATURE_FSIZE |
                 CORDON_FEATURE_NET_LOOPBACK;
  assert_int_equal(cordon_policy_features(&p), all);
  p.egress = CORDON_EGRESS_RESTRICTED;
  assert_true(cordon_policy_features(&p) & CORDON_FEATURE_NET_RESTRICTED);
  p.egress = (enum cordon_egress)42; /* unknown: read as the strictest, never as open */
  assert_true(cordon_policy_features(&p) & CORDON_FEATURE_NET_NONE);

  /* worktree enforces nothing; ns everything (restricted egress too, with its proxy). */
  struct cordon_registry *reg = NULL;
  const struct cordon_backend *wt = NULL, *ns = NULL;
  assert_int_equal(cordon_registry_load(&reg, NULL), 0);
  assert_int_equal(cordon_registry_find(reg, "worktree", &wt, NULL), 0);
  assert_int_equal(cordon_registry_find(reg, "ns", &ns, NULL), 0);
  p.egress = CORDON_EGRESS_NONE;
  assert_int_equal(cordon_backend_unenforced(wt, &p),
                   (all & ~CORDON_FEATURE_NET_LOOPBACK) | CORDON_FEATURE_NET_NONE);
  assert_int_equal(cordon_backend_unenforced(ns, &p), 0);
  p.egress = CORDON_EGRESS_RESTRICTED;
  assert_int_equal(cordon_backend_unenforced(ns, &p), 0);
  /* The default class is loopback where enforced, else the strictest a backend enforces; open
   * when it enforces none. */
  assert_int_equal(cordon_backend_default_egress(wt), CORDON_EGRESS_OPEN);
  assert_int_equal(cordon_backend_default_egress(ns), CORDON_EGRESS_LOOPBACK);
  struct cordon_backend loopback_only = fake;
  loopback_only.enforces = CORDON_FEATURE_NET_LOOPBACK;
  assert_int_equal(cordon_backend_default_egress(&loopback_only), CORDON_EGRESS_LOOPBACK);
  struct cordon_backend none_only = fake;
  none_only.enforces = CORDON_FEATURE_NET_NONE | CORDON_FEATURE_NET_RESTRICTED;
  assert_int_equal(cordon_backend_default_egress(&none_only), CORDON_EGRESS_NONE);
  cordon_registry_free(reg);

  char *names = cordon_features_describe(CORDON_FEATURE_MEMORY | CORDON_FEATURE_NET_NONE);
  assert_string_equal(names, "memory, net_none");
  free(names);
  names = cordon_features_describe(0);
  assert_string_equal(names, "");
  free(names);
  for (unsigned i = 0; i < CORDON_FEATURE_COUNT; i++)
    assert_string_not_equal(cordon_feature_name(1u << i), "unknown");
  assert_string_equal(cordon_feature_name(1u << CORDON_FEATURE_COUNT), "unknown");
}

static int count_entries(const struct cordon_audit_entry *e, void *userdata) {
  size_t *n = userdata;
  assert_string_equal(e->event, "enforcement.waived");
  assert_string_equal(e->resource_type, "session");
  assert_string_equal(e->details_json, "{\"backend\":\"fake\",\"features\":[\"read_only_paths\","
                                       "\"memory\"]}");
  (*n)++;
  return 0;
}

static void test_unenforced_refused_or_audited(void **state) {
  char keys[PATH_MAX];
  snprintf(keys, sizeof(keys), "%s/keys", project);
  setenv("CORDON_KEY_DIR", keys, 1);
  const char *ro[] = {"src", NULL};
  struct cordon_manifest m = {0};
  m.policy.read_only = ro;
  m.policy.limits.memory_bytes = 64u << 20;
  m.policy.require_enforcement = true;
  struct cordon_session *s = NULL;
  struct cordon_error *err = NULL;
  /* Refused by name, before the backend or the state directory is touched. */
  size_t before = creates;
  assert_true(cordon_session_create(ctx, &fake, &m, &s, &err) < 0);
  assert_int_equal(err->kind, CORDON_ERR_DENIED);
  assert_non_null(strstr(err->message, "backend fake does not enforce read_only_paths, memory"));
  assert_null(strchr(err->message, '\n'));
  cordon_error_free(err);
  err = NULL;
  assert_int_equal(creates, before);
  assert_int_equal(session_count(), 0);
  char audit_dir[PATH_MAX];
  snprintf(audit_dir, sizeof(audit_dir), "%s/.cordon/audit", project);
  struct stat st;
  assert_true(stat(audit_dir, &st) < 0);
  /* A batch is refused once, as itself, not as its first session's failure. */
  struct cordon_backend snap = fake;
  snap.capabilities |= CORDON_CAP_SNAPSHOT;
  snap.resume = deferring_resume;
  snap.snapshot = deferring_snapshot;
  struct cordon_session *batch_out[2] = {0};
  struct cordon_session_batch batch = {.count = 2};
  assert_true(cordon_session_resume_many(ctx, &snap, &m, "00", &batch, batch_out, &err) < 0);
  assert_int_equal(err->kind, CORDON_ERR_DENIED);
  assert_int_equal(batch.failed_index, SIZE_MAX);
  cordon_error_free(err);
  err = NULL;

  /* Waived: it runs, and the project's audit chain says what was waived, for which session. */
  m.policy.require_enforcement = false;
  assert_int_equal(cordon_session_create(ctx, &fake, &m, &s, &err), 0);
  assert_int_equal(creates, before + 1);
  struct cordon_audit_log *log = NULL;
  assert_int_equal(cordon_audit_open_project(ctx, NULL, &log, NULL), 0);
  size_t n = 0;
  assert_int_equal(cordon_audit_foreach(log, count_entries, &n, NULL), 0);
  assert_int_equal(n, 1);
  struct cordon_audit_report report;
  assert_int_equal(cordon_audit_verify(log, &report, NULL), 0);
  assert_int_equal(report.problem, CORDON_AUDIT_OK);
  char id[CORDON_PROJECT_ID_HEX_LEN + 1];
  assert_int_equal(cordon_context_project_id(ctx, false, id, NULL), 1);
  assert_string_equal(report.project_id, id);
  cordon_audit_report_clear(&report);
  cordon_audit_close(log);
  /* The session's state records what it may touch, the waiver included (session inspect). */
  json_t *detail = session_json_detail(s);
  char *policy = json_dumps(json_object_get(detail, "policy"), JSON_COMPACT | JSON_SORT_KEYS);
  assert_string_equal(policy,
                      "{\"allow_ro\":[],\"devices\":[],\"hidden\":[],\"limits\":{\"cpus\":0.0,"
                      "\"fsize_bytes\":0,\"memory_bytes\":67108864,\"nofile\":0,\"pids\":0,"
                      "\"tmp_bytes\":0},\"net\":\"none\",\"read_only\":[\"src\"],"
                      "\"require_enforcement\":false,\"user\":\"sandbox\",\"waived\":["
                      "\"read_only_paths\",\"memory\"]}");
  free(policy);
  json_decref(detail);
  assert_int_equal(cordon_session_destroy(s, NULL), 0);

  /* A waiver that cannot be recorded is no waiver: nothing starts. */
  setenv("CORDON_KEY_DIR", "relative/keys", 1);
  before = creates;
  assert_true(cordon_session_create(ctx, &fake, &m, &s, &err) < 0);
  assert_non_null(strstr(err->message, "cannot be recorded in the audit log"));
  assert_int_equal(creates, before);
  assert_int_equal(session_count(), 0);
  cordon_error_free(err);
  unsetenv("CORDON_KEY_DIR");
}

/* What a manifest lets a session touch, as recorded (pure): every field, and "unlimited" for an
 * fsize asked to have no limit. */
static void test_policy_json(void **state) {
  (void)state;
  const char *ro[] = {"a", NULL}, *hide[] = {"b/c", NULL}, *grant[] = {"/opt/x", NULL};
  const char *devices[] = {"/dev/null:/dev/n", NULL}, *domains[] = {"*.z.test", NULL};
  const char *cidrs[] = {"10.0.0.0/8", NULL}, *pins[] = {"a.test:127.0.0.1", NULL};
  struct cordon_egress_rules rules = {domains, cidrs, pins};
  struct cordon_manifest m = {.image = "img:1",
                              .monitor = "qemu",
                              .devices = devices,
                              .user_root = true,
                              .egress_rules = &rules};
  m.policy = (struct cordon_policy){.read_only = ro,
                                    .hidden = hide,
                                    .allow_ro = grant,
                                    .egress = CORDON_EGRESS_RESTRICTED,
                                    .require_enforcement = true};
  m.policy.limits = (struct cordon_limits){.memory_bytes = 1,
                                           .pids = 2,
                                           .cpus = 0.5,
                                           .nofile = 3,
                                           .fsize_bytes = CORDON_LIMIT_UNLIMITED,
                                           .tmp_bytes = 4};
  json_t *j = session_policy_json(&m, CORDON_FEATURE_NET_RESTRICTED);
  char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
  assert_string_equal(
      text, "{\"allow_ro\":[\"/opt/x\"],\"devices\":[\"/dev/null:/dev/n\"],\"egress\":{"
            "\"allow_cidrs\":[\"10.0.0.0/8\"],\"allow_domains\":[\"*.z.test\"],\"resolve\":["
            "\"a.test:127.0.0.1\"]},\"hidden\":[\"b/c\"],\"image\":\"img:1\",\"limits\":{"
            "\"cpus\":0.5,\"fsize_bytes\":\"unlimited\",\"memory_bytes\":1,\"nofile\":3,"
            "\"pids\":2,\"tmp_bytes\":4},\"monitor\":\"qemu\",\"net\":\"restricted\","
            "\"read_only\":[\"a\"],\"require_enforcement\":true,\"user\":\"root\",\"waived\":["
            "\"net_restricted\"]}");
  free(text);
  /* What a reader may rely on: this form, and nothing else. A state file is the user's to
   * edit, so every key of the wrong type, a missing one or an unknown one is refused. */
  assert_true(session_policy_valid(j));
  struct cordon_manifest plain = {0};
  json_t *defaults = session_policy_json(&plain, 0);
  assert_true(session_policy_valid(defaults));
  json_decref(defaults);
  const char *const broken[] = {
      "{\"net\":5}",
      "{\"user\":\"admin\"}",
      "{\"read_only\":[1]}",
      "{\"hidden\":\"b/c\"}",
      "{\"waived\":null}",
      "{\"limits\":{}}",
      "{\"image\":[]}",
      "{\"egress\":{\"resolve\":[]}}",
      "{\"require_enforcement\":1}",
      "{\"surprise\":true}",
  };
  for (size_t i = 0; i < sizeof(broken) / sizeof(broken[0]); i++) {
    json_t *bad = json_deep_copy(j), *patch = json_loads(broken[i], 0, NULL);
    assert_non_null(patch);
    assert_int_equal(json_object_update(bad, patch), 0);
    assert_false(session_policy_valid(bad));
    json_decref(patch);
    json_decref(bad);
  }
  json_t *fsize = json_deep_copy(j);
  json_object_set_new(json_object_get(fsize, "limits"), "fsize_bytes", json_string("lots"));
  assert_false(session_policy_valid(fsize));
  json_object_del(fsize, "limits");
  assert_false(session_policy_valid(fsize));
  json_decref(fsize);
  assert_false(session_policy_valid(NULL));
  json_decref(j);
}

/* The one check of a session id's form: what cordon makes passes; anything that could be
 * more than one path component, or is empty or too long, does not. */
static void test_session_id_form(void **state) {
  (void)state;
  char *made = NULL;
  assert_int_equal(fs_random_hex(8, &made, NULL), 0);
  assert_true(cordon_session_id_valid(made));
  free(made);
  assert_true(cordon_session_id_valid("run-0123abcd"));
  char longest[CORDON_SESSION_ID_MAX + 2];
  memset(longest, 'a', sizeof(longest));
  longest[CORDON_SESSION_ID_MAX] = 0;
  assert_true(cordon_session_id_valid(longest));
  longest[CORDON_SESSION_ID_MAX] = 'a';
  longest[CORDON_SESSION_ID_MAX + 1] = 0;
  assert_false(cordon_session_id_valid(longest));
  const char *bad[] = {"", "..", "a/b", "ABC", "a b", "a.b", "x\n"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    assert_false(cordon_session_id_valid(bad[i]));
  assert_false(cordon_session_id_valid(NULL));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_paths_reach_backend_normalised, setup, teardown),
      cmocka_unit_test(test_policy_features),
      cmocka_unit_test(test_policy_json),
      cmocka_unit_test_setup_teardown(test_unenforced_refused_or_audited, setup, teardown),
      cmocka_unit_test_setup_teardown(test_exec_environment_and_timeout, setup, teardown),
      cmocka_unit_test_setup_teardown(test_failed_create_leaves_nothing, setup, teardown),
      cmocka_unit_test_setup_teardown(test_batch_starts_all_then_waits, setup, teardown),
      cmocka_unit_test_setup_teardown(test_destroy_removes_stateless_directory, setup, teardown),
      cmocka_unit_test_setup_teardown(test_state_roundtrip_and_corruption, setup, teardown),
      cmocka_unit_test_setup_teardown(test_registry_and_plugins, setup, teardown),
      cmocka_unit_test(test_backend_check),
      cmocka_unit_test(test_session_id_form),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
