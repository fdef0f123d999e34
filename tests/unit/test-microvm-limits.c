/* What bounds a microVM beyond its RAM, on qemu's command line (qemu_argv_build): --pids as
 * cordon.pids= on the kernel command line (the guest agent's RLIMIT_NPROC of the sandbox user),
 * and under TCG a translation cache of QEMU_TCG_CACHE_MIB instead of qemu's 1 GiB default. Pure:
 * no VM is booted (tests/escape/escape-microvm.sh checks both in a running guest). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backends/microvm/monitor.h"
#include "backends/microvm/qemu.h"

/* The argument after `option`, or NULL. */
static const char *after(char **argv, const char *option) {
  for (size_t i = 1; argv[i]; i++)
    if (strcmp(argv[i - 1], option) == 0)
      return argv[i];
  return NULL;
}

static char **build(uint64_t pids, bool kvm) {
  struct microvm_config cfg = {.workspace = "/w", .memory_bytes = 128ull << 20, .pids = pids};
  char **argv = qemu_argv_build("/usr/bin/qemu", &cfg, kvm, false, "/g/vmlinux", "/c/initrd", "/w");
  assert_non_null(argv);
  return argv;
}

static void test_pids_on_the_kernel_command_line(void **state) {
  (void)state;
  char **argv = build(64, false);
  const char *append = after(argv, "-append");
  assert_non_null(append);
  assert_non_null(strstr(append, " cordon.pids=64"));
  assert_non_null(strstr(append, "cordon.user=user")); /* the other words stay */
  /* Once, and nowhere else. */
  assert_null(strstr(strstr(append, "cordon.pids=") + 1, "cordon.pids="));
  for (size_t i = 0; argv[i]; i++)
    if (argv[i] != append)
      assert_null(strstr(argv[i], "cordon.pids"));
  qemu_argv_free(argv);
}

static void test_no_pids_no_word(void **state) {
  (void)state;
  char **argv = build(0, false);
  assert_null(strstr(after(argv, "-append"), "cordon.pids"));
  qemu_argv_free(argv);
}

static void test_tcg_cache_bounded(void **state) {
  (void)state;
  char **argv = build(0, false);
  char want[64];
  snprintf(want, sizeof(want), "tcg,tb-size=%u", QEMU_TCG_CACHE_MIB);
  assert_string_equal(after(argv, "-accel"), want);
  assert_true(QEMU_TCG_CACHE_MIB >= 32 && QEMU_TCG_CACHE_MIB < 1024);
  qemu_argv_free(argv);
  /* KVM has no translation cache: the accelerator is named alone. */
  argv = build(8, true);
  assert_string_equal(after(argv, "-accel"), "kvm");
  assert_non_null(strstr(after(argv, "-append"), " cordon.pids=8"));
  qemu_argv_free(argv);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pids_on_the_kernel_command_line),
      cmocka_unit_test(test_no_pids_no_word),
      cmocka_unit_test(test_tcg_cache_bounded),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
