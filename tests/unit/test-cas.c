/* Unit tests of the content-addressed store (src/store/): put/get, idempotence, integrity
 * errors naming both digests, sidecars, verify, refusal of symlinks and FIFOs planted at shards
 * and blobs (unreadable, never absent, never a hang), and kill -9 during puts leaving no
 * partial blob visible; the primitives under them (loose open and presence, temp names). */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <cordon/cas.h>

#include "base/fs.h"
/* The primitives sit below the packs and the rest of the store: their header pulls in neither
 * (pack.c depends on it, so anything else would close a circle). */
#include "store/object.h"
#if defined(CORDON_STORE_PACK_H) || defined(CORDON_STORE_CAS_H)
#error "store/object.h must not include store/pack.h or store/cas.h"
#endif
#include "store/cas.h"
#include "store/hash.h"

struct fixture {
  char dir[64];
  char store[96];
  struct cordon_cas *cas;
};

static int setup(void **state) {
  struct fixture *f = calloc(1, sizeof(*f));
  snprintf(f->dir, sizeof(f->dir), "/tmp/cordon-test-cas.XXXXXX");
  if (!mkdtemp(f->dir))
    return -1;
  snprintf(f->store, sizeof(f->store), "%s/store", f->dir);
  struct cordon_error *err = NULL;
  if (cordon_cas_open(f->store, &f->cas, &err) < 0) {
    fprintf(stderr, "%s\n", err->message);
    return -1;
  }
  *state = f;
  return 0;
}

static int teardown(void **state) {
  struct fixture *f = *state;
  cordon_cas_close(f->cas);
  fs_remove_tree(f->dir, NULL);
  free(f);
  return 0;
}

static void must(int r, struct cordon_error *err, const char *what) {
  if (r < 0)
    fail_msg("%s: %s", what, err ? err->message : "failed");
}

static void blob_path(struct fixture *f, const char *digest, char *out, size_t size) {
  snprintf(out, size, "%s/%.2s/%s", f->store, digest, digest);
}

static void flip_byte(const char *path, off_t at) {
  int fd = open(path, O_RDWR);
  assert_true(fd >= 0);
  unsigned char c;
  assert_int_equal(pread(fd, &c, 1, at), 1);
  c ^= 0x01;
  assert_int_equal(pwrite(fd, &c, 1, at), 1);
  close(fd);
}

static void test_put_get_roundtrip(void **state) {
  struct fixture *f = *state;
  struct cordon_error *err = NULL;
  char d1[CORDON_DIGEST_HEX_SIZE], d2[CORDON_DIGEST_HEX_SIZE];
  must(cordon_cas_put(f->cas, "hello", 5, NULL, NULL, d1, &err), err, "put");
  /* sha256("hello") */
  assert_string_equal(d1, "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824");
  must(cordon_cas_put(f->cas, "hello", 5, NULL, NULL, d2, &err), err, "put again");
  assert_string_equal(d1, d2);
  assert_int_equal(cordon_cas_has(f->cas, d1, &err), 1);
  unsigned char *data = NULL;
  size_t len = 0;
  must(cordon_cas_get(f->cas, d1, 1024, &data, &len, &err), err, "get");
  assert_int_equal(len, 5);
  assert_memory_equal(data, "hello", 5);
  free(data);
  /* Empty blobs are blobs too. */
  must(cordon_cas_put(f->cas, "", 0, NULL, NULL, d2, &err), err, "put empty");
  assert_string_equal(d2, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  /* Absent is 0 and NOT_FOUND, never an integrity error. */
  const char *absent = "0000000000000000000000000000000000000000000000000000000000000000";
  assert_int_equal(cordon_cas_has(f->cas, absent, &err), 0);
  assert_null(err);
  assert_true(cordon_cas_get(f->cas, absent, 10, &data, &len, &err) < 0);
  assert_int_equal(err->kind, CORDON_ERR_NOT_FOUND);
  cordon_error_free(err);
  err = NULL;
  /* Bad digests are usage errors. */
  assert_true(cordon_cas_has(f->cas, "ABC", &err) < 0);
  assert_int_equal(err->kind, CORDON_ERR_USAGE);
  cordon_error_free(err);
  err = NULL;
  assert_true(cordon_cas_has(f->cas,
                             "2CF24DBA5FB0A30E26E83B2AC5B9E29E1B161E5C1FA7425E73043362938B9824",
                             &err) < 0);
  cordon_error_free(err);
}

static void test_put_fd_streams(void **state) {
  struct fixture *f = *state;
  size_t n = 3u << 20;
  unsigned char *big = malloc(n);
  for (size_t i = 0; i < n; i++)
    big[i] = (unsigned char)(i * 2654435761u >> 13);
  int mfd = memfd_create("t", 0);
  assert_int_equal(write(mfd, big, n), (ssize_t)n);
  lseek(mfd, 0, SEEK_SET);
  struct cordon_error *err = NULL;
  char d1[CORDON_DIGEST_HEX_SIZE], d2[CORDON_DIGEST_HEX_SIZE];
  must(cordon_cas_put_fd(f->cas, mfd, NULL, NULL, d1, &err), err, "put_fd");
  must(cordon_cas_put(f->cas, big, n, NULL, NULL, d2, &err), err, "put");
  assert_string_equal(d1, d2);
  close(mfd);
  int out = memfd_create("o", 0);
  must(cordon_cas_get_to_fd(f->cas, d1, out, &err), err, "get_to_fd");
  assert_int_equal(lseek(out, 0, SEEK_END), (off_t)n);
  close(out);
  free(big);
}

static void test_integrity_error_names_both_digests(void **state) {
  struct fixture *f = *state;
  struct cordon_error *err = NULL;
  char d[CORDON_DIGEST_HEX_SIZE], path[256];
  must(cordon_cas_put(f->cas, "some content here", 17, NULL, NULL, d, &err), err, "put");
  blob_path(f, d, path, sizeof(path));
  for (off_t at = 0; at < 17; at += 4) {
    flip_byte(path, at);
    unsigned char *data = NULL;
    size_t len = 0;
    assert_true(cordon_cas_get(f->cas, d, 100, &data, &len, &err) < 0);
    assert_int_equal(err->kind, CORDON_ERR_INTEGRITY);
    assert_non_null(strstr(err->message, d));
    assert_non_null(strstr(err->message, "hashes to"));
    cordon_error_free(err);
    err = NULL;
    /* get_to_fd writes nothing at all. */
    int out = memfd_create("o", 0);
    assert_true(cordon_cas_get_to_fd(f->cas, d, out, &err) < 0);
    assert_int_equal(err->kind, CORDON_ERR_INTEGRITY);
    assert_int_equal(lseek(out, 0, SEEK_END), 0);
    close(out);
    cordon_error_free(err);
    err = NULL;
    flip_byte(path, at); /* back to intact */
    assert_int_equal(cordon_cas_has(f->cas, d, &err), 1);
  }
  /* Put repairs a blob cut short (a crash on a filesystem that lost the tail). */
  assert_int_equal(truncate(path, 3), 0);
  must(cordon_cas_put(f->cas, "some content here", 17, NULL, NULL, d, &err), err, "put repair");
  unsigned char *data = NULL;
  size_t len = 0;
  must(cordon_cas_get(f->cas, d, 100, &data, &len, &err), err, "get repaired");
  free(data);
}

static double now(void) {
  return fs_now();
}

/* Whatever is planted, the answer is "unreadable" (an integrity error), quickly. */
static void expect_unreadable(struct fixture *f, const char *digest) {
  struct cordon_error *err = NULL;
  double start = now();
  assert_true(cordon_cas_has(f->cas, digest, &err) < 0);
  assert_non_null(err);
  assert_int_equal(err->kind, CORDON_ERR_INTEGRITY);
  assert_non_null(strstr(err->message, "unreadable"));
  cordon_error_free(err);
  err = NULL;
  unsigned char *data = NULL;
  size_t len = 0;
  assert_true(cordon_cas_get(f->cas, digest, 100, &data, &len, &err) < 0);
  assert_int_equal(err->kind, CORDON_ERR_INTEGRITY);
  cordon_error_free(err);
  assert_true(now() - start < 2.0);
}

static void test_symlinked_blob_refused(void **state) {
  struct fixture *f = *state;
  struct cordon_error *err = NULL;
  char d[CORDON_DIGEST_HEX_SIZE], path[256], target[256];
  must(cordon_cas_put(f->cas, "secret", 6, NULL, NULL, d, &err), err, "put");
  blob_path(f, d, path, sizeof(path));
  snprintf(target, sizeof(target), "%s/elsewhere", f->dir);
  rename(path, target);
  assert_int_equal(symlink(target, path), 0);
  expect_unreadable(f, d);
}

static void test_symlinked_shard_refused(void **state) {
  struct fixture *f = *state;
  struct cordon_error *err = NULL;
  char d[CORDON_DIGEST_HEX_SIZE], shard[256], moved[256];
  must(cordon_cas_put(f->cas, "shard content", 13, NULL, NULL, d, &err), err, "put");
  /* A fresh handle: the first one has the real shard open already. */
  cordon_cas_close(f->cas);
  snprintf(shard, sizeof(shard), "%s/%.2s", f->store, d);
  snprintf(moved, sizeof(moved), "%s/moved-shard", f->dir);
  assert_int_equal(rename(shard, moved), 0);
  assert_int_equal(symlink(moved, shard), 0);
  must(cordon_cas_open(f->store, &f->cas, &err), err, "reopen");
  expect_unreadable(f, d);
}

static void test_fifo_refused_without_blocking(void **state) {
  struct fixture *f = *state;
  struct cordon_error *err = NULL;
  char d[CORDON_DIGEST_HEX_SIZE], path[256];
  must(cordon_cas_put(f->cas, "fifo", 4, NULL, NULL, d, &err), err, "put");
  blob_path(f, d, path, sizeof(path));
  unlink(path);
  assert_int_equal(mkfifo(path, 0600), 0);
  /* A hang would be caught by the alarm. */
  alarm(10);
  expect_unreadable(f, d);
  alarm(0);
  /* A FIFO planted as a shard too. */
  cordon_cas_close(f->cas);
  char shard[256];
  snprintf(shard, sizeof(shard), "%s/%.2s", f->store, d);
  fs_remove_tree(shard, NULL);
  assert_int_equal(mkfifo(shard, 0600), 0);
  must(cordon_cas_open(f->store, &f->cas, &err), err, "reopen");
  alarm(10);
  expect_unreadable(f, d);
  alarm(0);
}

static void test_sidecar_and_verify(void **state) {
  struct fixture *f = *state;
  struct cordon_error *err = NULL;
  char d[CORDON_DIGEST_HEX_SIZE], d2[CORDON_DIGEST_HEX_SIZE];
  must(cordon_cas_put(f->cas, "{\"x\":1}", 7, "application/json", "{\"origin\":\"test\"}", d, &err),
       err, "put with sidecar");
  must(cordon_cas_put(f->cas, "plain", 5, NULL, NULL, d2, &err), err, "put plain");
  struct cordon_blob_info info;
  must(cordon_cas_info(f->cas, d, &info, &err), err, "info");
  assert_true(info.has_sidecar);
  assert_int_equal(info.size, 7);
  assert_string_equal(info.content_type, "application/json");
  assert_string_equal(info.metadata, "{\"origin\":\"test\"}");
  cordon_blob_info_clear(&info);
  must(cordon_cas_info(f->cas, d2, &info, &err), err, "info plain");
  assert_false(info.has_sidecar);
  cordon_blob_info_clear(&info);
  /* Metadata must be an object. */
  assert_true(cordon_cas_put(f->cas, "x", 1, NULL, "[1]", d2, &err) < 0);
  assert_int_equal(err->kind, CORDON_ERR_USAGE);
  cordon_error_free(err);
  err = NULL;

  struct cordon_cas_verify_report rep;
  must(cordon_cas_verify(f->cas, NULL, &rep, &err), err, "verify");
  assert_int_equal(rep.n_problems, 0);
  assert_int_equal(rep.blobs, 2); /* the refused put stored nothing */
  assert_int_equal(rep.sidecars, 1);
  cordon_cas_verify_report_clear(&rep);

  /* A corrupt blob, a lying sidecar, a stray file and an orphan sidecar are all reported. */
  char path[300];
  blob_path(f, d2, path, sizeof(path));
  flip_byte(path, 0);
  snprintf(path, sizeof(path), "%s/%.2s/%s.meta.json", f->store, d, d);
  chmod(path, 0644);
  FILE *fp = fopen(path, "w");
  fputs("{\"content_type\":\"x\",\"digest\":\"nope\",\"size\":7}\n", fp);
  fclose(fp);
  /* Shards are made on first write: these two may not exist yet. */
  snprintf(path, sizeof(path), "%s/00", f->store);
  mkdir(path, 0700);
  snprintf(path, sizeof(path), "%s/00/stray", f->store);
  fclose(fopen(path, "w"));
  snprintf(path, sizeof(path), "%s/ab", f->store);
  mkdir(path, 0700);
  snprintf(path, sizeof(path), "%s/ab/ab%062d.meta.json", f->store, 0);
  fclose(fopen(path, "w"));
  must(cordon_cas_verify(f->cas, NULL, &rep, &err), err, "verify");
  assert_int_equal(rep.n_problems, 4);
  bool saw_integrity = false;
  for (size_t i = 0; i < rep.n_problems; i++)
    if (!strcmp(rep.problems[i].object, d2))
      saw_integrity = strstr(rep.problems[i].message, "integrity") != NULL;
  assert_true(saw_integrity);
  cordon_cas_verify_report_clear(&rep);
}

static void fill_random(unsigned char *p, size_t n, unsigned *seed) {
  for (size_t i = 0; i < n; i++)
    p[i] = (unsigned char)rand_r(seed);
}

/* A child puts random blobs forever; it is killed at a random moment, many times. Whatever the
 * moment, verify finds nothing wrong and every visible blob is whole. */
static void test_kill9_during_put(void **state) {
  struct fixture *f = *state;
  unsigned seed = (unsigned)getpid();
  for (int iter = 0; iter < 40; iter++) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      struct cordon_cas *cas = NULL;
      if (cordon_cas_open(f->store, &cas, NULL) < 0)
        _exit(1);
      unsigned s = seed + (unsigned)iter * 7919u;
      size_t cap = 1u << 21;
      unsigned char *buf = malloc(cap);
      for (unsigned k = 0;; k++) {
        size_t n = (size_t)rand_r(&s) % cap;
        fill_random(buf, n, &s);
        char d[CORDON_DIGEST_HEX_SIZE];
        if (k % 2) {
          int mfd = memfd_create("k", 0);
          if (write(mfd, buf, n) != (ssize_t)n)
            _exit(1);
          lseek(mfd, 0, SEEK_SET);
          cordon_cas_put_fd(cas, mfd, k % 4 == 1 ? "text/plain" : NULL, NULL, d, NULL);
          close(mfd);
        } else {
          cordon_cas_put(cas, buf, n, NULL, NULL, d, NULL);
        }
      }
    }
    /* Delays grow over the iterations, so even a slow (sanitised) child gets blobs out. */
    struct timespec delay = {0, (long)(rand_r(&seed) % (40 + 5 * iter) + 1) * 1000000L};
    nanosleep(&delay, NULL);
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    assert_true(WIFSIGNALED(status));
  }
  struct cordon_error *err = NULL;
  struct cordon_cas_verify_report rep;
  must(cordon_cas_verify(f->cas, NULL, &rep, &err), err, "verify");
  for (size_t i = 0; i < rep.n_problems; i++)
    fprintf(stderr, "problem: %s: %s\n", rep.problems[i].object, rep.problems[i].message);
  assert_int_equal(rep.n_problems, 0);
  assert_true(rep.blobs > 0);
  cordon_cas_verify_report_clear(&rep);
  /* Leftover temp files are invisible as blobs; cleaning them leaves the store as it was. */
  int lock = cas_lock_exclusive(f->cas, &err);
  must(lock, err, "lock");
  must(cas_clean_tmp(f->cas, NULL, &err), err, "clean tmp");
  close(lock);
  must(cordon_cas_verify(f->cas, NULL, &rep, &err), err, "verify");
  assert_int_equal(rep.n_problems, 0);
  assert_int_equal(rep.temporaries, 0);
  cordon_cas_verify_report_clear(&rep);
}

static void test_batch_abort_leaves_nothing(void **state) {
  struct fixture *f = *state;
  struct cordon_error *err = NULL;
  struct cas_batch *b = NULL;
  must(cas_batch_new(f->cas, &b, &err), err, "batch");
  unsigned char d[CAS_DIGEST_LEN];
  must(cas_batch_add_buffer(b, "staged but never committed", 26, d, &err), err, "stage");
  assert_int_equal(cas_batch_staged(b), 1);
  cas_batch_free(b);
  char hex[CORDON_DIGEST_HEX_SIZE];
  cas_hex(d, hex);
  assert_int_equal(cordon_cas_has(f->cas, hex, &err), 0);
  struct cordon_cas_verify_report rep;
  must(cordon_cas_verify(f->cas, NULL, &rep, &err), err, "verify");
  assert_int_equal(rep.blobs, 0);
  assert_int_equal(rep.temporaries, 0);
  cordon_cas_verify_report_clear(&rep);
  /* And a committed one is there, deduplicated. */
  must(cas_batch_new(f->cas, &b, &err), err, "batch");
  must(cas_batch_add_buffer(b, "twice", 5, d, &err), err, "stage");
  must(cas_batch_add_buffer(b, "twice", 5, d, &err), err, "stage");
  /* The same content twice in one batch is written once, streamed or not. */
  struct cas_hasher h = {0};
  struct cas_stage st;
  unsigned char d2[CAS_DIGEST_LEN];
  must(cas_stage_open(b, &h, &st, &err), err, "stage open");
  must(cas_stage_write(&st, "twice", 5, &err), err, "stage write");
  must(cas_stage_close(&st, d2, &err), err, "stage close");
  cas_hasher_free(&h);
  assert_memory_equal(d, d2, CAS_DIGEST_LEN);
  assert_int_equal(cas_batch_staged(b), 1);
  must(cas_batch_commit(b, &err), err, "commit");
  cas_batch_free(b);
  cas_hex(d, hex);
  assert_int_equal(cordon_cas_has(f->cas, hex, &err), 1);
  must(cordon_cas_verify(f->cas, NULL, &rep, &err), err, "verify");
  assert_int_equal(rep.blobs, 1);
  assert_int_equal(rep.temporaries, 0);
  cordon_cas_verify_report_clear(&rep);
}

/* A typed blob (a snapshot's manifest) staged in a batch: a file of its own with its sidecar,
 * neither visible before the commit; its shard, like every shard, made only when first written. */
static void test_batch_typed_blob_and_lazy_shards(void **state) {
  struct fixture *f = *state;
  struct cordon_error *err = NULL;
  unsigned char d[CAS_DIGEST_LEN];
  const char *text = "cordon-manifest 1\n";
  assert_int_equal(cas_sha256(text, strlen(text), d), 0);
  char hex[CORDON_DIGEST_HEX_SIZE], path[300];
  cas_hex(d, hex);
  snprintf(path, sizeof(path), "%s/%.2s", f->store, hex);
  struct stat st;
  assert_int_equal(stat(path, &st), -1); /* a new store has no shards yet */
  struct cas_batch *b = NULL;
  must(cas_batch_new(f->cas, &b, &err), err, "batch");
  unsigned char got[CAS_DIGEST_LEN];
  must(cas_batch_add_typed(b, text, strlen(text), "application/x-test", got, &err), err, "typed");
  assert_memory_equal(d, got, CAS_DIGEST_LEN);
  assert_int_equal(cas_batch_staged(b), 2); /* the blob and its sidecar */
  assert_int_equal(cordon_cas_has(f->cas, hex, &err), 0);
  must(cas_batch_commit(b, &err), err, "commit");
  cas_batch_free(b);
  assert_int_equal(cordon_cas_has(f->cas, hex, &err), 1);
  blob_path(f, hex, path, sizeof(path));
  assert_int_equal(stat(path, &st), 0); /* loose, not packed */
  strcat(path, ".meta.json");
  assert_int_equal(stat(path, &st), 0);
  struct cordon_cas_verify_report rep;
  must(cordon_cas_verify(f->cas, NULL, &rep, &err), err, "verify");
  assert_int_equal(rep.blobs, 1);
  assert_int_equal(rep.sidecars, 1);
  assert_int_equal(rep.n_problems, 0);
  assert_int_equal(rep.temporaries, 0);
  cordon_cas_verify_report_clear(&rep);
  /* Staged again: nothing to write. */
  must(cas_batch_new(f->cas, &b, &err), err, "batch");
  must(cas_batch_add_typed(b, text, strlen(text), "application/x-test", got, &err), err, "typed");
  assert_int_equal(cas_batch_staged(b), 0);
  must(cas_batch_commit(b, &err), err, "commit");
  cas_batch_free(b);
}

static void test_hex(void **state) {
  (void)state;
  unsigned char d[CAS_DIGEST_LEN];
  char hex[CAS_HEX_LEN + 1];
  for (int i = 0; i < CAS_DIGEST_LEN; i++)
    d[i] = (unsigned char)(i * 37);
  cas_hex(d, hex);
  unsigned char back[CAS_DIGEST_LEN];
  assert_int_equal(cas_unhex(hex, back), 0);
  assert_memory_equal(d, back, CAS_DIGEST_LEN);
  hex[5] = 'G';
  assert_int_equal(cas_unhex(hex, back), -1);
  hex[5] = 'A';
  assert_int_equal(cas_unhex(hex, back), -1);
  assert_int_equal(cas_unhex("abc", back), -1);
  assert_false(cordon_digest_valid(""));
  assert_false(cordon_digest_valid(NULL));
}

/* The primitives the rest of the store builds on: the loose open and presence check, the names
 * of what is found instead of a file, temp names. */
static void test_loose_primitives(void **state) {
  struct fixture *f = *state;
  struct cordon_error *err = NULL;
  char d[CORDON_DIGEST_HEX_SIZE], path[256], target[256];
  must(cordon_cas_put(f->cas, "primitive", 9, NULL, NULL, d, &err), err, "put");
  unsigned char digest[CAS_DIGEST_LEN];
  assert_int_equal(cas_unhex(d, digest), 0);
  assert_true(cas_loose_present(f->cas, digest, 9));
  assert_false(cas_loose_present(f->cas, digest, 8)); /* wrong size: to be replaced */
  struct stat st;
  int fd = cas_loose_open(f->cas, digest, &st, &err);
  must(fd, err, "loose open");
  assert_int_equal(st.st_size, 9);
  close(fd);

  blob_path(f, d, path, sizeof(path));
  snprintf(target, sizeof(target), "%s/elsewhere", f->dir);
  assert_int_equal(rename(path, target), 0);
  assert_int_equal(symlink(target, path), 0);
  assert_false(cas_loose_present(f->cas, digest, 9));
  assert_true(cas_loose_open(f->cas, digest, &st, &err) < 0);
  assert_int_equal(err->kind, CORDON_ERR_INTEGRITY);
  assert_non_null(strstr(err->message, "a symlink"));
  cordon_error_free(err);
  err = NULL;
  unlink(path);
  assert_true(cas_loose_open(f->cas, digest, &st, &err) < 0);
  assert_int_equal(err->kind, CORDON_ERR_NOT_FOUND);
  cordon_error_free(err);

  assert_string_equal(cas_kind_word(S_IFIFO | 0600), "a FIFO");
  assert_string_equal(cas_kind_word(S_IFDIR | 0700), "a directory");
  assert_true(cas_is_shard_temp(CAS_SHARD_TEMP_PREFIX "0123-1"));
  assert_false(cas_is_shard_temp(d));
  char a[48], b[48];
  cas_tmp_name(f->cas, a, sizeof(a));
  cas_tmp_name(f->cas, b, sizeof(b));
  assert_string_not_equal(a, b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hex),
      cmocka_unit_test_setup_teardown(test_put_get_roundtrip, setup, teardown),
      cmocka_unit_test_setup_teardown(test_put_fd_streams, setup, teardown),
      cmocka_unit_test_setup_teardown(test_integrity_error_names_both_digests, setup, teardown),
      cmocka_unit_test_setup_teardown(test_symlinked_blob_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(test_symlinked_shard_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(test_fifo_refused_without_blocking, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sidecar_and_verify, setup, teardown),
      cmocka_unit_test_setup_teardown(test_batch_abort_leaves_nothing, setup, teardown),
      cmocka_unit_test_setup_teardown(test_batch_typed_blob_and_lazy_shards, setup, teardown),
      cmocka_unit_test_setup_teardown(test_kill9_during_put, setup, teardown),
      cmocka_unit_test_setup_teardown(test_loose_primitives, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
