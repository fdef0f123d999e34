/* Unit tests of restoring and importing snapshots (src/snapshot/): integrity errors on
 * tampering, restore of special files and modes (set-id bits stripped, devices only when
 * allowed), names of any bytes, long names and deep trees, hostile archives, interoperability
 * with GNU tar, restores that link from a reference tree, and shared bases. Taking snapshots is
 * in test-snapshot.c; the shared fixture in snapshot-fixture.c. */
#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <cordon/cas.h>
#include <cordon/snapshot.h>

#include "base/cleanup.h"
#include "store/cas.h"

#include "snapshot-fixture.h"

static int import_bytes(struct fixture *f, const void *data, size_t len,
                        char id[CORDON_DIGEST_HEX_SIZE], struct cordon_error **err) {
  int fd = memfd_create("import", 0);
  assert_int_equal(write(fd, data, len), (ssize_t)len);
  lseek(fd, 0, SEEK_SET);
  int r = cordon_snapshot_import(f->cas, fd, NULL, id, err);
  close(fd);
  return r;
}

/* ---- tampering ------------------------------------------------------------------------- */

static bool exists(const char *p) {
  struct stat st;
  return lstat(p, &st) == 0;
}

static size_t count_entries(const char *dir) {
  DIR *d = opendir(dir);
  size_t n = 0;
  struct dirent *de;
  while (d && (de = readdir(d)))
    n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
  if (d)
    closedir(d);
  return n;
}

static void expect_restore_integrity(struct fixture *f, const char *id, const char *target) {
  struct cordon_error *err = NULL;
  char *parent = path_of(f, "restores");
  mkdir(parent, 0755);
  size_t before = count_entries(parent);
  assert_true(cordon_snapshot_restore(f->cas, id, target, NULL, &err) < 0);
  assert_non_null(err);
  if (err->kind != CORDON_ERR_INTEGRITY)
    fail_msg("expected an integrity error, got: %s", err->message);
  cordon_error_free(err);
  assert_false(exists(target));
  assert_int_equal(count_entries(parent), before); /* no temporary tree left behind */
  free(parent);
}

static void test_tampering_fails_restore(void **state) {
  struct fixture *f = *state;
  char *tree = path_of(f, "tree");
  build_tree(tree, false);
  char id[CORDON_DIGEST_HEX_SIZE];
  take(f, tree, id);
  char *target = path_of(f, "restores/out");
  /* Every byte position class of the 70000-byte blob: start, middle, end. */
  struct cordon_snapshot_entry *es = NULL;
  size_t n = 0;
  struct cordon_error *err = NULL;
  must(cordon_snapshot_entries(f->cas, id, &es, &n, &err), err, "entries");
  char blob[256] = "";
  uint64_t size = 0, offset = 0;
  for (size_t i = 0; i < n; i++)
    if (!strcmp(es[i].path, "bin/tool")) {
      /* Small blobs of a snapshot live in a pack: the file and the offset come from info. */
      struct cordon_blob_info info;
      must(cordon_cas_info(f->cas, es[i].digest, &info, &err), err, "info");
      snprintf(blob, sizeof(blob), "%s/%s", f->store, info.location);
      assert_true(!strncmp(info.location, "packs/", 6));
      offset = info.offset;
      size = es[i].size;
      cordon_blob_info_clear(&info);
    }
  cordon_snapshot_entries_free(es, n);
  assert_true(size == 70000);
  off_t positions[] = {0, 1, 4095, 4096, 35000, 69999};
  for (size_t i = 0; i < ARRAY_SIZE(positions); i++)
    positions[i] += (off_t)offset;
  for (size_t i = 0; i < ARRAY_SIZE(positions); i++) {
    flip(blob, positions[i]);
    expect_restore_integrity(f, id, target);
    /* export stops too, without an end-of-archive marker */
    int fd = memfd_create("e", 0);
    assert_true(cordon_snapshot_export(f->cas, id, fd, NULL, &err) < 0);
    assert_int_equal(err->kind, CORDON_ERR_INTEGRITY);
    cordon_error_free(err);
    err = NULL;
    close(fd);
    flip(blob, positions[i]);
  }
  /* The manifest itself: any byte. */
  char manifest[256];
  snprintf(manifest, sizeof(manifest), "%s/%.2s/%s", f->store, id, id);
  struct stat st;
  assert_int_equal(stat(manifest, &st), 0);
  off_t mpos[] = {0, 5, 20, st.st_size / 2, st.st_size - 1};
  for (size_t i = 0; i < ARRAY_SIZE(mpos); i++) {
    flip(manifest, mpos[i]);
    expect_restore_integrity(f, id, target);
    flip(manifest, mpos[i]);
  }
  restore_to(f, id, target); /* intact again */
  free(target);
  free(tree);
}

/* ---- restore: modes and special files ----------------------------------------------------- */

static void test_restore_special_files(void **state) {
  struct fixture *f = *state;
  char *tree = path_of(f, "special");
  mks(tree, "ro/inside", "x", 0644);
  mkdir_in(tree, "ro", 0555);
  mks(tree, "secret", "s", 0600);
  mks(tree, "setuid", "u", 04755);
  mkdir_in(tree, "empty", 0750);
  char *p = path_of(f, "special/fifo");
  assert_int_equal(mkfifo(p, 0640), 0);
  chmod(p, 0640);
  free(p);
  p = path_of(f, "special/sock");
  int s = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", p);
  assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
  close(s);
  free(p);
  symlink_in(tree, "dangling", "does/not/exist");
  char id[CORDON_DIGEST_HEX_SIZE], back[CORDON_DIGEST_HEX_SIZE];
  take(f, tree, id);
  struct cordon_snapshot_entry *es = NULL;
  size_t n = 0;
  struct cordon_error *err = NULL;
  must(cordon_snapshot_entries(f->cas, id, &es, &n, &err), err, "entries");
  bool sock = false, fifo = false;
  for (size_t i = 0; i < n; i++) {
    sock |= es[i].kind == CORDON_SNAPSHOT_SOCKET && !strcmp(es[i].path, "sock");
    fifo |= es[i].kind == CORDON_SNAPSHOT_FIFO && !strcmp(es[i].path, "fifo");
  }
  cordon_snapshot_entries_free(es, n);
  assert_true(sock && fifo);
  /* keep_setid: the round trip is exact. */
  char *out = path_of(f, "special-out");
  struct cordon_restore_options keep = {.keep_setid = true};
  must(cordon_snapshot_restore(f->cas, id, out, &keep, &err), err, "restore");
  take(f, out, back);
  assert_string_equal(back, id);
  struct stat st;
  p = path_of(f, "special-out/secret");
  assert_int_equal(stat(p, &st), 0);
  assert_int_equal(st.st_mode & 07777, 0600);
  free(p);
  p = path_of(f, "special-out/ro");
  assert_int_equal(stat(p, &st), 0);
  assert_int_equal(st.st_mode & 07777, 0555);
  free(p);
  p = path_of(f, "special-out/sock");
  assert_int_equal(lstat(p, &st), 0);
  assert_true(S_ISSOCK(st.st_mode));
  free(p);
  /* By default a restore does not mint setuid files. */
  char *out2 = path_of(f, "special-out2");
  restore_to(f, id, out2);
  p = path_of(f, "special-out2/setuid");
  assert_int_equal(stat(p, &st), 0);
  assert_int_equal(st.st_mode & 07777, 0755);
  free(p);
  /* An existing non-empty target is refused and left alone; an empty one is replaced. */
  assert_true(cordon_snapshot_restore(f->cas, id, out, NULL, &err) < 0);
  cordon_error_free(err);
  err = NULL;
  char *empty = path_of(f, "empty-target");
  mkdir(empty, 0755);
  must(cordon_snapshot_restore(f->cas, id, empty, &keep, &err), err, "restore into empty");
  take(f, empty, back);
  assert_string_equal(back, id);
  free(empty);
  /* Device nodes: recorded; restored only when allowed. */
  if (geteuid() == 0) {
    p = path_of(f, "special/null");
    assert_int_equal(mknod(p, S_IFCHR | 0666, makedev(1, 3)), 0);
    free(p);
    take(f, tree, id);
    char *dev_out = path_of(f, "dev-out");
    assert_true(cordon_snapshot_restore(f->cas, id, dev_out, NULL, &err) < 0);
    assert_int_equal(err->kind, CORDON_ERR_DENIED);
    assert_non_null(strstr(err->message, "null"));
    cordon_error_free(err);
    err = NULL;
    assert_false(exists(dev_out));
    struct cordon_restore_options devices = {.allow_devices = true, .keep_setid = true};
    must(cordon_snapshot_restore(f->cas, id, dev_out, &devices, &err), err, "restore devices");
    take(f, dev_out, back);
    assert_string_equal(back, id);
    free(dev_out);
  }
  free(out);
  free(out2);
  free(tree);
}

/* Issue 14, finding 14: set-id bits go from directories too, the root included. The snapshot
 * records them (the mode counts in the id); only the restored tree is without them, unless
 * keep_setid. */
static void test_restore_strips_setid_dirs(void **state) {
  struct fixture *f = *state;
  char *tree = path_of(f, "setid-dirs");
  mks(tree, "g/file", "x", 0644);
  mks(tree, "u/file", "y", 0640);
  mkdir_in(tree, "g", 02775);
  mkdir_in(tree, "u", 04750);
  assert_int_equal(chmod(tree, 02755), 0);
  struct stat st;
  assert_int_equal(stat(tree, &st), 0);
  if (!(st.st_mode & S_ISGID)) { /* a group we are not in: the kernel dropped the bit */
    free(tree);
    skip();
  }
  char id[CORDON_DIGEST_HEX_SIZE], back[CORDON_DIGEST_HEX_SIZE];
  take(f, tree, id);
  struct cordon_snapshot_entry *es = NULL;
  size_t n = 0;
  struct cordon_error *err = NULL;
  must(cordon_snapshot_entries(f->cas, id, &es, &n, &err), err, "entries");
  unsigned recorded_g = 0;
  for (size_t i = 0; i < n; i++)
    if (!strcmp(es[i].path, "g"))
      recorded_g = es[i].mode;
  cordon_snapshot_entries_free(es, n);
  assert_int_equal(recorded_g, 02775);
  static const struct {
    const char *path;
    unsigned stripped;
  } dirs[] = {{"", 0755}, {"/g", 0775}, {"/u", 0750}};
  char *out = path_of(f, "setid-dirs-out");
  restore_to(f, id, out);
  for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
    char *p = NULL;
    assert_true(asprintf(&p, "%s%s", out, dirs[i].path) >= 0);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 07777, dirs[i].stripped);
    free(p);
  }
  take(f, out, back);
  assert_string_not_equal(back, id);
  /* keep_setid: the round trip is exact. */
  char *kept = path_of(f, "setid-dirs-kept");
  struct cordon_restore_options keep = {.keep_setid = true};
  must(cordon_snapshot_restore(f->cas, id, kept, &keep, &err), err, "restore");
  take(f, kept, back);
  assert_string_equal(back, id);
  free(kept);
  free(out);
  free(tree);
}

/* ---- names of any bytes, long names, deep trees ------------------------------------------ */

static void test_any_bytes_and_long_names(void **state) {
  struct fixture *f = *state;
  char *tree = path_of(f, "bytes");
  mkdir_in(tree, "", 0755);
  int root = open(tree, O_RDONLY | O_DIRECTORY);
  /* Every byte but NUL and '/' appears in some name. */
  char name[256];
  for (int part = 0; part < 2; part++) {
    size_t o = 0;
    for (int c = part ? 128 : 1; c < (part ? 256 : 128); c++)
      if (c != '/')
        name[o++] = (char)c;
    name[o] = 0;
    int fd = openat(root, name, O_WRONLY | O_CREAT, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, name, o), (ssize_t)o);
    close(fd);
  }
  /* The longest name a filesystem allows. */
  memset(name, 'L', 255);
  name[255] = 0;
  int fd = openat(root, name, O_WRONLY | O_CREAT, 0644);
  assert_true(fd >= 0);
  close(fd);
  /* A tree deeper than PATH_MAX. */
  int dir = dup(root);
  char comp[40];
  memset(comp, 'd', 30);
  comp[30] = 0;
  for (int depth = 0; depth < 160; depth++) {
    comp[0] = (char)('a' + depth % 26);
    assert_int_equal(mkdirat(dir, comp, 0755), 0);
    int next = openat(dir, comp, O_RDONLY | O_DIRECTORY);
    close(dir);
    dir = next;
  }
  fd = openat(dir, "bottom", O_WRONLY | O_CREAT, 0600);
  assert_int_equal(write(fd, "deep", 4), 4);
  close(fd);
  assert_int_equal(symlinkat("../../x", dir, "up"), 0);
  close(dir);
  close(root);

  char id[CORDON_DIGEST_HEX_SIZE], back[CORDON_DIGEST_HEX_SIZE], imported[CORDON_DIGEST_HEX_SIZE];
  take(f, tree, id);
  char *out = path_of(f, "bytes-out");
  restore_to(f, id, out);
  take(f, out, back);
  assert_string_equal(back, id);
  size_t len;
  unsigned char *img = export_bytes(f, id, &len);
  struct cordon_error *err = NULL;
  must(import_bytes(f, img, len, imported, &err), err, "import");
  assert_string_equal(imported, id);
  /* GNU tar reads the image too. */
  char *tarfile = path_of(f, "bytes.tar");
  FILE *fp = fopen(tarfile, "w");
  fwrite(img, 1, len, fp);
  fclose(fp);
  char *cmd = NULL;
  assert_true(asprintf(&cmd, "tar -tf '%s' > /dev/null 2>&1", tarfile) >= 0);
  assert_int_equal(system(cmd), 0);
  free(cmd);
  free(tarfile);
  free(img);
  free(out);
  free(tree);
}

/* ---- hostile archives ----------------------------------------------------------------------- */

struct tarb {
  unsigned char *p;
  size_t n, cap;
};

static void tb_raw(struct tarb *t, const void *d, size_t n) {
  if (n == 0)
    return;
  if (t->n + n > t->cap) {
    t->cap = (t->n + n) * 2 + 4096;
    t->p = realloc(t->p, t->cap);
  }
  memcpy(t->p + t->n, d, n);
  t->n += n;
}

static void tb_header(struct tarb *t, const char *name, char type, size_t size, const char *link,
                      unsigned mode) {
  unsigned char h[512] = {0};
  memcpy(h, name, strnlen(name, 100));
  snprintf((char *)h + 100, 8, "%07o", mode);
  snprintf((char *)h + 108, 8, "%07o", 0);
  snprintf((char *)h + 116, 8, "%07o", 0);
  snprintf((char *)h + 124, 12, "%011lo", (unsigned long)size & 077777777777ul);
  snprintf((char *)h + 136, 12, "%011o", 0);
  h[156] = (unsigned char)type;
  if (link)
    memcpy(h + 157, link, strnlen(link, 100));
  memcpy(h + 257,
         "ustar\0"
         "00",
         8);
  memset(h + 148, ' ', 8);
  unsigned sum = 0;
  for (int i = 0; i < 512; i++)
    sum += h[i];
  snprintf((char *)h + 148, 8, "%06o", sum);
  h[155] = ' ';
  tb_raw(t, h, 512);
}

static void tb_data(struct tarb *t, const void *d, size_t n) {
  static const unsigned char zeros[512];
  tb_raw(t, d, n);
  tb_raw(t, zeros, (512 - n % 512) % 512);
}

static void tb_end(struct tarb *t) {
  static const unsigned char zeros[1024];
  tb_raw(t, zeros, 1024);
}

static void tb_file(struct tarb *t, const char *name, const char *content) {
  tb_header(t, name, '0', strlen(content), NULL, 0644);
  tb_data(t, content, strlen(content));
}

struct store_state {
  size_t blobs, refs, tmp;
};

static struct store_state store_state(struct fixture *f) {
  struct store_state s = {0};
  struct cas_blob_list l;
  assert_int_equal(cas_list_blobs(f->cas, &l, NULL), 0);
  s.blobs = l.count;
  cas_blob_list_free(&l);
  char p[256];
  snprintf(p, sizeof(p), "%s/refs", f->store);
  s.refs = count_entries(p);
  snprintf(p, sizeof(p), "%s/tmp", f->store);
  s.tmp = count_entries(p);
  return s;
}

static void expect_refused(struct fixture *f, struct tarb *t, const char *what, const char *why) {
  struct store_state before = store_state(f);
  char id[CORDON_DIGEST_HEX_SIZE];
  struct cordon_error *err = NULL;
  if (import_bytes(f, t->p, t->n, id, &err) == 0)
    fail_msg("hostile archive (%s) was accepted", what);
  assert_int_equal(err->kind, CORDON_ERR_INVALID);
  if (why && !strstr(err->message, why))
    fail_msg("%s: expected \"%s\" in \"%s\"", what, why, err->message);
  cordon_error_free(err);
  struct store_state after = store_state(f);
  assert_int_equal(after.blobs, before.blobs);
  assert_int_equal(after.refs, before.refs);
  assert_int_equal(after.tmp, 0);
  free(t->p);
  memset(t, 0, sizeof(*t));
}

static void test_hostile_archives(void **state) {
  struct fixture *f = *state;
  struct tarb t = {0};

  tb_file(&t, "fine", "a file that would be stored");
  tb_file(&t, "/etc/cron.d/evil", "x");
  tb_end(&t);
  expect_refused(f, &t, "absolute path", "absolute");

  tb_file(&t, "fine", "a file that would be stored");
  tb_file(&t, "a/../../evil", "x");
  tb_end(&t);
  expect_refused(f, &t, "dotdot", "..");

  tb_file(&t, "../evil", "x");
  tb_end(&t);
  expect_refused(f, &t, "dotdot first", "..");

  tb_header(&t, "link", '2', 0, "/etc", 0777);
  tb_file(&t, "link/passwd", "root::0:0::/:/bin/sh\n");
  tb_end(&t);
  expect_refused(f, &t, "symlink then file through it", "symlink");

  tb_file(&t, "file", "x");
  tb_file(&t, "file/below", "y");
  tb_end(&t);
  expect_refused(f, &t, "file then file below it", "not a directory");

  tb_header(&t, "hl", '1', 0, "/etc/passwd", 0644);
  tb_end(&t);
  expect_refused(f, &t, "hardlink to an absolute path", "hard link");

  tb_header(&t, "hl", '1', 0, "../outside", 0644);
  tb_end(&t);
  expect_refused(f, &t, "hardlink out", "hard link");

  tb_header(&t, "hl", '1', 0, "missing", 0644);
  tb_end(&t);
  expect_refused(f, &t, "hardlink to nothing", "hard link");

  tb_header(&t, "sda", '3', 0, NULL, 0600);
  tb_end(&t);
  expect_refused(f, &t, "character device", "device");

  tb_header(&t, "sda", '4', 0, NULL, 0600);
  tb_end(&t);
  expect_refused(f, &t, "block device", "device");

  tb_header(&t, "././@PaxHeader", 'x', (size_t)2 << 20, NULL, 0644);
  tb_end(&t);
  expect_refused(f, &t, "oversized pax header", "oversized");

  tb_header(&t, "././@LongLink", 'L', (size_t)64 << 20, NULL, 0644);
  tb_end(&t);
  expect_refused(f, &t, "oversized GNU long name", "oversized");

  tb_file(&t, "dup", "one");
  tb_file(&t, "dup", "two");
  tb_end(&t);
  expect_refused(f, &t, "duplicate", "twice");

  tb_file(&t, "fine", "content");
  t.p[0] ^= 1; /* checksum no longer matches */
  tb_end(&t);
  expect_refused(f, &t, "bad checksum", "checksum");

  /* Truncations at every interesting point of a valid archive. Cut before its first header
   * ends, it is no image at all, and named so. */
  struct tarb good = {0};
  tb_file(&good, "a", "first file's content");
  tb_header(&good, "dir/", '5', 0, NULL, 0755);
  tb_file(&good, "dir/b", "second");
  tb_end(&good);
  char id[CORDON_DIGEST_HEX_SIZE];
  struct cordon_error *err = NULL;
  must(import_bytes(f, good.p, good.n, id, &err), err, "the valid archive");
  size_t cuts[] = {0, 100, 512, 600, 1024, 1536, 2000, 2048, good.n - 1024, good.n - 512};
  for (size_t i = 0; i < ARRAY_SIZE(cuts); i++) {
    tb_raw(&t, good.p, cuts[i]);
    if (cuts[i] < 512)
      expect_refused(f, &t, "cut before its first header", "not a snapshot image");
    else
      expect_refused(f, &t, "truncated", "truncated");
  }
  free(good.p);
}

/* GNU tar's own archives (gnu and pax formats, hard links, long names) import to the same
 * snapshot as the tree they came from. */
static void test_import_gnu_tar(void **state) {
  struct fixture *f = *state;
  char *tree = path_of(f, "gnu");
  char longname[220];
  memset(longname, 'n', 200);
  strcpy(longname + 200, "/tail");
  mks(tree, longname, "long\n", 0644);
  mks(tree, "a/b", "b\n", 0640);
  mkdir_in(tree, "empty", 0700);
  symlink_in(tree, "a/link", "b");
  char *p = path_of(f, "gnu/a/b"), *q = path_of(f, "gnu/hard");
  assert_int_equal(link(p, q), 0);
  free(p);
  free(q);
  char want[CORDON_DIGEST_HEX_SIZE];
  take(f, tree, want);
  const char *formats[] = {"gnu", "posix", "ustar"};
  for (size_t i = 0; i < ARRAY_SIZE(formats); i++) {
    if (!strcmp(formats[i], "ustar"))
      continue; /* the 200-byte name does not fit ustar */
    char *tarfile = NULL, *cmd = NULL;
    assert_true(asprintf(&tarfile, "%s/%s.tar", f->dir, formats[i]) >= 0);
    assert_true(asprintf(&cmd, "tar --format=%s -C '%s' -cf '%s' .", formats[i], tree, tarfile) >=
                0);
    assert_int_equal(system(cmd), 0);
    int fd = open(tarfile, O_RDONLY);
    char id[CORDON_DIGEST_HEX_SIZE];
    struct cordon_error *err = NULL;
    must(cordon_snapshot_import(f->cas, fd, NULL, id, &err), err, formats[i]);
    close(fd);
    assert_string_equal(id, want);
    free(cmd);
    free(tarfile);
  }
  free(tree);
}

/* ---- restores that share: links from a reference tree, shared bases -------------------------- */

/* A restore that links from a reference tree: files the same there (path, digest, mode) are
 * hard links to it, the rest copied, and the tree is the snapshot's. */
static void test_restore_links_from_reference(void **state) {
  struct fixture *f = *state;
  char *tree = path_of(f, "lr"), *ref = path_of(f, "lr-ref"), *out = path_of(f, "lr-out");
  mks(tree, "same", "same\n", 0644);
  mks(tree, "sub/changed", "old\n", 0644);
  mks(tree, "moded", "moded\n", 0644);
  char ref_id[CORDON_DIGEST_HEX_SIZE], id[CORDON_DIGEST_HEX_SIZE], back[CORDON_DIGEST_HEX_SIZE];
  take(f, tree, ref_id);
  struct cordon_error *err = NULL;
  must(cordon_snapshot_restore(f->cas, ref_id, ref, NULL, &err), err, "restore reference");
  mks(tree, "sub/changed", "new\n", 0644);
  char *moded = path_of(f, "lr/moded");
  assert_int_equal(chmod(moded, 0600), 0);
  take(f, tree, id);
  struct cordon_restore_options o = {.link_from_dir = ref, .link_from_id = ref_id};
  must(cordon_snapshot_restore(f->cas, id, out, &o, &err), err, "restore linked");
  take(f, out, back);
  assert_string_equal(back, id);
  struct stat a, b;
  char *p1 = path_of(f, "lr-ref/same"), *p2 = path_of(f, "lr-out/same");
  assert_int_equal(stat(p1, &a), 0);
  assert_int_equal(stat(p2, &b), 0);
  assert_true(a.st_ino == b.st_ino);
  free(p1), free(p2);
  p1 = path_of(f, "lr-ref/sub/changed"), p2 = path_of(f, "lr-out/sub/changed");
  assert_int_equal(stat(p1, &a), 0);
  assert_int_equal(stat(p2, &b), 0);
  assert_true(a.st_ino != b.st_ino);
  free(p1), free(p2);
  p1 = path_of(f, "lr-ref/moded"), p2 = path_of(f, "lr-out/moded");
  assert_int_equal(stat(p1, &a), 0);
  assert_int_equal(stat(p2, &b), 0);
  assert_true(a.st_ino != b.st_ino);
  assert_int_equal(b.st_mode & 07777, 0600);
  assert_int_equal(a.st_mode & 07777, 0644);
  free(p1), free(p2), free(moded), free(tree), free(ref), free(out);
}

static void test_materialize_base(void **state) {
  struct fixture *f = *state;
  char *tree = path_of(f, "mb");
  build_tree(tree, false);
  char id[CORDON_DIGEST_HEX_SIZE], back[CORDON_DIGEST_HEX_SIZE];
  take(f, tree, id);
  char *bases = path_of(f, "bases");
  char *p1 = NULL, *p2 = NULL;
  struct cordon_error *err = NULL;
  must(cordon_snapshot_materialize_base(f->cas, id, bases, &p1, &err), err, "materialize");
  must(cordon_snapshot_materialize_base(f->cas, id, bases, &p2, &err), err, "again");
  assert_string_equal(p1, p2);
  assert_int_equal(count_entries(bases), 1); /* no temporaries beside it */
  take(f, p1, back);
  assert_string_equal(back, id);
  /* Concurrent callers agree on one complete base. */
  char *bases2 = path_of(f, "bases2");
  pid_t kids[4];
  for (int i = 0; i < 4; i++) {
    kids[i] = fork();
    if (kids[i] == 0) {
      struct cordon_cas *cas = NULL;
      char *p = NULL;
      _exit(cordon_cas_open(f->store, &cas, NULL) < 0 ||
            cordon_snapshot_materialize_base(cas, id, bases2, &p, NULL) < 0);
    }
  }
  for (int i = 0; i < 4; i++) {
    int status = 0;
    waitpid(kids[i], &status, 0);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  assert_int_equal(count_entries(bases2), 1);
  free(p1);
  free(p2);
  free(bases);
  free(bases2);
  free(tree);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_tampering_fails_restore, setup, teardown),
      cmocka_unit_test_setup_teardown(test_restore_special_files, setup, teardown),
      cmocka_unit_test_setup_teardown(test_restore_strips_setid_dirs, setup, teardown),
      cmocka_unit_test_setup_teardown(test_any_bytes_and_long_names, setup, teardown),
      cmocka_unit_test_setup_teardown(test_hostile_archives, setup, teardown),
      cmocka_unit_test_setup_teardown(test_import_gnu_tar, setup, teardown),
      cmocka_unit_test_setup_teardown(test_restore_links_from_reference, setup, teardown),
      cmocka_unit_test_setup_teardown(test_materialize_base, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
