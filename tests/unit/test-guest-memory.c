/* The guest agent's memory watch (guest/memory.c), pure over a /proc given: /proc/meminfo's
 * fields, the floor below which it acts, and the process it chooses (the highest oom_score, never
 * pid 1, never a score of 0). tests/escape/escape-microvm.sh checks it in a running guest: a
 * memory hog in a 192 MiB VM ends by SIGKILL, never by a stall. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "guest/guest.h"

static const char meminfo[] = "MemTotal:         196608 kB\n"
                              "MemFree:            9000 kB\n"
                              "MemAvailable:       7000 kB\n"
                              "Buffers:               0 kB\n";

static void test_parse(void **state) {
  (void)state;
  struct guest_meminfo m = {0};
  assert_true(guest_meminfo_parse(meminfo, &m));
  assert_int_equal(m.total_kib, 196608);
  assert_int_equal(m.available_kib, 7000);
  /* A field missing, a value missing, another unit, a name that only starts the same. */
  assert_false(guest_meminfo_parse("MemTotal: 100 kB\nMemFree: 5 kB\n", &m));
  assert_false(guest_meminfo_parse("MemTotal: 100 kB\nMemAvailable: kB\n", &m));
  assert_false(guest_meminfo_parse("MemTotal: 100 kB\nMemAvailable: 5 MB\n", &m));
  assert_false(guest_meminfo_parse("MemTotalX: 100 kB\nMemAvailable: 5 kB\n", &m));
  assert_false(guest_meminfo_parse("MemTotal: 0 kB\nMemAvailable: 0 kB\n", &m));
  assert_false(guest_meminfo_parse("", &m));
}

static void test_floor(void **state) {
  (void)state;
  /* 192 MiB: 1/25 is under 8 MiB, so the floor is 8 MiB. */
  assert_true(guest_memory_low(&(struct guest_meminfo){196608, 8191}));
  assert_false(guest_memory_low(&(struct guest_meminfo){196608, 8192}));
  /* 4 GiB: 1/25 of it. */
  assert_true(guest_memory_low(&(struct guest_meminfo){4194304, 167771}));
  assert_false(guest_memory_low(&(struct guest_meminfo){4194304, 167772}));
}

static void put(const char *root, const char *name, const char *text) {
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", root, name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static void dir(const char *root, const char *name) {
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", root, name);
  assert_int_equal(mkdir(path, 0755), 0);
}

static void test_choose(void **state) {
  (void)state;
  char root[] = "/tmp/cordon-guest-memory.XXXXXX";
  assert_non_null(mkdtemp(root));
  long score = -1;
  assert_int_equal(guest_oom_choose(root, &score), -1); /* nobody at all */
  dir(root, "1"), put(root, "1/oom_score", "2000\n");   /* pid 1: never */
  dir(root, "5"), put(root, "5/oom_score", "10\n");
  dir(root, "17"), put(root, "17/oom_score", "900\n");
  dir(root, "23"), put(root, "23/oom_score", "0\n"); /* a keeper (-1000) */
  dir(root, "42");                                   /* gone before its score was read */
  dir(root, "self"), put(root, "self/oom_score", "1999\n");
  dir(root, "0x99"), put(root, "0x99/oom_score", "1999\n");
  put(root, "meminfo", meminfo);
  assert_int_equal(guest_oom_choose(root, &score), 17);
  assert_int_equal(score, 900);
  struct guest_meminfo m = {0};
  assert_int_equal(guest_meminfo_read(root, &m), 0);
  assert_true(guest_memory_low(&m));
  /* Only scores of 0 and pid 1: nothing to kill. */
  char cleanup[600];
  snprintf(cleanup, sizeof(cleanup), "rm -rf %s/5 %s/17", root, root);
  assert_int_equal(system(cleanup), 0);
  assert_int_equal(guest_oom_choose(root, &score), -1);
  snprintf(cleanup, sizeof(cleanup), "rm -rf %s", root);
  assert_int_equal(system(cleanup), 0);
  assert_int_equal(guest_meminfo_read(root, &m), -1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse),
      cmocka_unit_test(test_floor),
      cmocka_unit_test(test_choose),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
