/* Unit tests of the ns holder's configuration as bytes (src/backends/ns/config.c), which a
 * caller with threads hands to the spawner it execs afresh: a round trip keeps every field
 * (trees, lists, identity, limits, fds, the HMAC's keyed state), anything malformed is refused
 * by name without a leak, and a hand-made argv is a usage error. No root, no namespaces. */
#include <errno.h>
#include <gnu/libc-version.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/sha.h>

#include "backends/ns/config.h"
#include "base/cleanup.h"
#include "base/fs.h"
#include "base/proc.h"
#include "crypto/digest.h"

static const char *const ro_paths[] = {"docs", "a b", NULL};
static const char *const none[] = {NULL};
static const char *const hidden_host_dirs[] = {"/home/u/.cordon", NULL};

static struct confine_tree trees[] = {
    {.target = "/usr", .source = "/usr", .tree_fd = 7, .is_dir = true},
    {.target = "/lib", .link = "usr/lib", .tree_fd = -1},
    {.target = "/etc/hosts", .source = "/etc/hosts", .tree_fd = -1, .is_dir = false},
};
static struct confine_tree volumes[] = {
    {.target = "/data", .source = "/srv/data", .tree_fd = 9, .is_dir = true, .writable = true},
};

static struct ns_holder_config sample(struct crypto_hmac *auth) {
  struct ns_holder_config c = {
      .identity = {.uid = 1000, .gid = 1001, .can_setgroups = true},
      .outer_uid = 70000,
      .outer_gid = 70001,
      .rootless = false,
      .rlimits = {.nofile = 4096, .fsize = 1 << 30},
      .new_network = true,
      .loopback = true,
      .listen_fd = 11,
      .cgroup_fd = 12,
      .cgroup_join_fds = {13, -1, 14, -1},
      .memory_join_fd = -1,
      .oom_shield = true,
      .auth = auth,
      .client_uid = 65534,
      .socket_file_fd = 15,
      .cpus_visible = 2,
      .egress_fd = -1,
  };
  c.root = (struct confine_root_spec){
      .staging = "/tmp",
      .trees = trees,
      .n_trees = 3,
      .workspace = {.target = "/workspace", .source = "/p/ws", .tree_fd = 8, .is_dir = true},
      .ro_paths = ro_paths,
      .hidden_dirs = none,
      .hidden_files = NULL,
      .hidden_host_dirs = hidden_host_dirs,
      .passwd = "cordon:x:1000:1001::/home/cordon:/bin/sh\n",
      .group = NULL,
      .deny_user_namespaces = true,
      .tmp_bytes = (uint64_t)3 << 32,
      .volumes = volumes,
      .n_volumes = 1,
      .home = {.target = "/home/cordon", .source = "/p/home", .tree_fd = 10, .is_dir = true},
      .workspace_read_only = true,
      .devices = NULL,
      .n_devices = 0,
  };
  return c;
}

static void tree_equal(const struct confine_tree *a, const struct confine_tree *b) {
  if (a->target || b->target)
    assert_string_equal(a->target, b->target);
  if (a->source || b->source)
    assert_string_equal(a->source, b->source);
  else
    assert_null(b->source);
  if (a->link || b->link)
    assert_string_equal(a->link, b->link);
  else
    assert_null(b->link);
  assert_int_equal(a->tree_fd, b->tree_fd);
  assert_int_equal(a->is_dir, b->is_dir);
  assert_int_equal(a->writable, b->writable);
}

static void strv_equal(const char *const *a, const char *const *b) {
  if (!a) {
    assert_null(b);
    return;
  }
  assert_non_null(b);
  size_t i = 0;
  for (; a[i]; i++)
    assert_string_equal(a[i], b[i]);
  assert_null(b[i]);
}

static int memfd_with(const char *text) {
  int fd = memfd_create("test", MFD_CLOEXEC);
  assert_true(fd >= 0);
  assert_int_equal(fs_write_all(fd, text, strlen(text)), 0);
  assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
  return fd;
}

static char *saved_text(const struct ns_holder_config *c) {
  int fd = memfd_create("test", MFD_CLOEXEC);
  struct cordon_error *err = NULL;
  assert_int_equal(ns_holder_config_save(c, fd, &err), 0);
  unsigned char *text = NULL;
  size_t length = 0;
  assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
  assert_int_equal(fs_read_fd(fd, 1 << 20, &text, &length, &err), 0);
  close(fd);
  return (char *)text;
}

/* c saved, then loaded back */
static struct ns_holder_config *reloaded(const struct ns_holder_config *c) {
  char *text = saved_text(c);
  int fd = memfd_with(text);
  free(text);
  struct ns_holder_config *got = NULL;
  struct cordon_error *err = NULL;
  if (ns_holder_config_load(fd, &got, &err) < 0)
    fail_msg("%s", err->message);
  close(fd);
  return got;
}

static struct crypto_hmac *keyed(const char *key) {
  struct crypto_hmac *auth = NULL;
  struct cordon_error *err = NULL;
  assert_int_equal(crypto_hmac_new((const uint8_t *)key, strlen(key), &auth, &err), 0);
  return auth;
}

static void test_round_trip(void **state) {
  (void)state;
  struct cordon_error *err = NULL;
  struct crypto_hmac *auth = keyed("k3y");
  struct ns_holder_config c = sample(auth);
  struct ns_holder_config *got = reloaded(&c);

  const struct confine_root_spec *a = &c.root, *b = &got->root;
  assert_string_equal(a->staging, b->staging);
  assert_int_equal(b->n_trees, 3);
  for (size_t i = 0; i < 3; i++)
    tree_equal(&a->trees[i], &b->trees[i]);
  tree_equal(&a->workspace, &b->workspace);
  strv_equal(a->ro_paths, b->ro_paths);
  strv_equal(a->hidden_dirs, b->hidden_dirs); /* empty, not NULL */
  strv_equal(a->hidden_files, b->hidden_files);
  strv_equal(a->hidden_host_dirs, b->hidden_host_dirs);
  assert_string_equal(a->passwd, b->passwd);
  assert_null(b->group);
  assert_true(b->deny_user_namespaces);
  assert_int_equal(b->tmp_bytes, a->tmp_bytes);
  assert_int_equal(b->n_volumes, 1);
  tree_equal(&a->volumes[0], &b->volumes[0]);
  tree_equal(&a->home, &b->home);
  assert_true(b->workspace_read_only);
  assert_int_equal(b->n_devices, 0);
  assert_null(b->devices);

  assert_int_equal(got->identity.uid, 1000);
  assert_int_equal(got->identity.gid, 1001);
  assert_true(got->identity.can_setgroups);
  assert_int_equal(got->outer_uid, 70000);
  assert_int_equal(got->outer_gid, 70001);
  assert_false(got->rootless);
  assert_int_equal(got->rlimits.nofile, 4096);
  assert_int_equal(got->rlimits.fsize, 1 << 30);
  assert_true(got->new_network && got->loopback && got->oom_shield);
  assert_int_equal(got->listen_fd, 11);
  assert_int_equal(got->cgroup_fd, 12);
  assert_memory_equal(got->cgroup_join_fds, c.cgroup_join_fds, sizeof(c.cgroup_join_fds));
  assert_int_equal(got->memory_join_fd, -1);
  assert_int_equal(got->client_uid, 65534);
  assert_int_equal(got->socket_file_fd, 15);
  assert_int_equal(got->cpus_visible, 2);
  assert_int_equal(got->egress_fd, -1);

  /* The keyed state answers as the key does. */
  uint8_t want[CRYPTO_SHA256_LEN], have[CRYPTO_SHA256_LEN];
  assert_int_equal(crypto_hmac_2(auth, "chal", 4, "lenge", 5, want, &err), 0);
  assert_int_equal(crypto_hmac_2(got->auth, "chal", 4, "lenge", 5, have, &err), 0);
  assert_memory_equal(want, have, sizeof(want));

  /* The fds it carries: every tree's, then the others, never a -1. */
  int fds[32];
  assert_int_equal(ns_holder_config_fds(got, NULL), 9);
  size_t n = ns_holder_config_fds(got, fds);
  int expected[] = {7, 8, 9, 10, 11, 12, 13, 14, 15};
  assert_int_equal(n, ARRAY_SIZE(expected));
  assert_memory_equal(fds, expected, sizeof(expected));
  ns_holder_config_free(got);
  crypto_hmac_free(auth);
}

static void test_no_auth_no_lists(void **state) {
  (void)state;
  struct ns_holder_config c = sample(NULL);
  c.root.ro_paths = c.root.hidden_host_dirs = NULL;
  c.root.trees = NULL;
  c.root.n_trees = 0;
  struct ns_holder_config *got = reloaded(&c);
  assert_null(got->auth);
  assert_null(got->root.ro_paths);
  assert_int_equal(got->root.n_trees, 0);
  ns_holder_config_free(got);
}

/* text with the first occurrence of from replaced by to */
static char *replaced(const char *text, const char *from, const char *to) {
  const char *at = strstr(text, from);
  assert_non_null(at);
  char *out = NULL;
  assert_true(asprintf(&out, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from)) > 0);
  return out;
}

static void expect_malformed(const char *text) {
  int fd = memfd_with(text);
  struct ns_holder_config *got = NULL;
  struct cordon_error *err = NULL;
  assert_int_equal(ns_holder_config_load(fd, &got, &err), -1);
  close(fd);
  assert_null(got);
  assert_int_equal(err->kind, CORDON_ERR_INVALID);
  assert_non_null(strstr(err->message, "malformed"));
  cordon_error_free(err);
}

static void test_malformed_refused(void **state) {
  (void)state;
  struct crypto_hmac *auth = keyed("k");
  struct ns_holder_config c = sample(auth);
  char *text = saved_text(&c);
  crypto_hmac_free(auth);
  const char *edits[][2] = {
      {"\"listen_fd\":11", "\"listen_fd\":-2"},
      {"\"listen_fd\":11", "\"listen_fd\":4294967296"},
      {"\"listen_fd\":11", "\"listen_fd\":\"11\""},
      {"\"outer_uid\":70000", "\"outer_uid\":-1"},
      {"\"cpus_visible\":2", "\"cpus_visible\":-2"},
      {"\"cgroup_join_fds\":[13,-1,14,-1]", "\"cgroup_join_fds\":[13,-1,14]"},
      {"\"cgroup_join_fds\":[13,-1,14,-1]", "\"cgroup_join_fds\":[13,-1,14,null]"},
      {"\"ro_paths\":[\"docs\"", "\"ro_paths\":[7"},
      {"\"staging\":\"/tmp\"", "\"staging\":7"},
      {"\"tree_fd\":7", "\"tree_fd\":7,\"extra\":1"},
      {"\"auth\":\"", "\"auth\":\"00"},
      {"\"auth\":\"", "\"auth\":\"zz"},
      {"\"rootless\":false", "\"rootless\":false,\"unknown\":true"},
      {"\"trees\":[", "\"trees\":{\"a\":["},
      {"\"tmp_bytes\":", "\"tmp_bytes\":-"},
  };
  for (size_t i = 0; i < ARRAY_SIZE(edits); i++) {
    char *bad = replaced(text, edits[i][0], edits[i][1]);
    expect_malformed(bad);
    free(bad);
  }
  /* Cut short, empty, not JSON. */
  text[strlen(text) / 2] = 0;
  expect_malformed(text);
  expect_malformed("");
  expect_malformed("[]");
  free(text);
}

static void test_hand_made_argv(void **state) {
  (void)state;
  int pipes[2];
  assert_int_equal(pipe(pipes), 0);
  char good[64];
  snprintf(good, sizeof(good), "%d,%d,%d", pipes[0], pipes[1], pipes[0]); /* memfd: a pipe */
  const char *cases[] = {"", "1,2", "x", "3,4,5,6,7,8,9", good, "-1,3,3"};
  for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
    char *argv[] = {"prog", "--flag", (char *)cases[i], NULL};
    int extra[2];
    struct ns_holder_config *cfg = NULL;
    struct cordon_error *err = NULL;
    assert_int_equal(ns_holder_config_from_argv(argv, extra, 2, &cfg, &err), -1);
    assert_int_equal(err->kind, CORDON_ERR_USAGE);
    assert_non_null(strstr(err->message, "--flag is cordon's own"));
    cordon_error_free(err);
  }
  close(pipes[0]);
  close(pipes[1]);
}

/* A keyed state's bytes come back only as a keyed HMAC left them: a half with a block offset,
 * a length or a digest size of its own is refused (the first would send SHA256_Update's copy
 * out of bounds). */
static void test_hmac_state_refused(void **state) {
  (void)state;
  struct crypto_hmac *auth = keyed("k3y"), *back = NULL;
  size_t n = crypto_hmac_state_length();
  assert_int_equal(n, 2 * sizeof(SHA256_CTX));
  uint8_t good[2 * sizeof(SHA256_CTX)];
  crypto_hmac_state(auth, good);
  assert_int_equal(crypto_hmac_from_state(good, n, &back, NULL), 0);
  crypto_hmac_free(back);
  for (int half = 0; half < 2; half++)
    for (int field = 0; field < 4; field++) {
      uint8_t bad[sizeof(good)];
      memcpy(bad, good, sizeof(bad));
      SHA256_CTX c;
      memcpy(&c, bad + half * sizeof(c), sizeof(c));
      if (field == 0)
        c.num = 64;
      else if (field == 1)
        c.Nl += 8;
      else if (field == 2)
        c.Nh = 1;
      else
        c.md_len = 28;
      memcpy(bad + half * sizeof(c), &c, sizeof(c));
      struct cordon_error *err = NULL;
      back = NULL;
      assert_int_equal(crypto_hmac_from_state(bad, n, &back, &err), -1);
      assert_null(back);
      assert_int_equal(err->kind, CORDON_ERR_INVALID);
      cordon_error_free(err);
    }
  struct cordon_error *err = NULL;
  assert_int_equal(crypto_hmac_from_state(good, n - 1, &back, &err), -1);
  cordon_error_free(err);
  crypto_hmac_free(auth);
}

/* The spawner is exec'd only where its code is the program's own (proc_in_executable). */
static void test_in_executable(void **state) {
  (void)state;
  static int here;
  assert_true(proc_in_executable((const void *)test_in_executable));
  assert_true(proc_in_executable(&here));
  assert_true(proc_in_executable((const void *)ns_holder_config_exec)); /* libcordon, static */
  /* A string of libc's, a shared object. */
  assert_false(proc_in_executable(gnu_get_libc_version()));
  assert_false(proc_in_executable(NULL));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trip),        cmocka_unit_test(test_no_auth_no_lists),
      cmocka_unit_test(test_malformed_refused), cmocka_unit_test(test_hand_made_argv),
      cmocka_unit_test(test_in_executable),     cmocka_unit_test(test_hmac_state_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
