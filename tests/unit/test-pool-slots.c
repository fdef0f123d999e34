/* Unit tests of a pool's slot table, dispatch queue, warm slots and worker documents
 * (src/pool/slots.c, queue.c, warm.c, worker.c):
 * the pure classification and record forms, the dispatch document and its id, and the table
 * and queue on a scratch directory (a holder that dies frees its slot; a slot tied to a session
 * stays held until the session's directory is gone; a claim is taken once). */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/fs.h"
#include "pool/queue.h"
#include "pool/slots.h"
#include "pool/warm.h"
#include "pool/worker.h"

#include <cordon/keys.h>

static void test_classify(void **state) {
  (void)state;
  struct pool_slot_record with = {.pid = 1, .session = "abcd"}, without = {.pid = 1};
  assert_int_equal(pool_slot_classify(true, false, NULL, false), POOL_SLOT_PROCESS);
  assert_int_equal(pool_slot_classify(true, false, &with, true), POOL_SLOT_PROCESS);
  assert_int_equal(pool_slot_classify(false, false, &with, true), POOL_SLOT_SESSION);
  assert_int_equal(pool_slot_classify(false, false, &with, false), POOL_SLOT_FREE);
  assert_int_equal(pool_slot_classify(false, false, &without, false), POOL_SLOT_FREE);
  assert_int_equal(pool_slot_classify(false, false, NULL, false), POOL_SLOT_FREE);
  assert_int_equal(pool_slot_classify(false, true, NULL, false), POOL_SLOT_DAMAGED);
}

static void test_record_forms(void **state) {
  (void)state;
  struct pool_slot_record r = {.pid = 42, .session = "0123456789abcdef"}, back;
  char *text = NULL;
  struct cordon_error *err = NULL;
  assert_int_equal(pool_slot_record_format(&r, &text, &err), 0);
  assert_string_equal(text, "{\"pid\":42,\"session\":\"0123456789abcdef\"}");
  assert_int_equal(pool_slot_record_parse(text, strlen(text), &back, &err), 0);
  assert_int_equal(back.pid, 42);
  assert_string_equal(back.session, "0123456789abcdef");
  free(text);
  const char *bad[] = {"",
                       "[]",
                       "{\"pid\":1}",
                       "{\"pid\":-1,\"session\":null}",
                       "{\"pid\":1,\"session\":\"../x\"}",
                       "{\"pid\":1,\"session\":null,\"x\":1}",
                       "{\"pid\":\"1\",\"session\":null}"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    assert_int_equal(pool_slot_record_parse(bad[i], strlen(bad[i]), &back, &err), -1);
    assert_non_null(err);
    cordon_error_free(err);
    err = NULL;
  }
  const char *no_session = "{\"pid\":7,\"session\":null}";
  assert_int_equal(pool_slot_record_parse(no_session, strlen(no_session), &back, &err), 0);
  assert_string_equal(back.session, "");
}

static const char NONCE[] = "00112233445566778899aabbccddeeff";

static void test_dispatch_document(void **state) {
  (void)state;
  const char *argv[] = {"echo", "hé", NULL};
  json_t *recipe = json_pack("{s:s,s:{}}", "pool", "p", "overrides");
  struct pool_dispatch a, b, c;
  struct cordon_error *err = NULL;
  assert_int_equal(pool_dispatch_build("p", recipe, argv, NONCE, &a, &err), 0);
  assert_string_equal(a.canonical,
                      "{\"argv\":[\"echo\",\"hé\"],\"nonce\":\"00112233445566778899aabbccddeeff\","
                      "\"pool\":\"p\",\"recipe\":{\"overrides\":{},\"pool\":\"p\"},"
                      "\"type\":\"cordon.pool.dispatch\"}");
  /* The id is the hash of the bytes: the same parts give the same id, a nonce another. */
  assert_int_equal(pool_dispatch_build("p", recipe, argv, NONCE, &b, &err), 0);
  assert_string_equal(a.id, b.id);
  pool_dispatch_clear(&b);
  assert_int_equal(
      pool_dispatch_build("p", recipe, argv, "ffffffffffffffffffffffffffffffff", &b, &err), 0);
  assert_string_not_equal(a.id, b.id);
  pool_dispatch_clear(&b);
  /* Round trip, and one flipped byte is caught by the id. */
  assert_int_equal(pool_dispatch_parse(a.canonical, a.canonical_length, a.id, &c, &err), 0);
  assert_string_equal(c.argv[1], "hé");
  assert_non_null(c.recipe);
  pool_dispatch_clear(&c);
  char *flipped = strdup(a.canonical);
  flipped[strlen("{\"argv\":[\"e")] = 'x';
  assert_int_equal(pool_dispatch_parse(flipped, a.canonical_length, a.id, &c, &err), -1);
  assert_int_equal(err->kind, CORDON_ERR_INTEGRITY);
  cordon_error_free(err);
  err = NULL;
  free(flipped);
  /* Not canonical: refused even when the content is right. */
  const char *spaced = "{\"argv\":[\"x\"], \"nonce\":\"00112233445566778899aabbccddeeff\","
                       "\"pool\":\"p\",\"recipe\":null,\"type\":\"cordon.pool.dispatch\"}";
  assert_int_equal(pool_dispatch_parse(spaced, strlen(spaced), NULL, &c, &err), -1);
  cordon_error_free(err);
  err = NULL;
  /* Bad parts. */
  const char *none[] = {NULL};
  assert_int_equal(pool_dispatch_build("p", NULL, none, NONCE, &c, &err), -1);
  cordon_error_free(err);
  err = NULL;
  assert_int_equal(pool_dispatch_build("../p", NULL, argv, NONCE, &c, &err), -1);
  cordon_error_free(err);
  err = NULL;
  assert_int_equal(pool_dispatch_build("p", NULL, argv, "xyz", &c, &err), -1);
  cordon_error_free(err);
  err = NULL;
  pool_dispatch_clear(&a);
  json_decref(recipe);
}

static char *scratch(void) {
  char *dir = strdup("/tmp/cordon-test-pool-XXXXXX");
  assert_non_null(mkdtemp(dir));
  return dir;
}

static void remove_scratch(char *dir) {
  struct cordon_error *err = NULL;
  fs_remove_tree(dir, &err);
  cordon_error_free(err);
  free(dir);
}

static void test_slot_table(void **state) {
  (void)state;
  char *dir = scratch();
  struct cordon_error *err = NULL;
  struct pool_slot *a = NULL, *b = NULL, *c = NULL;
  assert_int_equal(pool_slot_acquire(dir, "p", 2, NULL, &a, &err), 0);
  assert_int_equal(pool_slot_acquire(dir, "p", 2, NULL, &b, &err), 0);
  assert_int_not_equal(pool_slot_index(a), pool_slot_index(b));
  /* The third is refused, by policy (exit 4), naming the ceiling. */
  assert_int_equal(pool_slot_acquire(dir, "p", 2, NULL, &c, &err), -1);
  assert_int_equal(err->kind, CORDON_ERR_DENIED);
  assert_non_null(strstr(err->message, "2 of 2"));
  cordon_error_free(err);
  err = NULL;
  /* Another pool has its own table. */
  assert_int_equal(pool_slot_acquire(dir, "q", 1, NULL, &c, &err), 0);
  pool_slot_release(c);
  /* A release frees the slot. */
  pool_slot_release(a);
  assert_int_equal(pool_slot_acquire(dir, "p", 2, NULL, &a, &err), 0);
  /* A shrunk ceiling counts the slots already held past it. */
  assert_int_equal(pool_slot_acquire(dir, "p", 1, NULL, &c, &err), -1);
  cordon_error_free(err);
  err = NULL;
  struct pool_slot_usage usage;
  assert_int_equal(pool_slot_usage(dir, "p", &usage, &err), 0);
  assert_int_equal(usage.held, 2);
  pool_slot_release(a);
  pool_slot_release(b);
  assert_int_equal(pool_slot_usage(dir, "p", &usage, &err), 0);
  assert_int_equal(usage.held, 0);
  assert_int_equal(pool_slot_usage(dir, "absent", &usage, &err), 0);
  assert_int_equal(usage.held, 0);
  remove_scratch(dir);
}

static void test_slot_holder_death(void **state) {
  (void)state;
  char *dir = scratch();
  struct cordon_error *err = NULL;
  int ready[2];
  assert_int_equal(pipe(ready), 0);
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    struct pool_slot *s = NULL;
    if (pool_slot_acquire(dir, "p", 1, NULL, &s, NULL) < 0)
      _exit(1);
    (void)!write(ready[1], "x", 1);
    pause(); /* killed holding the slot */
    _exit(0);
  }
  close(ready[1]);
  char byte;
  assert_int_equal(read(ready[0], &byte, 1), 1);
  close(ready[0]);
  struct pool_slot *s = NULL;
  assert_int_equal(pool_slot_acquire(dir, "p", 1, NULL, &s, &err), -1);
  cordon_error_free(err);
  err = NULL;
  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  /* Nobody cleaned up: the dead holder's flock went with it. */
  assert_int_equal(pool_slot_acquire(dir, "p", 1, NULL, &s, &err), 0);
  pool_slot_release(s);
  remove_scratch(dir);
}

static void test_slot_wait(void **state) {
  (void)state;
  char *dir = scratch();
  struct cordon_error *err = NULL;
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    struct pool_slot *s = NULL;
    if (pool_slot_acquire(dir, "p", 1, NULL, &s, NULL) < 0)
      _exit(1);
    usleep(300 * 1000);
    _exit(0); /* exits holding it: the kernel frees it */
  }
  /* Wait until the child holds it. */
  struct pool_slot_usage usage = {0};
  for (int i = 0; i < 200 && usage.held == 0; i++) {
    usleep(10 * 1000);
    assert_int_equal(pool_slot_usage(dir, "p", &usage, &err), 0);
  }
  assert_int_equal(usage.held, 1);
  struct pool_slot *s = NULL;
  struct pool_slot_options opts = {.wait_seconds = 0.05};
  assert_int_equal(pool_slot_acquire(dir, "p", 1, &opts, &s, &err), -1);
  cordon_error_free(err);
  err = NULL;
  double start = fs_now();
  opts.wait_seconds = 10;
  assert_int_equal(pool_slot_acquire(dir, "p", 1, &opts, &s, &err), 0);
  assert_true(fs_now() - start < 9);
  pool_slot_release(s);
  waitpid(child, NULL, 0);
  remove_scratch(dir);
}

static void test_slot_bound_to_session(void **state) {
  (void)state;
  char *dir = scratch();
  struct cordon_error *err = NULL;
  char *session = NULL;
  assert_true(asprintf(&session, "%s/sessions/0123456789abcdef", dir) > 0);
  assert_int_equal(fs_mkdir_p(session, 0700, &err), 0);
  struct pool_slot *s = NULL;
  assert_int_equal(pool_slot_acquire(dir, "p", 1, NULL, &s, &err), 0);
  assert_int_equal(pool_slot_bind_session(s, "0123456789abcdef", &err), 0);
  assert_int_equal(pool_slot_bind_session(s, "../../x", &err), -1);
  cordon_error_free(err);
  err = NULL;
  pool_slot_release(s); /* the creating process is gone; the session lives on */
  assert_int_equal(pool_slot_acquire(dir, "p", 1, NULL, &s, &err), -1);
  cordon_error_free(err);
  err = NULL;
  struct pool_slot_usage usage;
  assert_int_equal(pool_slot_usage(dir, "p", &usage, &err), 0);
  assert_int_equal(usage.sessions, 1);
  /* The session ends: its directory goes, and the slot with it. */
  assert_int_equal(fs_remove_tree(session, &err), 0);
  assert_int_equal(pool_slot_acquire(dir, "p", 1, NULL, &s, &err), 0);
  pool_slot_release(s);
  free(session);
  remove_scratch(dir);
}

static void test_slot_damaged_record(void **state) {
  (void)state;
  char *dir = scratch();
  struct cordon_error *err = NULL;
  struct pool_slot *s = NULL;
  assert_int_equal(pool_slot_acquire(dir, "p", 1, NULL, &s, &err), 0);
  assert_int_equal(pool_slot_bind_session(s, "0123456789abcdef", &err), 0);
  pool_slot_release(s);
  char *record = NULL;
  assert_true(asprintf(&record, "%s/pools/slots/p/0.json", dir) > 0);
  assert_int_equal(fs_write_atomic(record, "{garbage", 8, 0600, &err), 0);
  /* Fail closed: a record that cannot be read holds its slot. */
  assert_int_equal(pool_slot_acquire(dir, "p", 1, NULL, &s, &err), -1);
  cordon_error_free(err);
  err = NULL;
  free(record);
  remove_scratch(dir);
}

static void test_queue(void **state) {
  (void)state;
  char *dir = scratch();
  struct cordon_error *err = NULL;
  const char *argv1[] = {"true", NULL}, *argv2[] = {"false", NULL};
  struct pool_dispatch d1, d2, got;
  assert_int_equal(pool_queue_submit(dir, "p", NULL, argv1, &d1, &err), 0);
  usleep(1000);
  assert_int_equal(pool_queue_submit(dir, "p", NULL, argv2, &d2, &err), 0);
  size_t pending;
  assert_int_equal(pool_queue_pending(dir, "p", &pending, &err), 0);
  assert_int_equal(pending, 2);
  /* Oldest first; each once. */
  assert_int_equal(pool_queue_claim(dir, "p", &got, &err), 1);
  assert_string_equal(got.id, d1.id);
  json_t *result = json_pack("{s:i}", "exit_code", 0);
  assert_int_equal(pool_queue_finish(dir, &got, result, &err), 0);
  json_decref(result);
  pool_dispatch_clear(&got);
  assert_int_equal(pool_queue_claim(dir, "p", &got, &err), 1);
  assert_string_equal(got.id, d2.id);
  assert_string_equal(got.argv[0], "false");
  pool_dispatch_clear(&got);
  assert_int_equal(pool_queue_claim(dir, "p", &got, &err), 0);
  assert_int_equal(pool_queue_claim(dir, "other", &got, &err), 0);
  /* A tampered pending dispatch is refused by its id. */
  struct pool_dispatch d3;
  assert_int_equal(pool_queue_submit(dir, "p", NULL, argv1, &d3, &err), 0);
  char *cmd = NULL;
  assert_true(asprintf(&cmd, "sed -i 's/true/tru3/' %s/pools/queue/p/pending/*.json", dir) > 0);
  assert_int_equal(system(cmd), 0);
  free(cmd);
  assert_int_equal(pool_queue_claim(dir, "p", &got, &err), -1);
  assert_int_equal(err->kind, CORDON_ERR_INTEGRITY);
  cordon_error_free(err);
  pool_dispatch_clear(&d1);
  pool_dispatch_clear(&d2);
  pool_dispatch_clear(&d3);
  remove_scratch(dir);
}

#define H(c)                                                                                      \
  c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c \
      c c c c c c c c c c c c c c c c
static struct pool_warm_record warm_record(const char *pool_hash, const char *overrides,
                                           const char *effective, const char *backend) {
  struct pool_warm_record r = {0};
  snprintf(r.pool, sizeof(r.pool), "ci");
  snprintf(r.session, sizeof(r.session), "0123456789abcdef");
  snprintf(r.backend, sizeof(r.backend), "%s", backend);
  snprintf(r.pool_hash, sizeof(r.pool_hash), "%s", pool_hash);
  snprintf(r.overrides_hash, sizeof(r.overrides_hash), "%s", overrides);
  snprintf(r.effective_manifest_hash, sizeof(r.effective_manifest_hash), "%s", effective);
  return r;
}

static void test_warm_classify(void **state) {
  (void)state;
  struct pool_warm_record cur = warm_record(H("a"), H("b"), H("c"), "ns");
  struct pool_warm_record same = cur, other_recipe = warm_record(H("a"), H("d"), H("e"), "ns"),
                          updated = warm_record(H("f"), H("b"), H("c"), "ns"),
                          remerged = warm_record(H("a"), H("b"), H("e"), "ns"),
                          other_backend = warm_record(H("a"), H("d"), H("c"), "docker");
  assert_int_equal(pool_warm_classify(&same, &cur), POOL_WARM_MATCH);
  assert_int_equal(pool_warm_classify(&other_recipe, &cur), POOL_WARM_OTHER);
  /* The pool's body changed under the slot: drifted, even for the same effective hash. */
  assert_int_equal(pool_warm_classify(&updated, &cur), POOL_WARM_DRIFTED);
  /* The same recipe now merges to another manifest: drifted. */
  assert_int_equal(pool_warm_classify(&remerged, &cur), POOL_WARM_DRIFTED);
  /* Same manifest, another backend: not this dispatch's. */
  assert_int_equal(pool_warm_classify(&other_backend, &cur), POOL_WARM_OTHER);
}

static void test_warm_record_forms(void **state) {
  (void)state;
  struct pool_warm_record r = warm_record(H("a"), H("b"), H("c"), "ns"), back;
  char *text = NULL;
  struct cordon_error *err = NULL;
  assert_int_equal(pool_warm_record_format(&r, &text, &err), 0);
  assert_int_equal(pool_warm_record_parse(text, strlen(text), &back, &err), 0);
  assert_memory_equal(&r, &back, sizeof(r));
  /* A session id that is not one, a hash that is not one: refused. */
  char *bad = strdup(text);
  char *at = strstr(bad, "0123456789abcdef");
  at[0] = '.';
  assert_int_equal(pool_warm_record_parse(bad, strlen(bad), &back, &err), -1);
  cordon_error_free(err);
  err = NULL;
  free(bad);
  struct pool_warm_record short_hash = warm_record("abc", H("b"), H("c"), "ns");
  free(text);
  assert_int_equal(pool_warm_record_format(&short_hash, &text, &err), 0);
  assert_int_equal(pool_warm_record_parse(text, strlen(text), &back, &err), -1);
  cordon_error_free(err);
  free(text);
}

static void test_worker_documents(void **state) {
  (void)state;
  char *dir = scratch(), *keys = NULL;
  assert_true(asprintf(&keys, "%s/keys", dir) > 0);
  struct cordon_error *err = NULL;
  struct cordon_signing_key *key = NULL;
  assert_int_equal(cordon_key_init(keys, NULL, &err), 0);
  assert_int_equal(cordon_signing_key_load(keys, &key, &err), 0);
  const char *kid = cordon_signing_key_id(key);
  char *doc = NULL, *again = NULL, *reason = NULL;
  size_t n = 0, n2 = 0;
  json_t *body = NULL;
  char signer[CORDON_KEY_ID_LEN + 1];
  struct pool_claim_fields f = {.pool = "ci",
                                .pool_hash = H("a"),
                                .dispatch_id = H("b"),
                                .effective_manifest_hash = H("c"),
                                .placement = H("d"),
                                .enrolment = H("e")};
  /* No clock, no host: the same claim seals the same bytes. */
  assert_int_equal(pool_seal_claim(key, &f, &doc, &n, &err), 0);
  assert_int_equal(pool_seal_claim(key, &f, &again, &n2, &err), 0);
  assert_int_equal(n, n2);
  assert_memory_equal(doc, again, n);
  assert_int_equal(
      pool_worker_document_check(doc, n, POOL_CLAIM_TYPE, kid, &body, signer, &reason, &err), 0);
  assert_string_equal(signer, kid);
  assert_string_equal(json_string_value(json_object_get(body, "dispatch_id")), H("b"));
  json_decref(body);
  /* Another type expected, another signer expected, a flipped byte: each breaks. */
  assert_int_equal(
      pool_worker_document_check(doc, n, POOL_ENROLMENT_TYPE, kid, &body, signer, &reason, &err),
      1);
  free(reason);
  assert_int_equal(pool_worker_document_check(doc, n, POOL_CLAIM_TYPE,
                                              "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", &body,
                                              signer, &reason, &err),
                   1);
  free(reason);
  char *at = strstr(doc, "\"ci\"");
  at[1] = 'd';
  assert_int_equal(
      pool_worker_document_check(doc, n, POOL_CLAIM_TYPE, kid, &body, signer, &reason, &err), 1);
  free(reason);
  free(doc);
  free(again);
  /* Empty fields are refused at sealing. */
  f.enrolment = "";
  assert_int_equal(pool_seal_claim(key, &f, &doc, &n, &err), -1);
  cordon_error_free(err);
  err = NULL;
  assert_int_equal(pool_seal_enrolment(key, "ci", H("a"), &doc, &n, &err), 0);
  assert_int_equal(
      pool_worker_document_check(doc, n, POOL_ENROLMENT_TYPE, NULL, &body, signer, &reason, &err),
      0);
  json_decref(body);
  free(doc);
  cordon_signing_key_free(key);
  free(keys);
  remove_scratch(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_classify),
      cmocka_unit_test(test_record_forms),
      cmocka_unit_test(test_dispatch_document),
      cmocka_unit_test(test_slot_table),
      cmocka_unit_test(test_slot_holder_death),
      cmocka_unit_test(test_slot_wait),
      cmocka_unit_test(test_slot_bound_to_session),
      cmocka_unit_test(test_slot_damaged_record),
      cmocka_unit_test(test_queue),
      cmocka_unit_test(test_warm_classify),
      cmocka_unit_test(test_warm_record_forms),
      cmocka_unit_test(test_worker_documents),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
