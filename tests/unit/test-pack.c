/* Unit tests of packs (src/store/pack.c): the format's parser refuses every malformed index,
 * a batch packs small blobs and keeps big ones loose, a flipped byte anywhere in a pack is an
 * integrity error, a pack that is a symlink, a FIFO or truncated is unreadable (never absent,
 * never a hang), a symlinked packs directory is refused, and gc's rewrite keeps exactly the
 * blobs asked for and merges small packs into one. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <cordon/cas.h>

#include "base/fs.h"
#include "store/cas.h"
#include "store/hash.h"
#include "store/pack.h"

struct fixture {
  char dir[64];
  char store[96];
  struct cordon_cas *cas;
};

static int setup(void **state) {
  struct fixture *f = calloc(1, sizeof(*f));
  snprintf(f->dir, sizeof(f->dir), "/tmp/cordon-test-pack.XXXXXX");
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

/* ---- the format ------------------------------------------------------------------------- */

/* Three entries tiling the data after the header: lengths 5, 0, 7. */
static size_t sample(struct cas_pack_entry e[3], unsigned char *tail, uint64_t *index_offset) {
  memset(e, 0, 3 * sizeof(*e));
  for (int i = 0; i < 3; i++)
    e[i].digest[0] = (unsigned char)(0x10 * (i + 1));
  e[0].offset = 16, e[0].length = 5;
  e[1].offset = 21, e[1].length = 0;
  e[2].offset = 21, e[2].length = 7;
  *index_offset = 28;
  cas_pack_encode_index(e, 3, *index_offset, tail);
  return 3 * CAS_PACK_ENTRY_LEN + CAS_PACK_TRAILER_LEN;
}

static void test_format_round_trip(void **state) {
  (void)state;
  struct cas_pack_entry e[3], back[3];
  unsigned char tail[3 * CAS_PACK_ENTRY_LEN + CAS_PACK_TRAILER_LEN];
  uint64_t index_offset = 0, off = 0, count = 0;
  size_t len = sample(e, tail, &index_offset);
  uint64_t file_size = index_offset + len;
  assert_null(cas_pack_parse_trailer(tail + len - CAS_PACK_TRAILER_LEN, file_size, &off, &count));
  assert_int_equal(off, index_offset);
  assert_int_equal(count, 3);
  assert_null(cas_pack_parse_index(tail, count, off, back));
  assert_memory_equal(back, e, sizeof(e));
  assert_null(cas_pack_check_tiling(back, 3, off));
}

static void test_format_refuses_malformed(void **state) {
  (void)state;
  struct cas_pack_entry e[3], back[3];
  unsigned char tail[3 * CAS_PACK_ENTRY_LEN + CAS_PACK_TRAILER_LEN];
  uint64_t index_offset = 0, off = 0, count = 0;
  size_t len = sample(e, tail, &index_offset);
  uint64_t file_size = index_offset + len;
  unsigned char *trailer = tail + len - CAS_PACK_TRAILER_LEN;

  /* trailer: bad magic, a file too short, a count that does not fit, an absurd count */
  unsigned char t[CAS_PACK_TRAILER_LEN];
  memcpy(t, trailer, sizeof(t));
  t[23] ^= 1;
  assert_non_null(cas_pack_parse_trailer(t, file_size, &off, &count));
  assert_non_null(cas_pack_parse_trailer(trailer, 30, &off, &count));
  assert_non_null(cas_pack_parse_trailer(trailer, file_size + 1, &off, &count));
  memcpy(t, trailer, sizeof(t));
  t[8] = 4; /* count 4 with room for 3 */
  assert_non_null(cas_pack_parse_trailer(t, file_size, &off, &count));
  memcpy(t, trailer, sizeof(t));
  memset(t + 8, 0xff, 8); /* 2^64 - 1 entries: must not overflow into "fits" */
  assert_non_null(cas_pack_parse_trailer(t, file_size, &off, &count));
  memcpy(t, trailer, sizeof(t));
  memset(t, 0, 8); /* index inside the header */
  assert_non_null(cas_pack_parse_trailer(t, file_size, &off, &count));

  /* index: out of order, duplicate, out of bounds, overflowing */
  unsigned char idx[3 * CAS_PACK_ENTRY_LEN];
  memcpy(idx, tail, sizeof(idx));
  idx[0] = 0x30; /* first digest now after the second */
  assert_non_null(cas_pack_parse_index(idx, 3, index_offset, back));
  memcpy(idx, tail, sizeof(idx));
  idx[CAS_PACK_ENTRY_LEN] = 0x10; /* equal to the first */
  assert_non_null(cas_pack_parse_index(idx, 3, index_offset, back));
  memcpy(idx, tail, sizeof(idx));
  idx[40] = 13; /* length 13 from 16 passes the index at 28 */
  assert_non_null(cas_pack_parse_index(idx, 3, index_offset, back));
  memcpy(idx, tail, sizeof(idx));
  memset(idx + 32, 0xff, 8); /* offset 2^64 - 1 */
  assert_non_null(cas_pack_parse_index(idx, 3, index_offset, back));
  memcpy(idx, tail, sizeof(idx));
  memset(idx + 40, 0xff, 8); /* length 2^64 - 1: offset + length wraps */
  assert_non_null(cas_pack_parse_index(idx, 3, index_offset, back));
  memcpy(idx, tail, sizeof(idx));
  idx[32] = 8; /* offset inside the header */
  assert_non_null(cas_pack_parse_index(idx, 3, index_offset, back));

  /* tiling: a gap, an overlap, a tail no entry owns */
  struct cas_pack_entry g[3];
  memcpy(g, e, sizeof(g));
  g[2].offset = 22, g[2].length = 6;
  assert_non_null(cas_pack_check_tiling(g, 3, index_offset));
  memcpy(g, e, sizeof(g));
  g[2].offset = 20, g[2].length = 8;
  assert_non_null(cas_pack_check_tiling(g, 3, index_offset));
  memcpy(g, e, sizeof(g));
  g[2].length = 6;
  assert_non_null(cas_pack_check_tiling(g, 3, index_offset));

  /* header */
  unsigned char h[CAS_PACK_HEADER_LEN] = "cordpack";
  h[8] = 1;
  assert_null(cas_pack_check_header(h));
  h[8] = 2;
  assert_non_null(cas_pack_check_header(h));
  h[8] = 1;
  h[0] = 'C';
  assert_non_null(cas_pack_check_header(h));
}

/* ---- batches ------------------------------------------------------------------------------ */

#define N_SMALL 64

struct stored {
  char hex[N_SMALL + 1][CAS_HEX_LEN + 1];
  size_t big; /* index of the one big blob */
};

static void body(unsigned i, unsigned char *buf, size_t *len) {
  *len = i == N_SMALL ? ((size_t)1 << 20) + 3 : 100 + i * 37;
  for (size_t k = 0; k < *len; k++)
    buf[k] = (unsigned char)(i * 131 + k * 7);
}

static void store_batch(struct fixture *f, struct stored *s) {
  struct cordon_error *err = NULL;
  struct cas_batch *b = NULL;
  must(cas_batch_new(f->cas, &b, &err), err, "batch");
  unsigned char *buf = malloc(((size_t)1 << 20) + 16);
  for (unsigned i = 0; i <= N_SMALL; i++) {
    size_t len;
    body(i, buf, &len);
    unsigned char d[CAS_DIGEST_LEN];
    must(cas_batch_add_buffer(b, buf, len, d, &err), err, "add");
    cas_hex(d, s->hex[i]);
  }
  s->big = N_SMALL;
  must(cas_batch_commit(b, &err), err, "commit");
  cas_batch_free(b);
  free(buf);
}

static void expect_all_readable(struct fixture *f, const struct stored *s) {
  unsigned char *want = malloc(((size_t)1 << 20) + 16);
  for (unsigned i = 0; i <= N_SMALL; i++) {
    struct cordon_error *err = NULL;
    unsigned char *data = NULL;
    size_t len = 0, want_len;
    body(i, want, &want_len);
    must(cordon_cas_get(f->cas, s->hex[i], (size_t)4 << 20, &data, &len, &err), err, "get");
    assert_int_equal(len, want_len);
    assert_memory_equal(data, want, len);
    free(data);
  }
  free(want);
}

static void location(struct fixture *f, const char *hex, char *path, size_t size,
                     uint64_t *offset) {
  struct cordon_blob_info info;
  struct cordon_error *err = NULL;
  must(cordon_cas_info(f->cas, hex, &info, &err), err, "info");
  snprintf(path, size, "%s/%s", f->store, info.location);
  *offset = info.offset;
  cordon_blob_info_clear(&info);
}

static void expect_verify(struct fixture *f, size_t problems) {
  struct cordon_cas_verify_report rep;
  struct cordon_error *err = NULL;
  must(cordon_cas_verify(f->cas, NULL, &rep, &err), err, "verify");
  if (rep.n_problems != problems)
    for (size_t i = 0; i < rep.n_problems; i++)
      fprintf(stderr, "problem: %s: %s\n", rep.problems[i].object, rep.problems[i].message);
  assert_int_equal(rep.n_problems, problems);
  cordon_cas_verify_report_clear(&rep);
}

static void test_batch_packs_small_keeps_big_loose(void **state) {
  struct fixture *f = *state;
  struct stored s;
  store_batch(f, &s);
  expect_all_readable(f, &s);
  char path[256];
  uint64_t offset;
  for (unsigned i = 0; i < N_SMALL; i++) {
    location(f, s.hex[i], path, sizeof(path), &offset);
    assert_non_null(strstr(path, "/packs/"));
    assert_true(offset >= CAS_PACK_HEADER_LEN);
  }
  location(f, s.hex[s.big], path, sizeof(path), &offset);
  assert_null(strstr(path, "/packs/"));
  assert_int_equal(offset, 0);
  struct cordon_cas_verify_report rep;
  struct cordon_error *err = NULL;
  must(cordon_cas_verify(f->cas, NULL, &rep, &err), err, "verify");
  assert_int_equal(rep.n_problems, 0);
  assert_int_equal(rep.blobs, N_SMALL + 1);
  assert_true(rep.packs >= 1);
  cordon_cas_verify_report_clear(&rep);
  /* Storing the same blobs again writes no new pack. */
  struct cas_pack **packs = NULL;
  size_t before = 0, after = 0;
  must(cas_packs_list(f->cas, &packs, &before, &err), err, "list");
  cas_packs_list_free(f->cas, packs, before);
  store_batch(f, &s);
  must(cas_packs_list(f->cas, &packs, &after, &err), err, "list");
  cas_packs_list_free(f->cas, packs, after);
  assert_int_equal(after, before);
  /* A second handle on the store (another process, in effect) reads them too. */
  struct cordon_cas *other = NULL;
  must(cordon_cas_open(f->store, &other, &err), err, "open");
  struct cordon_cas *mine = f->cas;
  f->cas = other;
  expect_all_readable(f, &s);
  f->cas = mine;
  cordon_cas_close(other);
}

static void test_few_blobs_stay_loose(void **state) {
  struct fixture *f = *state;
  struct cordon_error *err = NULL;
  struct cas_batch *b = NULL;
  must(cas_batch_new(f->cas, &b, &err), err, "batch");
  char hex[CAS_PACK_MIN_BLOBS][CAS_HEX_LEN + 1];
  for (unsigned i = 0; i < CAS_PACK_MIN_BLOBS; i++) {
    char text[32];
    int len = snprintf(text, sizeof(text), "small %u", i);
    unsigned char d[CAS_DIGEST_LEN];
    must(cas_batch_add_buffer(b, text, (size_t)len, d, &err), err, "add");
    cas_hex(d, hex[i]);
  }
  must(cas_batch_commit(b, &err), err, "commit");
  cas_batch_free(b);
  struct cas_pack **packs = NULL;
  size_t n = 1;
  must(cas_packs_list(f->cas, &packs, &n, &err), err, "list");
  cas_packs_list_free(f->cas, packs, n);
  assert_int_equal(n, 0);
  for (unsigned i = 0; i < CAS_PACK_MIN_BLOBS; i++) {
    char path[256];
    uint64_t offset;
    location(f, hex[i], path, sizeof(path), &offset);
    assert_null(strstr(path, "/packs/"));
  }
  expect_verify(f, 0);
}

static void test_flipped_byte_in_pack(void **state) {
  struct fixture *f = *state;
  struct stored s;
  store_batch(f, &s);
  char path[256];
  uint64_t offset;
  location(f, s.hex[5], path, sizeof(path), &offset);
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  int fd = open(path, O_RDWR);
  assert_true(fd >= 0);
  /* A byte of the blob: its reads fail with an integrity error naming both digests. */
  unsigned char c;
  assert_int_equal(pread(fd, &c, 1, (off_t)offset + 3), 1);
  c ^= 0x40;
  assert_int_equal(pwrite(fd, &c, 1, (off_t)offset + 3), 1);
  struct cordon_error *err = NULL;
  unsigned char *data = NULL;
  size_t len = 0;
  assert_true(cordon_cas_get(f->cas, s.hex[5], 1 << 20, &data, &len, &err) < 0);
  assert_int_equal(err->kind, CORDON_ERR_INTEGRITY);
  assert_non_null(strstr(err->message, s.hex[5]));
  cordon_error_free(err);
  err = NULL;
  expect_verify(f, 1);
  c ^= 0x40;
  assert_int_equal(pwrite(fd, &c, 1, (off_t)offset + 3), 1);
  expect_verify(f, 0);
  /* A byte of the index (a digest): the name no longer matches, and the entry is out of order
   * or names a blob whose bytes hash elsewhere. Reported, never a crash. */
  off_t at = st.st_size - CAS_PACK_TRAILER_LEN - CAS_PACK_ENTRY_LEN + 1;
  assert_int_equal(pread(fd, &c, 1, at), 1);
  c ^= 0x01;
  assert_int_equal(pwrite(fd, &c, 1, at), 1);
  struct cordon_cas *fresh = NULL;
  must(cordon_cas_open(f->store, &fresh, &err), err, "open");
  struct cordon_cas_verify_report rep;
  must(cordon_cas_verify(fresh, NULL, &rep, &err), err, "verify");
  assert_true(rep.n_problems >= 1);
  cordon_cas_verify_report_clear(&rep);
  cordon_cas_close(fresh);
  close(fd);
}

/* The error of reading a blob of that pack: an integrity error that says "unreadable". */
static void expect_unreadable(struct fixture *f, const char *hex, const char *what) {
  struct cordon_cas *fresh = NULL;
  struct cordon_error *err = NULL;
  must(cordon_cas_open(f->store, &fresh, &err), err, "open");
  unsigned char *data = NULL;
  size_t len = 0;
  time_t t0 = time(NULL);
  assert_true(cordon_cas_get(fresh, hex, 1 << 20, &data, &len, &err) < 0);
  assert_true(time(NULL) - t0 < 5);
  if (err->kind != CORDON_ERR_INTEGRITY || !strstr(err->message, "unreadable") ||
      (what && !strstr(err->message, what)))
    fail_msg("expected unreadable (%s), got: %s", what ? what : "", err->message);
  cordon_error_free(err);
  err = NULL;
  struct cordon_cas_verify_report rep;
  must(cordon_cas_verify(fresh, NULL, &rep, &err), err, "verify");
  assert_true(rep.n_problems >= 1);
  cordon_cas_verify_report_clear(&rep);
  cordon_cas_close(fresh);
}

static void test_planted_pack_unreadable(void **state) {
  struct fixture *f = *state;
  struct stored s;
  store_batch(f, &s);
  char path[256], saved[300];
  uint64_t offset;
  location(f, s.hex[7], path, sizeof(path), &offset);
  snprintf(saved, sizeof(saved), "%s/saved.pack", f->dir);
  assert_int_equal(rename(path, saved), 0);
  /* a symlink to the right bytes */
  assert_int_equal(symlink(saved, path), 0);
  expect_unreadable(f, s.hex[7], "symlink");
  unlink(path);
  /* a FIFO: no hang */
  assert_int_equal(mkfifo(path, 0600), 0);
  expect_unreadable(f, s.hex[7], "FIFO");
  unlink(path);
  /* truncated: the trailer is gone */
  assert_int_equal(rename(saved, path), 0);
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(truncate(path, st.st_size / 2), 0);
  expect_unreadable(f, s.hex[7], "pack");
}

static void test_symlinked_packs_dir_refused(void **state) {
  struct fixture *f = *state;
  char packs[128], moved[128];
  snprintf(packs, sizeof(packs), "%s/packs", f->store);
  snprintf(moved, sizeof(moved), "%s/elsewhere", f->dir);
  assert_int_equal(rename(packs, moved), 0);
  assert_int_equal(symlink(moved, packs), 0);
  struct cordon_cas *cas = NULL;
  struct cordon_error *err = NULL;
  assert_true(cordon_cas_open(f->store, &cas, &err) < 0);
  assert_int_equal(err->kind, CORDON_ERR_INTEGRITY);
  assert_non_null(strstr(err->message, "packs"));
  cordon_error_free(err);
}

static void test_rewrite_keeps_what_is_asked(void **state) {
  struct fixture *f = *state;
  struct stored s;
  store_batch(f, &s);
  struct cordon_error *err = NULL;
  int lock = cas_lock_exclusive(f->cas, &err);
  assert_true(lock >= 0);
  struct cas_pack **packs = NULL;
  size_t n = 0;
  must(cas_packs_list(f->cas, &packs, &n, &err), err, "list");
  assert_true(n >= 1);
  /* Drop every other blob of every pack. */
  char dropped[N_SMALL][CAS_HEX_LEN + 1];
  size_t n_dropped = 0;
  for (size_t i = 0; i < n; i++) {
    bool *keep = calloc(packs[i]->count, sizeof(bool));
    for (size_t j = 0; j < packs[i]->count; j++) {
      keep[j] = j % 2 == 0;
      if (!keep[j])
        cas_hex(packs[i]->entries[j].digest, dropped[n_dropped++]);
    }
    must(cas_pack_rewrite(f->cas, &packs[i], 1, &keep, &err), err, "rewrite");
    free(keep);
  }
  cas_packs_list_free(f->cas, packs, n);
  close(lock);
  assert_true(n_dropped > 0);
  for (size_t i = 0; i < n_dropped; i++)
    assert_int_equal(cordon_cas_has(f->cas, dropped[i], &err), 0);
  size_t kept = 0;
  for (unsigned i = 0; i <= N_SMALL; i++) {
    int has = cordon_cas_has(f->cas, s.hex[i], &err);
    assert_true(has >= 0);
    kept += (size_t)has;
  }
  assert_int_equal(kept, N_SMALL + 1 - n_dropped);
  expect_verify(f, 0);
  /* Keeping nothing removes the pack. */
  lock = cas_lock_exclusive(f->cas, &err);
  must(cas_packs_list(f->cas, &packs, &n, &err), err, "list");
  for (size_t i = 0; i < n; i++) {
    bool *keep = calloc(packs[i]->count + 1, sizeof(bool));
    must(cas_pack_rewrite(f->cas, &packs[i], 1, &keep, &err), err, "rewrite");
    free(keep);
  }
  cas_packs_list_free(f->cas, packs, n);
  close(lock);
  must(cas_packs_list(f->cas, &packs, &n, &err), err, "list");
  cas_packs_list_free(f->cas, packs, n);
  assert_int_equal(n, 0);
  assert_int_equal(cordon_cas_has(f->cas, s.hex[0], &err), 0);
  assert_int_equal(cordon_cas_has(f->cas, s.hex[s.big], &err), 1); /* loose: untouched */
  expect_verify(f, 0);
}

/* One batch of `count` small blobs "PREFIX K blob I", committed; their digests into hex[] (when
 * not NULL). More than CAS_PACK_MIN_BLOBS of them make a pack. */
static void store_small_batch(struct fixture *f, const char *prefix, unsigned k, unsigned count,
                              char (*hex)[CAS_HEX_LEN + 1]) {
  struct cordon_error *err = NULL;
  struct cas_batch *b = NULL;
  must(cas_batch_new(f->cas, &b, &err), err, "batch");
  for (unsigned i = 0; i < count; i++) {
    char text[64];
    int len = snprintf(text, sizeof(text), "%s %u blob %u", prefix, k, i);
    unsigned char d[CAS_DIGEST_LEN];
    must(cas_batch_add_buffer(b, text, (size_t)len, d, &err), err, "add");
    if (hex)
      cas_hex(d, hex[i]);
  }
  must(cas_batch_commit(b, &err), err, "commit");
  cas_batch_free(b);
}

/* Merge every pack into one, keeping every blob, as gc does (under its lock). Returns how many
 * packs there were. */
static size_t merge_all(struct fixture *f) {
  struct cordon_error *err = NULL;
  int lock = cas_lock_exclusive(f->cas, &err);
  assert_true(lock >= 0);
  struct cas_pack **packs = NULL;
  size_t n = 0;
  must(cas_packs_list(f->cas, &packs, &n, &err), err, "list");
  bool **keep = calloc(n + 1, sizeof(*keep));
  for (size_t i = 0; i < n; i++) {
    keep[i] = calloc(packs[i]->count + 1, sizeof(bool));
    for (size_t j = 0; j < packs[i]->count; j++)
      keep[i][j] = true;
  }
  must(cas_pack_rewrite(f->cas, packs, n, keep, &err), err, "merge");
  for (size_t i = 0; i < n; i++)
    free(keep[i]);
  free(keep);
  cas_packs_list_free(f->cas, packs, n);
  close(lock);
  return n;
}

/* Several small packs (one per small snapshot) become one; every blob stays readable. */
static void test_rewrite_merges_packs(void **state) {
  struct fixture *f = *state;
  struct cordon_error *err = NULL;
  char hex[3][20][CAS_HEX_LEN + 1];
  for (unsigned batch = 0; batch < 3; batch++)
    store_small_batch(f, "batch", batch, 20, hex[batch]);
  assert_int_equal(merge_all(f), 3);
  struct cas_pack **packs = NULL;
  size_t n = 0;
  must(cas_packs_list(f->cas, &packs, &n, &err), err, "list");
  assert_int_equal(n, 1);
  assert_int_equal(packs[0]->count, 60);
  cas_packs_list_free(f->cas, packs, n);
  for (unsigned batch = 0; batch < 3; batch++)
    for (unsigned i = 0; i < 20; i++)
      assert_int_equal(cordon_cas_has(f->cas, hex[batch][i], &err), 1);
  expect_verify(f, 0);
}

/* How many of our open files are packs (removed ones included). */
static size_t open_pack_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  size_t n = 0;
  for (struct dirent *de; d && (de = readdir(d));) {
    char link[300], target[PATH_MAX];
    snprintf(link, sizeof(link), "/proc/self/fd/%s", de->d_name);
    ssize_t len = readlink(link, target, sizeof(target) - 1);
    if (len <= 0)
      continue;
    target[len] = 0;
    n += strstr(target, CAS_PACK_SUFFIX) != NULL;
  }
  if (d)
    closedir(d);
  return n;
}

static size_t pack_count(struct fixture *f) {
  struct cordon_error *err = NULL;
  struct cas_pack **packs = NULL;
  size_t n = 0;
  must(cas_packs_list(f->cas, &packs, &n, &err), err, "list");
  cas_packs_list_free(f->cas, packs, n);
  return n;
}

/* One small snapshot after another: past CAS_PACK_AUTO_MERGE small packs, the next batch merges
 * them all into one (unless another process holds the store's lock: then a later one does), so
 * a long agent loop never piles up packs (and their open files) between two gc runs. */
static void test_packs_merge_automatically(void **state) {
  struct fixture *f = *state;
  struct cordon_error *err = NULL;
  enum { BATCHES = CAS_PACK_AUTO_MERGE + 8, PER = 20 };
  static char hex[BATCHES][PER][CAS_HEX_LEN + 1];
  struct cordon_cas *other = NULL;
  must(cordon_cas_open(f->store, &other, &err), err, "open");
  size_t most = 0;
  for (unsigned k = 0; k < BATCHES; k++) {
    /* Around the threshold, another process is writing: no merge while it holds the lock. */
    bool busy = k == CAS_PACK_AUTO_MERGE;
    if (busy)
      must(cas_lock_shared(other, &err), err, "lock");
    store_small_batch(f, "step", k, PER, hex[k]);
    if (busy) {
      assert_int_equal(pack_count(f), CAS_PACK_AUTO_MERGE + 1); /* left as they were */
      cas_unlock_shared(other);
    }
    if (k == 10) /* the other handle has the first packs open */
      for (unsigned j = 0; j <= k; j++)
        assert_int_equal(cordon_cas_has(other, hex[j][0], &err), 1);
    size_t n = pack_count(f);
    most = n > most ? n : most;
    if (k == CAS_PACK_AUTO_MERGE + 1)
      assert_int_equal(n, 1); /* the 34 packs became one */
  }
  assert_int_equal(most, CAS_PACK_AUTO_MERGE + 1);
  assert_int_equal(pack_count(f), 1 + BATCHES - (CAS_PACK_AUTO_MERGE + 2));
  for (unsigned k = 0; k < BATCHES; k++)
    for (unsigned i = 0; i < PER; i++)
      assert_int_equal(cordon_cas_has(f->cas, hex[k][i], &err), 1);
  expect_verify(f, 0);
  /* The merged packs' files are closed, not kept open by these long-lived handles: each holds
   * the packs there are now, and nothing of the 34 that went (the other handle had 11 open). */
  for (unsigned k = 0; k < BATCHES; k++) /* the other handle looks at the store again */
    assert_int_equal(cordon_cas_has(other, hex[k][0], &err), 1);
  assert_int_equal(open_pack_fds(), 2 * pack_count(f));
  cordon_cas_close(other);
}

/* A reader in another process keeps reading every blob while gc-style rewrites merge the packs
 * under it and new snapshots add packs: no read ever fails. */
static void test_reads_during_merges(void **state) {
  struct fixture *f = *state;
  struct cordon_error *err = NULL;
  enum { BATCHES = 3, PER = 20 };
  char hex[BATCHES][PER][CAS_HEX_LEN + 1];
  char text[BATCHES][PER][48];
  for (unsigned k = 0; k < BATCHES; k++) {
    struct cas_batch *b = NULL;
    must(cas_batch_new(f->cas, &b, &err), err, "batch");
    for (unsigned i = 0; i < PER; i++) {
      int len = snprintf(text[k][i], sizeof(text[k][i]), "kept %u blob %u", k, i);
      unsigned char d[CAS_DIGEST_LEN];
      must(cas_batch_add_buffer(b, text[k][i], (size_t)len, d, &err), err, "add");
      cas_hex(d, hex[k][i]);
    }
    must(cas_batch_commit(b, &err), err, "commit");
    cas_batch_free(b);
  }
  pid_t reader = fork();
  assert_true(reader >= 0);
  if (reader == 0) {
    struct cordon_cas *cas = NULL;
    if (cordon_cas_open(f->store, &cas, NULL) < 0)
      _exit(2);
    time_t end = time(NULL) + 3;
    while (time(NULL) < end)
      for (unsigned k = 0; k < BATCHES; k++)
        for (unsigned i = 0; i < PER; i++) {
          struct cordon_error *e = NULL;
          unsigned char *data = NULL;
          size_t len = 0;
          if (cordon_cas_get(cas, hex[k][i], 4096, &data, &len, &e) < 0) {
            fprintf(stderr, "reader: %s\n", e ? e->message : "failed");
            _exit(1);
          }
          if (len != strlen(text[k][i]) || memcmp(data, text[k][i], len) != 0)
            _exit(3);
          free(data);
        }
    cordon_cas_close(cas);
    _exit(0);
  }
  time_t end = time(NULL) + 3;
  for (unsigned round = 0; time(NULL) < end; round++) {
    store_small_batch(f, "round", round, PER, NULL);
    merge_all(f);
  }
  int status = 0;
  assert_int_equal(waitpid(reader, &status, 0), reader);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  expect_verify(f, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_format_round_trip),
      cmocka_unit_test(test_format_refuses_malformed),
      cmocka_unit_test_setup_teardown(test_batch_packs_small_keeps_big_loose, setup, teardown),
      cmocka_unit_test_setup_teardown(test_few_blobs_stay_loose, setup, teardown),
      cmocka_unit_test_setup_teardown(test_flipped_byte_in_pack, setup, teardown),
      cmocka_unit_test_setup_teardown(test_planted_pack_unreadable, setup, teardown),
      cmocka_unit_test_setup_teardown(test_symlinked_packs_dir_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(test_rewrite_keeps_what_is_asked, setup, teardown),
      cmocka_unit_test_setup_teardown(test_rewrite_merges_packs, setup, teardown),
      cmocka_unit_test_setup_teardown(test_reads_during_merges, setup, teardown),
      cmocka_unit_test_setup_teardown(test_packs_merge_automatically, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
