/* The qemu monitor's check of the built guest (qemu_guest_check, src/backends/microvm/
 * qemu-vmm.c): every file SHA256SUMS names must match. A process remembers the digests it has
 * computed by the file's identity (Debian's kernel is 65 MB, and a session create runs several
 * preflights): a file changed in place (in the same second too), or replaced, after a check
 * that passed must fail the next one, never pass on the remembered digest. Pure file work in a
 * scratch dir. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "backends/microvm/qemu.h"
#include "base/fs.h"

#define KERNEL_A "kernel-A\n"
#define KERNEL_B "kernel-B\n"

static void write_text(const char *dir, const char *name, const char *text) {
  char path[256];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
}

/* SHA256SUMS for the files as they are now (through sha256sum, the format's own tool). */
static void write_sums(const char *dir) {
  char cmd[512];
  snprintf(cmd, sizeof(cmd),
           "cd '%s' && sha256sum " QEMU_GUEST_KERNEL " " QEMU_GUEST_INITRAMFS " > " QEMU_GUEST_SUMS,
           dir);
  assert_int_equal(system(cmd), 0);
}

static void expect_guest_check(const char *dir, bool pass) {
  char *why = qemu_guest_check(dir);
  assert_non_null(why);
  if (pass && why[0])
    fail_msg("expected the guest to pass: %s", why);
  if (!pass && !why[0])
    fail_msg("expected the guest to fail its checksum");
  free(why);
}

static void test_changed_kernel_fails_after_a_pass(void **state) {
  (void)state;
  char dir[] = "/tmp/cordon-guest-check.XXXXXX";
  assert_non_null(mkdtemp(dir));
  write_text(dir, QEMU_GUEST_KERNEL, KERNEL_A);
  write_text(dir, QEMU_GUEST_INITRAMFS, "initramfs\n");
  write_sums(dir);
  expect_guest_check(dir, true); /* changed within the second: not remembered */
  /* Old enough to be remembered (as a built guest is). */
  char cmd[512];
  snprintf(cmd, sizeof(cmd), "touch -d '-1 hour' '%s/" QEMU_GUEST_KERNEL "'", dir);
  assert_int_equal(system(cmd), 0);
  sleep(2); /* the ctime, which touch cannot set back, must be over a second old */
  expect_guest_check(dir, true);
  expect_guest_check(dir, true); /* the remembered digest */
  /* In place, the same size: another ctime. */
  write_text(dir, QEMU_GUEST_KERNEL, KERNEL_B);
  expect_guest_check(dir, false);
  /* Back to the first bytes: passes again (hashed anew). */
  write_text(dir, QEMU_GUEST_KERNEL, KERNEL_A);
  expect_guest_check(dir, true);
  /* Replaced by rename (another inode) with other bytes. */
  write_text(dir, "new", KERNEL_B);
  char from[256], to[256];
  snprintf(from, sizeof(from), "%s/new", dir);
  snprintf(to, sizeof(to), "%s/" QEMU_GUEST_KERNEL, dir);
  assert_int_equal(rename(from, to), 0);
  expect_guest_check(dir, false);
  fs_remove_tree(dir, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_changed_kernel_fails_after_a_pass),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
