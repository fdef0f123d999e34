/* Unit tests of snapshots and their store over time (src/snapshot/, src/store/): kill -9 during
 * snapshots leaves a store that verifies and restores, trees that change during the walk, and gc
 * (unreferenced blobs, the project's roots). Taking snapshots is in test-snapshot.c; the shared
 * fixture in snapshot-fixture.c. */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <cordon/cas.h>
#include <cordon/session.h>
#include <cordon/snapshot.h>

#include "snapshot/gc.h"

#include "snapshot-fixture.h"

/* ---- kill -9 during snapshots ------------------------------------------------------------ */

static void test_kill9_during_snapshot(void **state) {
  struct fixture *f = *state;
  char *tree = path_of(f, "busy");
  for (int i = 0; i < 200; i++) {
    char name[32];
    char body[2048];
    snprintf(name, sizeof(name), "d%d/f%d", i % 10, i);
    memset(body, 'a' + i % 26, sizeof(body));
    mk(tree, name, body, (size_t)(i * 37 % 2048), 0644);
  }
  unsigned seed = (unsigned)getpid();
  for (int iter = 0; iter < 25; iter++) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      struct cordon_cas *cas = NULL;
      if (cordon_cas_open(f->store, &cas, NULL) < 0)
        _exit(1);
      for (unsigned k = 0;; k++) {
        /* A new file each time, so each snapshot has new content to store. */
        char name[64], body[64];
        snprintf(name, sizeof(name), "%s/new-%d-%u", tree, iter, k);
        snprintf(body, sizeof(body), "%d %u\n", iter, k);
        int fd = open(name, O_WRONLY | O_CREAT, 0644);
        if (fd >= 0) {
          if (write(fd, body, strlen(body)) < 0)
            _exit(1);
          close(fd);
        }
        char id[CORDON_DIGEST_HEX_SIZE];
        cordon_snapshot_take(cas, tree, NULL, id, NULL, NULL);
      }
    }
    struct timespec delay = {0, (long)(rand_r(&seed) % 60 + 1) * 1000000L};
    nanosleep(&delay, NULL);
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
  }
  struct cordon_cas_verify_report rep;
  struct cordon_error *err = NULL;
  must(cordon_cas_verify(f->cas, NULL, &rep, &err), err, "verify");
  for (size_t i = 0; i < rep.n_problems; i++)
    fprintf(stderr, "problem: %s: %s\n", rep.problems[i].object, rep.problems[i].message);
  assert_int_equal(rep.n_problems, 0);
  cordon_cas_verify_report_clear(&rep);
  /* Every snapshot that got a ref restores. */
  char **ids = NULL;
  must(cordon_snapshot_list(f->cas, &ids, &err), err, "list");
  for (size_t i = 0; ids[i]; i++) {
    char *out = NULL;
    assert_true(asprintf(&out, "%s/busy-out-%zu", f->dir, i) >= 0);
    restore_to(f, ids[i], out);
    free(out);
  }
  cordon_strv_free(ids);
  free(tree);
}

/* ---- a live tree: files come and go during the walk ------------------------------------- */

struct churn {
  const char *tree;
  bool stop; /* atomic */
};

static void *churn_main(void *arg) {
  struct churn *c = arg;
  for (unsigned k = 0; !__atomic_load_n(&c->stop, __ATOMIC_RELAXED); k++) {
    char p[512], d[512];
    snprintf(p, sizeof(p), "%s/d%u/tmp-%u", c->tree, k % 10, k % 50);
    snprintf(d, sizeof(d), "%s/gone-%u", c->tree, k % 5);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      if (write(fd, p, strlen(p)) < 0)
        break;
      close(fd);
    }
    unlink(p);
    mkdir(d, 0755);
    rmdir(d);
  }
  return NULL;
}

/* `rounds` snapshots of `tree` while `churn` changes it on a thread of its own, every other one
 * without the stat cache; each must succeed. */
static void snapshots_beside(struct fixture *f, const char *tree, void *(*churn)(void *),
                             int rounds) {
  struct churn c = {.tree = tree};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, churn, &c), 0);
  struct cordon_snapshot_options nocache = {.no_stat_cache = true};
  for (int i = 0; i < rounds; i++) {
    char id[CORDON_DIGEST_HEX_SIZE];
    struct cordon_error *err = NULL;
    if (cordon_snapshot_take(f->cas, tree, i % 2 ? &nocache : NULL, id, NULL, &err) < 0) {
      __atomic_store_n(&c.stop, true, __ATOMIC_RELAXED);
      pthread_join(th, NULL);
      fail_msg("snapshot %d of a live tree failed: %s", i, err->message);
    }
  }
  __atomic_store_n(&c.stop, true, __ATOMIC_RELAXED);
  pthread_join(th, NULL);
}

static void test_live_tree(void **state) {
  struct fixture *f = *state;
  char *tree = path_of(f, "live");
  for (int i = 0; i < 300; i++) {
    char name[32];
    snprintf(name, sizeof(name), "d%d/f%d", i % 10, i);
    mks(tree, name, "stable content\n", 0644);
  }
  snapshots_beside(f, tree, churn_main, 30);
  struct cordon_cas_verify_report rep;
  struct cordon_error *err = NULL;
  must(cordon_cas_verify(f->cas, NULL, &rep, &err), err, "verify");
  assert_int_equal(rep.n_problems, 0);
  cordon_cas_verify_report_clear(&rep);
  free(tree);
}

/* Directories made and removed during the walk: one opened just before its removal lists as
 * ENOENT (a dead directory), and was simply not there, as a file that vanishes. */
static void *dir_churn_main(void *arg) {
  struct churn *c = arg;
  for (unsigned k = 0; !__atomic_load_n(&c->stop, __ATOMIC_RELAXED); k++) {
    char d[512];
    snprintf(d, sizeof(d), "%s/gone-%u", c->tree, k % 8);
    mkdir(d, 0755);
    rmdir(d);
  }
  return NULL;
}

static void test_live_tree_dirs(void **state) {
  struct fixture *f = *state;
  char *tree = path_of(f, "live-dirs");
  mks(tree, "stable", "stable content\n", 0644);
  snapshots_beside(f, tree, dir_churn_main, 600);
  free(tree);
}

/* ---- gc -------------------------------------------------------------------------------------- */

static void test_gc(void **state) {
  struct fixture *f = *state;
  char *tree = path_of(f, "gc");
  mks(tree, "kept", "kept by the snapshot\n", 0644);
  char id[CORDON_DIGEST_HEX_SIZE], loose[CORDON_DIGEST_HEX_SIZE];
  take(f, tree, id);
  struct cordon_error *err = NULL;
  must(cordon_cas_put(f->cas, "loose", 5, NULL, NULL, loose, &err), err, "put");
  struct cordon_cas_gc_report rep;
  must(cordon_cas_gc(NULL, f->cas, true, &rep, &err), err, "gc dry run");
  assert_int_equal(rep.removed, 1);
  assert_string_equal(rep.removed_digests[0], loose);
  cordon_cas_gc_report_clear(&rep);
  assert_int_equal(cordon_cas_has(f->cas, loose, &err), 1);
  must(cordon_cas_gc(NULL, f->cas, false, &rep, &err), err, "gc");
  assert_int_equal(rep.removed, 1);
  assert_int_equal(rep.kept, 2); /* the manifest and the file */
  cordon_cas_gc_report_clear(&rep);
  assert_int_equal(cordon_cas_has(f->cas, loose, &err), 0);
  char *out = path_of(f, "gc-out");
  restore_to(f, id, out);
  must(cordon_snapshot_forget(f->cas, id, &err), err, "forget");
  must(cordon_cas_gc(NULL, f->cas, false, &rep, &err), err, "gc");
  assert_int_equal(rep.kept, 0);
  cordon_cas_gc_report_clear(&rep);
  struct cordon_cas_verify_report v;
  must(cordon_cas_verify(f->cas, NULL, &v, &err), err, "verify");
  assert_int_equal(v.n_problems, 0);
  assert_int_equal(v.blobs, 0);
  cordon_cas_verify_report_clear(&v);
  /* Snapshots survive gc after that: the stat cache was dropped with the blobs. */
  take(f, tree, id);
  char *out2 = path_of(f, "gc-out2");
  restore_to(f, id, out2);
  free(out);
  free(out2);
  free(tree);
}

/* The project's roots, given gc as a state directory: digests named in session state and
 * receipts keep their blobs (a snapshot id keeps its files too); a session's workspace is never
 * read. cordon_cas_gc passes a context's state directory through. */
static void test_gc_state_dir_roots(void **state) {
  struct fixture *f = *state;
  char *tree = path_of(f, "gc-roots"), *proj = path_of(f, "gc-proj");
  char *state_dir = path_of(f, "gc-proj/.cordon");
  mks(tree, "file", "named by a receipt's snapshot\n", 0644);
  char snap[CORDON_DIGEST_HEX_SIZE], by_session[CORDON_DIGEST_HEX_SIZE];
  char in_workspace[CORDON_DIGEST_HEX_SIZE], text[256];
  take(f, tree, snap);
  struct cordon_error *err = NULL;
  must(cordon_snapshot_forget(f->cas, snap, &err), err, "forget"); /* no ref: only the receipt */
  must(cordon_cas_put(f->cas, "session", 7, NULL, NULL, by_session, &err), err, "put");
  must(cordon_cas_put(f->cas, "workspace", 9, NULL, NULL, in_workspace, &err), err, "put");
  snprintf(text, sizeof(text), "{\"resumed_from\":\"%s\"}\n", by_session);
  mks(state_dir, "sessions/s1/state.json", text, 0600);
  mks(state_dir, "sessions/s1/workspace/notes.txt", in_workspace, 0600);
  snprintf(text, sizeof(text), "output %s.\n", snap);
  mks(state_dir, "receipts/r1.json", text, 0600);

  struct cordon_cas_gc_report rep;
  must(snap_gc(f->cas, state_dir, true, &rep, &err), err, "gc dry run");
  assert_int_equal(rep.roots, 2);
  assert_int_equal(rep.removed, 1); /* only the blob named in the workspace */
  assert_string_equal(rep.removed_digests[0], in_workspace);
  assert_int_equal(rep.kept, 3); /* the session's blob, the manifest and its file */
  cordon_cas_gc_report_clear(&rep);
  must(snap_gc(f->cas, NULL, true, &rep, &err), err, "gc dry run without a project");
  assert_int_equal(rep.roots, 0);
  assert_int_equal(rep.removed, 4);
  cordon_cas_gc_report_clear(&rep);

  struct cordon_context *ctx = NULL;
  must(cordon_context_open(proj, &ctx, &err), err, "context");
  must(cordon_cas_gc(ctx, f->cas, false, &rep, &err), err, "gc");
  assert_int_equal(rep.removed, 1);
  cordon_cas_gc_report_clear(&rep);
  cordon_context_free(ctx);
  assert_int_equal(cordon_cas_has(f->cas, in_workspace, &err), 0);
  assert_int_equal(cordon_cas_has(f->cas, by_session, &err), 1);
  char *out = path_of(f, "gc-roots-out");
  restore_to(f, snap, out);
  free(out);
  free(state_dir);
  free(proj);
  free(tree);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_kill9_during_snapshot, setup, teardown),
      cmocka_unit_test_setup_teardown(test_live_tree, setup, teardown),
      cmocka_unit_test_setup_teardown(test_live_tree_dirs, setup, teardown),
      cmocka_unit_test_setup_teardown(test_gc, setup, teardown),
      cmocka_unit_test_setup_teardown(test_gc_state_dir_roots, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
