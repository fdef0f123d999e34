/* Unit tests of the limits' verdicts and the parse of the one exec that reports the boundary
 * and the limits together (src/attest/probes.c, pure): each value the script can print for
 * memory (dd's exit code) and pids, a limit the backend does not enforce refuted without a
 * look, a missing line (the script did not get that far) or another failure of dd unverifiable,
 * never observed; the interfaces sorted whatever order /proc/net/dev lists them in. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "attest/document.h"
#include "attest/probes.h"

static enum attest_verdict verdict_of(const struct attest_backend *b, const char *name) {
  for (size_t i = 0; i < b->n_probes; i++)
    if (!strcmp(b->probes[i].name, name))
      return b->probes[i].verdict;
  fail_msg("no probe %s", name);
  return ATTEST_UNVERIFIABLE;
}

/* The verdicts of memory and pids for what the script printed, enforced or not. */
static void judge(const char *text, bool memory, bool pids, enum attest_verdict want_memory,
                  enum attest_verdict want_pids) {
  struct attest_inside in;
  assert_int_equal(attest_inside_parse(text, &in), 0);
  struct attest_backend b = {.name = strdup("x")};
  assert_int_equal(attest_limit_probes(&b, &in, memory, pids), 0);
  assert_int_equal(b.n_probes, 2);
  if (verdict_of(&b, ATTEST_MEMORY_LIMIT) != want_memory ||
      verdict_of(&b, ATTEST_PIDS_LIMIT) != want_pids)
    fail_msg("%s (memory %d, pids %d): memory %s, pids %s", text, memory, pids,
             attest_verdict_name(verdict_of(&b, ATTEST_MEMORY_LIMIT)),
             attest_verdict_name(verdict_of(&b, ATTEST_PIDS_LIMIT)));
  attest_backend_clear(&b);
  attest_inside_clear(&in);
}

static void test_limit_verdicts(void **state) {
  (void)state;
  const enum attest_verdict O = ATTEST_OBSERVED, R = ATTEST_REFUTED, U = ATTEST_UNVERIFIABLE;
  /* Killed at the limit (137) or refused its buffer (nomem); fewer children than tried. */
  judge("connect=refused\nmemory=137\npids=stopped\n", true, true, O, O);
  judge("memory=nomem\npids=stopped\n", true, true, O, O);
  /* dd failed for another reason (a size it does not take, say): nothing shown. */
  judge("memory=1\npids=stopped\n", true, true, U, O);
  /* The buffer was had, every child started: the limits are lies. */
  judge("memory=0\npids=survived\n", true, true, R, R);
  /* No dd (127), an exit code that shows nothing, no line at all: never observed. */
  judge("memory=127\npids=\n", true, true, U, U);
  judge("memory=2\n", true, true, U, U);
  judge("proc=yes\n", true, true, U, U);
  /* Not enforced: refuted whatever was printed (nothing was tried). */
  judge("memory=137\npids=stopped\n", false, false, R, R);
  judge("", false, true, R, U);
}

static void test_interfaces_sorted(void **state) {
  (void)state;
  static const char *const cases[][2] = {
      {"interfaces=lo,\n", "lo,"}, {"interfaces=lo,eth0,ifb1,ifb0,\n", "eth0,ifb0,ifb1,lo,"},
      {"interfaces=\n", ""},       {"interfaces=b,,a,\n", "a,b,"},
      {"interfaces=b,a\n", "b,a"}, /* not the script's form: left as it is */
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct attest_inside in;
    assert_int_equal(attest_inside_parse(cases[i][0], &in), 0);
    assert_string_equal(in.interfaces, cases[i][1]);
    attest_inside_clear(&in);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_limit_verdicts),
      cmocka_unit_test(test_interfaces_sorted),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
