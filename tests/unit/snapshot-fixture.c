/* The fixture and helpers shared by the snapshot unit tests (see snapshot-fixture.h). */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/fs.h"

#include "snapshot-fixture.h"

int setup(void **state) {
  struct fixture *f = calloc(1, sizeof(*f));
  snprintf(f->dir, sizeof(f->dir), "/tmp/cordon-test-snap.XXXXXX");
  if (!mkdtemp(f->dir))
    return -1;
  chmod(f->dir, 0755); /* the other-user test walks into it */
  snprintf(f->store, sizeof(f->store), "%s/store", f->dir);
  if (cordon_cas_open(f->store, &f->cas, NULL) < 0)
    return -1;
  *state = f;
  return 0;
}

int teardown(void **state) {
  struct fixture *f = *state;
  cordon_cas_close(f->cas);
  fs_remove_tree(f->dir, NULL);
  free(f);
  return 0;
}

void must(int r, struct cordon_error *err, const char *what) {
  if (r < 0)
    fail_msg("%s: %s", what, err ? err->message : "failed");
}

char *path_of(struct fixture *f, const char *rel) {
  char *p = NULL;
  if (asprintf(&p, "%s/%s", f->dir, rel) < 0)
    abort();
  return p;
}

/* Create root/rel with content and mode, parents as needed (0755). */
void mk(const char *root, const char *rel, const void *content, size_t len, mode_t mode) {
  char *p = NULL;
  assert_true(asprintf(&p, "%s/%s", root, rel) >= 0);
  char *slash = strrchr(p, '/');
  *slash = 0;
  struct cordon_error *err = NULL;
  must(fs_mkdir_p(p, 0755, &err), err, "mkdir");
  *slash = '/';
  int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, content, len), (ssize_t)len);
  close(fd);
  assert_int_equal(chmod(p, mode), 0);
  free(p);
}

void mks(const char *root, const char *rel, const char *content, mode_t mode) {
  mk(root, rel, content, strlen(content), mode);
}

void mkdir_in(const char *root, const char *rel, mode_t mode) {
  char *p = NULL;
  assert_true(asprintf(&p, "%s/%s", root, rel) >= 0);
  struct cordon_error *err = NULL;
  must(fs_mkdir_p(p, 0755, &err), err, "mkdir");
  chmod(p, mode);
  free(p);
}

void symlink_in(const char *root, const char *rel, const char *target) {
  char *p = NULL;
  assert_true(asprintf(&p, "%s/%s", root, rel) >= 0);
  unlink(p);
  assert_int_equal(symlink(target, p), 0);
  free(p);
}

void take(struct fixture *f, const char *dir, char id[CORDON_DIGEST_HEX_SIZE]) {
  struct cordon_error *err = NULL;
  must(cordon_snapshot_take(f->cas, dir, NULL, id, NULL, &err), err, "take");
}

unsigned char *export_bytes(struct fixture *f, const char *id, size_t *len) {
  int fd = memfd_create("export", 0);
  struct cordon_error *err = NULL;
  must(cordon_snapshot_export(f->cas, id, fd, NULL, &err), err, "export");
  off_t n = lseek(fd, 0, SEEK_END);
  unsigned char *buf = malloc((size_t)n + 1);
  assert_int_equal(pread(fd, buf, (size_t)n, 0), n);
  close(fd);
  *len = (size_t)n;
  return buf;
}

void restore_to(struct fixture *f, const char *id, const char *dir) {
  struct cordon_error *err = NULL;
  must(cordon_snapshot_restore(f->cas, id, dir, NULL, &err), err, "restore");
}

static const char odd_name[] = "odd \n\t\\ \x01\x7f\xff\xfe name";

/* The same tree, built in one of two orders; absolute links point into the tree's own root. */
void build_tree(const char *root, bool reverse) {
  char big[70000];
  for (size_t i = 0; i < sizeof(big); i++)
    big[i] = (char)(i * 31 + 7);
  char abs_target[512];
  snprintf(abs_target, sizeof(abs_target), "%s/docs/readme", root);
  mkdir_in(root, "", 0755);
  for (int step = 0; step < 2; step++) {
    bool first_half = (step == 0) != reverse;
    if (first_half) {
      mks(root, "docs/readme", "read me\n", 0644);
      mks(root, "docs/private", "secret\n", 0600);
      mk(root, "bin/tool", big, sizeof(big), 0755);
      mk(root, "bin/empty", "", 0, 0640);
      symlink_in(root, "bin/rel", "../docs/readme");
      mkdir_in(root, "empty/dir", 0700);
    } else {
      symlink_in(root, "abs-inside", abs_target);
      symlink_in(root, "abs-outside", "/etc/hostname");
      mks(root, odd_name, "odd\n", 0644);
      mks(root, "z/y/x/w", "deep\n", 0444);
      char *fifo = NULL;
      assert_true(asprintf(&fifo, "%s/fifo", root) >= 0);
      assert_int_equal(mkfifo(fifo, 0620), 0);
      chmod(fifo, 0620);
      free(fifo);
    }
  }
}

void flip(const char *path, off_t at) {
  int fd = open(path, O_RDWR);
  assert_true(fd >= 0);
  unsigned char c;
  assert_int_equal(pread(fd, &c, 1, at), 1);
  c ^= 0x20;
  assert_int_equal(pwrite(fd, &c, 1, at), 1);
  close(fd);
}
