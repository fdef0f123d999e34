/* Unit tests of taking snapshots (src/snapshot/): the canonical order and manifest, symlink
 * canonicalisation, determinism across build order, mtimes, owners, users and locations (same id,
 * byte-identical export), sensitivity to every content edit, the stat cache, content stored once,
 * overlay terminal snapshots, exclusions and the store inside the tree, sparse files and the
 * snapshot limit. Restores and imports are in test-snapshot-restore.c; the store under kill -9,
 * live trees and gc in test-snapshot-store.c; the shared fixture in snapshot-fixture.c. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <cordon/cas.h>
#include <cordon/session.h>
#include <cordon/snapshot.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "snapshot/manifest.h"
#include "snapshot/statcache.h"
#include "store/cas.h"

#include "snapshot-fixture.h"

#define NOBODY 65534

static void take_stats(struct fixture *f, const char *dir, char id[CORDON_DIGEST_HEX_SIZE],
                       struct cordon_snapshot_stats *st) {
  struct cordon_error *err = NULL;
  must(cordon_snapshot_take(f->cas, dir, NULL, id, st, &err), err, "take");
}

/* ---- pure pieces ------------------------------------------------------------------------- */

static void test_path_order(void **state) {
  (void)state;
  const char *order[] = {"", "a", "a/b", "a/b/c", "a/b0", "a-b", "a.", "a0", "a\x7f", "a\xff", "b"};
  for (size_t i = 0; i + 1 < ARRAY_SIZE(order); i++)
    for (size_t j = i + 1; j < ARRAY_SIZE(order); j++) {
      assert_true(snap_path_compare(order[i], strlen(order[i]), order[j], strlen(order[j])) < 0);
      assert_true(snap_path_compare(order[j], strlen(order[j]), order[i], strlen(order[i])) > 0);
    }
  const char *longa = "0123456789abcdef0123456789abcdef/x",
             *longb = "0123456789abcdef0123456789abcdef-x";
  assert_true(snap_path_compare(longa, strlen(longa), longb, strlen(longb)) < 0);
  assert_int_equal(snap_path_compare("abc", 3, "abc", 3), 0);
}

static struct snap_entry E(const char *path, char kind, unsigned mode) {
  struct snap_entry e = {0};
  e.path = (char *)path;
  e.path_len = strlen(path);
  e.kind = kind;
  e.mode = (uint16_t)mode;
  return e;
}

static void
test_manifest_roundtrip_and_strictness(void **state) {
  (void)state;
  struct snap_entry es[6];
  es[0] = E("", SNAP_DIR, 0755);
  es[1] = E("a", SNAP_DIR, 0700);
  es[2] = E("a/f", SNAP_FILE, 0644);
  es[2].size = 12;
  memset(es[2].digest, 0xab, CAS_DIGEST_LEN);
  es[3] = E("a/l", SNAP_SYMLINK, 0777);
  es[3].target = "../b\nweird";
  es[4] = E("b", SNAP_CHAR, 0600);
  es[4].major = 1;
  es[4].minor = 3;
  es[5] = E("p", SNAP_FIFO, 0644);
  struct snap_buf buf = {0};
  struct cordon_error *err = NULL;
  must(snap_manifest_encode(es, 6, &buf, &err), err, "encode");
  struct snap_manifest m;
  must(snap_manifest_parse(buf.data, buf.length, &m, &err), err, "parse");
  assert_int_equal(m.count, 6);
  assert_string_equal(m.entries[3].target, "../b\nweird");
  assert_int_equal(m.entries[2].size, 12);
  assert_int_equal(m.entries[4].minor, 3);
  struct snap_buf again = {0};
  must(snap_manifest_encode(m.entries, m.count, &again, &err), err, "re-encode");
  assert_int_equal(again.length, buf.length);
  assert_memory_equal(again.data, buf.data, buf.length);
  snap_manifest_free(&m);
  snap_buf_free(&again);

  /* Every deviation from the canonical encoding is refused. */
  const char *hex = "abababababababababababababababababababababababababababababababab";
  struct {
    const char *text;
    size_t len;
  } bad[] = {
#define B(s) {s, sizeof(s) - 1}
      B(""),
      B("cordon-manifest 2\nd 0755 .\0"),
      B("cordon-manifest 1\n"),
      B("cordon-manifest 1\nd 0755 a\0"),                        /* no root first */
      B("cordon-manifest 1\nd 755 .\0"),                         /* short mode */
      B("cordon-manifest 1\nd 0855 .\0"),                        /* not octal */
      B("cordon-manifest 1\nd 0755 .\0d 0755 .\0"),              /* root twice */
      B("cordon-manifest 1\nd 0755 .\0d 0755 b\0d 0755 a\0"),    /* order */
      B("cordon-manifest 1\nd 0755 .\0d 0755 a\0d 0755 a\0"),    /* duplicate */
      B("cordon-manifest 1\nd 0755 .\0p 0644 a\0p 0644 a/b\0"),  /* below a non-dir */
      B("cordon-manifest 1\nd 0755 .\0l a\0/etc\0p 0644 a/x\0"), /* through a symlink */
      B("cordon-manifest 1\nd 0755 .\0d 0755 ..\0"),             /* .. */
      B("cordon-manifest 1\nd 0755 .\0d 0755 a//b\0"),           /* empty component */
      B("cordon-manifest 1\nd 0755 .\0d 0755 b/c\0"),            /* parent missing */
      B("cordon-manifest 1\nd 0755 .\0l a\0\0"),                 /* empty target */
      B("cordon-manifest 1\nd 0755 .\0d 0755 a"),                /* missing NUL */
      B("cordon-manifest 1\nd 0755 .\0x 0755 a\0"),              /* unknown kind */
      B("cordon-manifest 1\nd 0755 .\0c 0600 01 3 a\0"),         /* leading zero */
#undef B
  };
  for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
    err = NULL;
    if (snap_manifest_parse(bad[i].text, bad[i].len, &m, &err) == 0)
      fail_msg("bad manifest %zu was accepted", i);
    assert_non_null(err);
    cordon_error_free(err);
  }
  /* File fields: size with a leading zero, uppercase digest. */
  char text[256];
  int n = snprintf(text, sizeof(text), "cordon-manifest 1\nd 0755 .%cf 0644 012 %s a%c", 0, hex, 0);
  err = NULL;
  assert_true(snap_manifest_parse(text, (size_t)n, &m, &err) < 0);
  cordon_error_free(err);
  n = snprintf(text, sizeof(text), "cordon-manifest 1\nd 0755 .%cf 0644 12 %s a%c", 0,
               "ABABABABABABABABABABABABABABABABABABABABABABABABABABABABABABABAB", 0);
  err = NULL;
  assert_true(snap_manifest_parse(text, (size_t)n, &m, &err) < 0);
  cordon_error_free(err);
  n = snprintf(text, sizeof(text), "cordon-manifest 1\nd 0755 .%cf 0644 12 %s a%c", 0, hex, 0);
  err = NULL;
  must(snap_manifest_parse(text, (size_t)n, &m, &err), err, "good file entry");
  snap_manifest_free(&m);
  snap_buf_free(&buf);
}

static void expect_canonical(const char *target, const char *link, const char *want) {
  const char *roots[] = {"/ws", "/alias/root/", NULL};
  char *out = NULL;
  assert_int_equal(snap_symlink_canonical(target, link, roots, &out), 0);
  if (strcmp(out, want))
    fail_msg("%s at %s: got %s, want %s", target, link, out, want);
  free(out);
}

static void test_symlink_canonical(void **state) {
  (void)state;
  expect_canonical("/ws/a/b", "l", "a/b");
  expect_canonical("/ws/a/b", "x/y/l", "../../a/b");
  expect_canonical("/ws", "x/l", "..");
  expect_canonical("/ws/", "l", ".");
  expect_canonical("/ws//a/./c/../b", "d/l", "../a/b");
  expect_canonical("/alias/root/z", "l", "z");
  expect_canonical("/wsx/a", "l", "/wsx/a");                       /* a sibling, not inside */
  expect_canonical("/ws/../etc/passwd", "l", "/ws/../etc/passwd"); /* leaves: untouched */
  expect_canonical("/etc/passwd", "l", "/etc/passwd");
  expect_canonical("relative/x", "a/l", "relative/x");
}

/* ---- determinism ------------------------------------------------------------------------- */

/* Scatter mtimes and owners: none of it may count. */
static int scramble_cb(const char *root, const char *path, int depth) {
  (void)root;
  (void)depth;
  struct timespec ts[2] = {{123456789 + depth, 42}, {987654321 - depth * 1000, 7}};
  utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW);
  lchown(path, NOBODY, NOBODY);
  return 0;
}

static void walk_paths(const char *root, const char *path, int depth,
                       int (*cb)(const char *, const char *, int)) {
  DIR *d = opendir(path);
  if (!d)
    return;
  struct dirent *de;
  while ((de = readdir(d))) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
      continue;
    char *p = NULL;
    assert_true(asprintf(&p, "%s/%s", path, de->d_name) >= 0);
    struct stat st;
    if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
      walk_paths(root, p, depth + 1, cb);
    cb(root, p, depth);
    free(p);
  }
  closedir(d);
  cb(root, path, depth);
}

static void test_determinism(void **state) {
  struct fixture *f = *state;
  char *t1 = path_of(f, "one"), *t2 = path_of(f, "elsewhere/two");
  build_tree(t1, false);
  build_tree(t2, true);
  walk_paths(t2, t2, 0, scramble_cb);
  char id1[CORDON_DIGEST_HEX_SIZE], id2[CORDON_DIGEST_HEX_SIZE];
  take(f, t1, id1);
  take(f, t2, id2);
  assert_string_equal(id1, id2);
  size_t l1, l2;
  unsigned char *e1 = export_bytes(f, id1, &l1), *e2 = export_bytes(f, id2, &l2);
  assert_int_equal(l1, l2);
  assert_memory_equal(e1, e2, l1);
  assert_int_equal(l1 % 10240, 0);

  /* The absolute link into the tree was made relative. */
  struct cordon_snapshot_entry *es = NULL;
  size_t n = 0;
  struct cordon_error *err = NULL;
  must(cordon_snapshot_entries(f->cas, id1, &es, &n, &err), err, "entries");
  bool saw = false;
  for (size_t i = 0; i < n; i++)
    if (!strcmp(es[i].path, "abs-inside")) {
      assert_string_equal(es[i].target, "docs/readme");
      saw = true;
    }
  assert_true(saw);
  cordon_snapshot_entries_free(es, n);

  /* Another user, with its own store, over the chowned copy: the same id and image. */
  int pipefd[2];
  assert_int_equal(pipe(pipefd), 0);
  char *ustore = path_of(f, "nobody-store");
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(pipefd[0]);
    char out[CORDON_DIGEST_HEX_SIZE + 1] = "";
    if (mkdir(ustore, 0700) < 0 || chown(ustore, NOBODY, NOBODY) < 0 || setgroups(0, NULL) < 0 ||
        setresgid(NOBODY, NOBODY, NOBODY) < 0 || setresuid(NOBODY, NOBODY, NOBODY) < 0)
      _exit(2);
    struct cordon_cas *cas = NULL;
    char id[CORDON_DIGEST_HEX_SIZE];
    if (cordon_cas_open(ustore, &cas, NULL) < 0 ||
        cordon_snapshot_take(cas, t2, NULL, id, NULL, NULL) < 0)
      _exit(3);
    int fd = memfd_create("x", 0);
    if (cordon_snapshot_export(cas, id, fd, NULL, NULL) < 0)
      _exit(4);
    snprintf(out, sizeof(out), "%s", id);
    if (write(pipefd[1], out, 64) != 64)
      _exit(5);
    off_t len = lseek(fd, 0, SEEK_END);
    unsigned char *buf = malloc((size_t)len);
    if (pread(fd, buf, (size_t)len, 0) != len || write(pipefd[1], buf, (size_t)len) != len)
      _exit(6);
    _exit(0);
  }
  close(pipefd[1]);
  char uid_id[65] = "";
  assert_int_equal(read(pipefd[0], uid_id, 64), 64);
  unsigned char *e3 = malloc(l1 + 1);
  size_t got = 0;
  ssize_t r;
  while ((r = read(pipefd[0], e3 + got, l1 + 1 - got)) > 0)
    got += (size_t)r;
  close(pipefd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  assert_string_equal(uid_id, id1);
  assert_int_equal(got, l1);
  assert_memory_equal(e3, e1, l1);
  free(e1);
  free(e2);
  free(e3);
  free(ustore);
  free(t1);
  free(t2);
}

/* ---- every content edit changes the id ----------------------------------------------------- */

static void test_edits_change_id(void **state) {
  struct fixture *f = *state;
  char *base = path_of(f, "base");
  build_tree(base, false);
  char base_id[CORDON_DIGEST_HEX_SIZE];
  take(f, base, base_id);
  const char *edits[] = {"byte", "mode", "link", "emptydir", "rename", "fifo-mode", "rootmode"};
  char ids[ARRAY_SIZE(edits)][CORDON_DIGEST_HEX_SIZE];
  for (size_t i = 0; i < ARRAY_SIZE(edits); i++) {
    char *copy = NULL;
    assert_true(asprintf(&copy, "%s/edit-%zu", f->dir, i) >= 0);
    restore_to(f, base_id, copy);
    char *p = NULL;
    if (!strcmp(edits[i], "byte")) {
      assert_true(asprintf(&p, "%s/bin/tool", copy) >= 0);
      int fd = open(p, O_WRONLY);
      assert_int_equal(pwrite(fd, "X", 1, 40000), 1);
      close(fd);
    } else if (!strcmp(edits[i], "mode")) {
      assert_true(asprintf(&p, "%s/docs/readme", copy) >= 0);
      assert_int_equal(chmod(p, 0604), 0);
    } else if (!strcmp(edits[i], "link")) {
      assert_true(asprintf(&p, "%s/bin/rel", copy) >= 0);
      unlink(p);
      assert_int_equal(symlink("../docs/private", p), 0);
    } else if (!strcmp(edits[i], "emptydir")) {
      assert_true(asprintf(&p, "%s/empty/dir/new", copy) >= 0);
      assert_int_equal(mkdir(p, 0700), 0);
    } else if (!strcmp(edits[i], "rename")) {
      char *q = NULL;
      assert_true(asprintf(&p, "%s/docs/readme", copy) >= 0);
      assert_true(asprintf(&q, "%s/docs/readme2", copy) >= 0);
      assert_int_equal(rename(p, q), 0);
      free(q);
    } else if (!strcmp(edits[i], "fifo-mode")) {
      assert_true(asprintf(&p, "%s/fifo", copy) >= 0);
      assert_int_equal(chmod(p, 0600), 0);
    } else {
      assert_true(asprintf(&p, "%s", copy) >= 0);
      assert_int_equal(chmod(p, 0700), 0);
    }
    free(p);
    take(f, copy, ids[i]);
    if (!strcmp(ids[i], base_id))
      fail_msg("edit '%s' did not change the id", edits[i]);
    for (size_t k = 0; k < i; k++)
      assert_string_not_equal(ids[k], ids[i]);
    free(copy);
  }
  /* And an untouched restore has the original id. */
  char *copy = path_of(f, "untouched");
  restore_to(f, base_id, copy);
  char again[CORDON_DIGEST_HEX_SIZE];
  take(f, copy, again);
  assert_string_equal(again, base_id);
  free(copy);
  free(base);
}

/* ---- the stat cache ----------------------------------------------------------------------- */

static void test_stat_cache(void **state) {
  struct fixture *f = *state;
  char *tree = path_of(f, "cached");
  for (int i = 0; i < 50; i++) {
    char name[32], body[64];
    snprintf(name, sizeof(name), "d%d/f%d", i % 5, i);
    snprintf(body, sizeof(body), "file %d\n", i);
    mks(tree, name, body, 0644);
  }
  char id1[CORDON_DIGEST_HEX_SIZE], id2[CORDON_DIGEST_HEX_SIZE];
  struct cordon_snapshot_stats st;
  take_stats(f, tree, id1, &st);
  assert_int_equal(st.hashed_files, 50);
  /* Files this young are racy: read again. Past the margin, nothing is read. */
  sleep(STATCACHE_RACY_MARGIN + 1);
  take_stats(f, tree, id2, &st);
  assert_string_equal(id1, id2);
  take_stats(f, tree, id2, &st);
  assert_int_equal(st.hashed_files, 0);
  assert_string_equal(id1, id2);
  /* Same size, mtime put back: ctime still moves, the change is seen. */
  char *p = path_of(f, "cached/d3/f13");
  struct stat before;
  assert_int_equal(stat(p, &before), 0);
  int fd = open(p, O_WRONLY);
  assert_int_equal(pwrite(fd, "F", 1, 0), 1);
  close(fd);
  struct timespec ts[2] = {before.st_atim, before.st_mtim};
  assert_int_equal(utimensat(AT_FDCWD, p, ts, 0), 0);
  take_stats(f, tree, id2, &st);
  assert_int_equal(st.hashed_files, 1);
  assert_string_not_equal(id1, id2);
  /* A mode change alone is seen too (and reads nothing new but that file). */
  char id3[CORDON_DIGEST_HEX_SIZE];
  assert_int_equal(chmod(p, 0600), 0);
  take_stats(f, tree, id3, &st);
  assert_string_not_equal(id3, id2);
  /* New and removed names: the cache is rewritten, results stay right. */
  mks(tree, "d1/new", "new\n", 0644);
  char *gone = path_of(f, "cached/d0/f0");
  unlink(gone);
  char id4[CORDON_DIGEST_HEX_SIZE];
  take_stats(f, tree, id4, &st);
  char id5[CORDON_DIGEST_HEX_SIZE];
  struct cordon_snapshot_options nocache = {.no_stat_cache = true};
  struct cordon_error *err = NULL;
  must(cordon_snapshot_take(f->cas, tree, &nocache, id5, &st, &err), err, "take without cache");
  assert_int_equal(st.hashed_files, 50);
  assert_string_equal(id4, id5);
  /* A cache that lies (a corrupted digest) is rejected by its checksum, not believed. */
  char cache_dir[256];
  snprintf(cache_dir, sizeof(cache_dir), "%s/statcache", f->store);
  DIR *d = opendir(cache_dir);
  struct dirent *de;
  while ((de = readdir(d)))
    if (de->d_name[0] != '.') {
      char cp[512];
      snprintf(cp, sizeof(cp), "%s/%s", cache_dir, de->d_name);
      struct stat cst;
      stat(cp, &cst);
      flip(cp, cst.st_size / 2);
    }
  closedir(d);
  char id6[CORDON_DIGEST_HEX_SIZE];
  take_stats(f, tree, id6, &st);
  assert_string_equal(id6, id5);
  assert_int_equal(st.hashed_files, 50);
  free(gone);
  free(p);
  free(tree);
}

/* Content that occurs many times in one tree is stored once, also when it is big enough to be
 * streamed; restore gives every copy (and every directory mode) back. */
static void test_duplicates_stored_once(void **state) {
  struct fixture *f = *state;
  char *tree = path_of(f, "dups");
  size_t big_len = ((size_t)3 << 20) / 2;
  char *big = malloc(big_len);
  assert_non_null(big);
  for (size_t i = 0; i < big_len; i++)
    big[i] = (char)(i * 7 + 3);
  for (int i = 0; i < 30; i++) {
    char name[32];
    snprintf(name, sizeof(name), "d%d/f%d", i % 3, i);
    if (i % 3 == 2)
      mk(tree, name, big, big_len, 0644);
    else
      mks(tree, name, i % 3 ? "one\n" : "zero\n", 0644);
  }
  mkdir_in(tree, "open", 0755);
  mkdir_in(tree, "shut", 0500);
  mkdir_in(tree, "group", 0770);
  char id[CORDON_DIGEST_HEX_SIZE];
  struct cordon_snapshot_stats st;
  take_stats(f, tree, id, &st);
  assert_int_equal(st.hashed_files, 30);
  assert_int_equal(st.new_blobs, 3);
  char *out = path_of(f, "dups-restored");
  struct cordon_error *err = NULL;
  must(cordon_snapshot_restore(f->cas, id, out, NULL, &err), err, "restore");
  char again[CORDON_DIGEST_HEX_SIZE];
  take(f, out, again);
  assert_string_equal(id, again);
  const char *dirs[] = {"open", "shut", "group"};
  const mode_t modes[] = {0755, 0500, 0770};
  for (int i = 0; i < 3; i++) {
    char p2[512];
    struct stat dst;
    snprintf(p2, sizeof(p2), "%s/%s", out, dirs[i]);
    assert_int_equal(stat(p2, &dst), 0);
    assert_int_equal(dst.st_mode & 07777, modes[i]);
  }
  free(out);
  free(big);
  free(tree);
}

/* ---- overlay terminal snapshots -------------------------------------------------------------- */

static void test_overlay_terminal_snapshot(void **state) {
  struct fixture *f = *state;
  if (geteuid() != 0)
    skip();
  char *base = path_of(f, "ov-base"), *upper = path_of(f, "ov-upper"),
       *expect = path_of(f, "ov-expect");
  mks(base, "a/x", "x1\n", 0644);
  mks(base, "a/y", "y\n", 0644);
  mks(base, "b/z", "z\n", 0644);
  mks(base, "b/deeper/w", "w\n", 0644);
  mks(base, "c/old", "old\n", 0644);
  mks(base, "d", "file d\n", 0644);
  mks(base, "keep", "keep\n", 0600);
  mks(base, "keep2", "gone\n", 0644);
  char base_id[CORDON_DIGEST_HEX_SIZE];
  take(f, base, base_id);
  /* The upper layer: a modified file, a new file, a deleted directory (whiteout), an opaque
   * directory, a file replaced by a directory, a new top-level file. */
  mks(upper, "a/x", "x2\n", 0644);
  mks(upper, "a/new", "new\n", 0644);
  char *wh = path_of(f, "ov-upper/b");
  assert_int_equal(mknod(wh, S_IFCHR | 0000, makedev(0, 0)), 0);
  free(wh);
  mks(upper, "c/fresh", "fresh\n", 0644);
  char *c = path_of(f, "ov-upper/c");
  assert_int_equal(setxattr(c, "trusted.overlay.opaque", "y", 1, 0), 0);
  free(c);
  mks(upper, "d/inner", "inner\n", 0644);
  mks(upper, "e", "e\n", 0644);
  /* An xwhiteout (an empty file carrying a whiteout xattr) deletes too. */
  mks(upper, "keep2", "", 0644);
  char *xw = path_of(f, "ov-upper/keep2");
  assert_int_equal(setxattr(xw, "trusted.overlay.whiteout", "", 0, 0), 0);
  free(xw);
  /* What the merged view looks like. */
  mks(expect, "a/x", "x2\n", 0644);
  mks(expect, "a/y", "y\n", 0644);
  mks(expect, "a/new", "new\n", 0644);
  mks(expect, "c/fresh", "fresh\n", 0644);
  mks(expect, "d/inner", "inner\n", 0644);
  mks(expect, "e", "e\n", 0644);
  mks(expect, "keep", "keep\n", 0600);
  char want[CORDON_DIGEST_HEX_SIZE], got[CORDON_DIGEST_HEX_SIZE];
  take(f, expect, want);
  struct cordon_snapshot_stats st;
  struct cordon_error *err = NULL;
  const struct cordon_snapshot_options trusted = {.overlay_xattrs = CORDON_OVERLAY_XATTRS_TRUSTED};
  must(cordon_snapshot_take_overlay(f->cas, base_id, upper, &trusted, got, &st, &err), err,
       "overlay snapshot");
  assert_string_equal(got, want);
  /* Only the upper layer was read. */
  assert_int_equal(st.hashed_files, 5);
  /* Redirects are refused rather than misread. */
  char *a = path_of(f, "ov-upper/a");
  assert_int_equal(setxattr(a, "trusted.overlay.redirect", "/elsewhere", 10, 0), 0);
  assert_true(cordon_snapshot_take_overlay(f->cas, base_id, upper, &trusted, got, NULL, &err) < 0);
  assert_int_equal(err->kind, CORDON_ERR_UNSUPPORTED);
  cordon_error_free(err);
  free(a);
  free(base);
  free(upper);
  free(expect);
}

/* Overlay markers count only in the namespace the overlay was mounted with: a sandbox sets
 * user.overlay.* through an overlay mounted with trusted xattrs (finding 10), and those must
 * not delete or hide anything, nor fail the snapshot. */
static void test_overlay_markers_of_other_namespace(void **state) {
  struct fixture *f = *state;
  char *base = path_of(f, "om-base"), *upper = path_of(f, "om-upper");
  mks(base, "dir/inside", "inside\n", 0644);
  mks(base, "gone", "gone\n", 0644);
  mks(base, "meta", "meta\n", 0644);
  char base_id[CORDON_DIGEST_HEX_SIZE];
  take(f, base, base_id);
  /* Copied up with the forged markers: an empty file marked as a whiteout, a directory
   * marked opaque, a file marked as a metacopy. */
  mks(upper, "gone", "", 0644);
  mks(upper, "meta", "meta\n", 0644);
  mks(upper, "dir/added", "added\n", 0644);
  char *gone = path_of(f, "om-upper/gone"), *dir = path_of(f, "om-upper/dir"),
       *meta = path_of(f, "om-upper/meta");
  if (setxattr(gone, "user.overlay.whiteout", "y", 1, 0) < 0 && errno == ENOTSUP) {
    free(gone), free(dir), free(meta), free(base), free(upper);
    skip(); /* no user xattrs on this file system */
  }
  assert_int_equal(setxattr(dir, "user.overlay.opaque", "y", 1, 0), 0);
  assert_int_equal(setxattr(meta, "user.overlay.metacopy", "", 0, 0), 0);
  /* What the merged view holds: everything, "gone" emptied. */
  char *expect = path_of(f, "om-expect");
  mks(expect, "dir/inside", "inside\n", 0644);
  mks(expect, "dir/added", "added\n", 0644);
  mks(expect, "gone", "", 0644);
  mks(expect, "meta", "meta\n", 0644);
  char want[CORDON_DIGEST_HEX_SIZE], got[CORDON_DIGEST_HEX_SIZE];
  take(f, expect, want);
  struct cordon_error *err = NULL;
  const struct cordon_snapshot_options trusted = {.overlay_xattrs = CORDON_OVERLAY_XATTRS_TRUSTED};
  must(cordon_snapshot_take_overlay(f->cas, base_id, upper, &trusted, got, NULL, &err), err,
       "overlay snapshot, trusted markers");
  assert_string_equal(got, want);
  /* No options: no xattr marker counts at all. */
  must(cordon_snapshot_take_overlay(f->cas, base_id, upper, NULL, got, NULL, &err), err,
       "overlay snapshot, no markers");
  assert_string_equal(got, want);
  /* An overlay mounted with userxattr: now they are its markers (and a metacopy is refused). */
  const struct cordon_snapshot_options user = {.overlay_xattrs = CORDON_OVERLAY_XATTRS_USER};
  assert_true(cordon_snapshot_take_overlay(f->cas, base_id, upper, &user, got, NULL, &err) < 0);
  assert_int_equal(err->kind, CORDON_ERR_UNSUPPORTED);
  assert_non_null(strstr(err->message, "metacopy"));
  cordon_error_free(err);
  err = NULL;
  assert_int_equal(removexattr(meta, "user.overlay.metacopy"), 0);
  must(cordon_snapshot_take_overlay(f->cas, base_id, upper, &user, got, NULL, &err), err,
       "overlay snapshot, user markers");
  char *expect2 = path_of(f, "om-expect2");
  mks(expect2, "dir/added", "added\n", 0644);
  mks(expect2, "meta", "meta\n", 0644);
  take(f, expect2, want);
  assert_string_equal(got, want);
  free(gone), free(dir), free(meta), free(base), free(upper), free(expect), free(expect2);
}

/* ---- exclusions, the store inside the tree, sparse files, the byte limit --------------------- */

static void test_exclude_and_store_inside(void **state) {
  struct fixture *f = *state;
  char *tree = path_of(f, "proj");
  mks(tree, "src/main.c", "int main;\n", 0644);
  mks(tree, ".git", "gitdir: /somewhere/else\n", 0644);
  char *inner_store = path_of(f, "proj/.cordon/cas");
  struct cordon_cas *inner = NULL;
  struct cordon_error *err = NULL;
  must(cordon_cas_open(inner_store, &inner, &err), err, "inner store");
  const char *exclude[] = {".git", NULL};
  struct cordon_snapshot_options o = {.exclude = exclude};
  char id[CORDON_DIGEST_HEX_SIZE], want[CORDON_DIGEST_HEX_SIZE];
  must(cordon_snapshot_take(inner, tree, &o, id, NULL, &err), err, "take");
  char *clean = path_of(f, "clean");
  mks(clean, "src/main.c", "int main;\n", 0644);
  take(f, clean, want);
  assert_string_equal(id, want); /* neither .git nor .cordon made it in */
  cordon_cas_close(inner);
  free(inner_store);
  free(clean);
  free(tree);
}

/* A file of size bytes, a hole but for data at each (offset, length) given. */
static void mk_sparse(const char *root, const char *rel, off_t size, const off_t *data,
                      size_t n_data, bool dense) {
  char *p = NULL;
  assert_true(asprintf(&p, "%s/%s", root, rel) >= 0);
  struct cordon_error *err = NULL;
  must(fs_mkdir_p(root, 0755, &err), err, "mkdir");
  int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  assert_true(fd >= 0);
  if (dense) {
    static const char zeros[1 << 16];
    for (off_t at = 0; at < size; at += (off_t)sizeof(zeros))
      assert_true(write(fd, zeros, sizeof(zeros)) == (ssize_t)sizeof(zeros));
  }
  assert_int_equal(ftruncate(fd, size), 0);
  for (size_t i = 0; i < n_data; i++) {
    char block[4096];
    memset(block, 'a' + (int)i, sizeof(block));
    assert_int_equal(pwrite(fd, block, sizeof(block), data[i]), (ssize_t)sizeof(block));
  }
  close(fd);
  free(p);
}

static blkcnt_t blocks_of(const char *path) {
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  return st.st_blocks;
}

/* Every file of snapshot id is size bytes and its blob is a sparse loose file. */
static void expect_sparse_blobs(struct cordon_cas *cas, const char *id, off_t size) {
  struct cordon_snapshot_entry *entries = NULL;
  size_t n = 0, files = 0;
  struct cordon_error *err = NULL;
  must(cordon_snapshot_entries(cas, id, &entries, &n, &err), err, "entries");
  for (size_t i = 0; i < n; i++) {
    if (entries[i].kind != CORDON_SNAPSHOT_FILE)
      continue;
    files++;
    assert_int_equal(entries[i].size, (uint64_t)size);
    unsigned char digest[CAS_DIGEST_LEN];
    assert_int_equal(cas_unhex(entries[i].digest, digest), 0);
    struct cas_blob b;
    must(cas_blob_open(cas, digest, &b, &err), err, "blob");
    struct stat st;
    assert_int_equal(fstat(b.fd, &st), 0);
    assert_true(b.owned && !b.packed);
    assert_true((uint64_t)st.st_blocks * 512 < (uint64_t)1 << 20);
    cas_blob_close(&b);
  }
  assert_int_equal(files, 3);
  cordon_snapshot_entries_free(entries, n);
}

/* Sparse files: the same id as the same bytes written densely; the stored blob and the
 * restored file keep the holes. */
static void test_sparse_files(void **state) {
  struct fixture *f = *state;
  char *sparse = path_of(f, "sparse"), *dense = path_of(f, "dense");
  const off_t size = (off_t)24 << 20;
  const off_t middle[] = {(off_t)5 << 20, (off_t)9 << 20};
  const off_t edges[] = {0, size - 4096};
  mk_sparse(sparse, "middle", size, middle, 2, false);
  mk_sparse(sparse, "edges", size, edges, 2, false);
  mk_sparse(sparse, "hole", size, NULL, 0, false);
  mk_sparse(dense, "middle", size, middle, 2, true);
  mk_sparse(dense, "edges", size, edges, 2, true);
  mk_sparse(dense, "hole", size, NULL, 0, true);
  char *probe = path_of(f, "sparse/middle");
  if (blocks_of(probe) * 512 >= size) {
    free(probe);
    free(sparse);
    free(dense);
    skip(); /* a filesystem that keeps no holes */
  }
  free(probe);
  char sid[CORDON_DIGEST_HEX_SIZE], did[CORDON_DIGEST_HEX_SIZE];
  take(f, sparse, sid);
  expect_sparse_blobs(f->cas, sid, size);
  /* The dense tree, in a store of its own: zero blocks are stored as holes too, and the id is
   * the same (a pure function of the bytes). */
  char *store2 = path_of(f, "store2");
  struct cordon_cas *cas2 = NULL;
  struct cordon_error *err = NULL;
  must(cordon_cas_open(store2, &cas2, &err), err, "open store2");
  must(cordon_snapshot_take(cas2, dense, NULL, did, NULL, &err), err, "take dense");
  assert_string_equal(sid, did);
  expect_sparse_blobs(cas2, did, size);
  cordon_cas_close(cas2);
  free(store2);
  /* Restored with its holes, byte for byte. */
  char *out = path_of(f, "restored");
  restore_to(f, sid, out);
  const char *names[] = {"middle", "edges", "hole"};
  for (size_t i = 0; i < 3; i++) {
    char *a = NULL, *b = NULL;
    assert_true(asprintf(&a, "%s/%s", out, names[i]) >= 0);
    assert_true(asprintf(&b, "%s/%s", dense, names[i]) >= 0);
    assert_true(blocks_of(a) * 512 < (blkcnt_t)1 << 20);
    size_t la = 0, lb = 0;
    unsigned char *da = NULL, *db = NULL;
    must(fs_read_file(a, (size_t)64 << 20, &da, &la, &err), err, "read");
    must(fs_read_file(b, (size_t)64 << 20, &db, &lb, &err), err, "read");
    assert_int_equal(la, lb);
    assert_memory_equal(da, db, la);
    free(da);
    free(db);
    free(a);
    free(b);
  }
  free(out);
  free(sparse);
  free(dense);
}

/* A tree whose files hold more than the limit fails (DENIED, naming the limit) and leaves no
 * blob and no snapshot in the store. */
static void test_snapshot_limit(void **state) {
  struct fixture *f = *state;
  char *tree = path_of(f, "limited");
  char big[600];
  memset(big, 'x', sizeof(big));
  mk(tree, "a", big, sizeof(big), 0644);
  big[0] = 'y';
  mk(tree, "sub/b", big, sizeof(big), 0644);
  struct cordon_snapshot_options o = {.max_bytes = 1000};
  char id[CORDON_DIGEST_HEX_SIZE];
  struct cordon_error *err = NULL;
  assert_true(cordon_snapshot_take(f->cas, tree, &o, id, NULL, &err) < 0);
  assert_int_equal(err->kind, CORDON_ERR_DENIED);
  assert_non_null(strstr(err->message, "over the snapshot limit of 1000 bytes"));
  assert_null(strchr(err->message, '\n'));
  cordon_error_free(err);
  err = NULL;
  char **ids = NULL;
  must(cordon_snapshot_list(f->cas, &ids, &err), err, "list");
  assert_null(ids[0]);
  cordon_strv_free(ids);
  struct cas_blob_list blobs = {0};
  must(cas_list_blobs(f->cas, &blobs, &err), err, "blobs");
  assert_int_equal(blobs.count, 0);
  cas_blob_list_free(&blobs);
  /* At the limit, or unlimited, it is taken; the default (0) is 8 GiB. */
  o.max_bytes = 1200;
  must(cordon_snapshot_take(f->cas, tree, &o, id, NULL, &err), err, "take at the limit");
  o.max_bytes = CORDON_SNAPSHOT_UNLIMITED;
  must(cordon_snapshot_take(f->cas, tree, &o, id, NULL, &err), err, "take unlimited");
  take(f, tree, id);
  free(tree);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_path_order),
      cmocka_unit_test(test_manifest_roundtrip_and_strictness),
      cmocka_unit_test(test_symlink_canonical),
      cmocka_unit_test_setup_teardown(test_determinism, setup, teardown),
      cmocka_unit_test_setup_teardown(test_edits_change_id, setup, teardown),
      cmocka_unit_test_setup_teardown(test_stat_cache, setup, teardown),
      cmocka_unit_test_setup_teardown(test_duplicates_stored_once, setup, teardown),
      cmocka_unit_test_setup_teardown(test_overlay_terminal_snapshot, setup, teardown),
      cmocka_unit_test_setup_teardown(test_overlay_markers_of_other_namespace, setup, teardown),
      cmocka_unit_test_setup_teardown(test_exclude_and_store_inside, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sparse_files, setup, teardown),
      cmocka_unit_test_setup_teardown(test_snapshot_limit, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
