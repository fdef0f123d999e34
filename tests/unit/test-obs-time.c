/* obs_time_format (src/obs/events.c) computes UTC by arithmetic instead of gmtime_r (which
 * loads the time zone file): it must agree with gmtime_r on every second, leap days and
 * centuries included. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "obs/events.h"

static void check(long long seconds, long nanoseconds) {
  struct timespec t = {.tv_sec = (time_t)seconds, .tv_nsec = nanoseconds};
  char got[64], want[64];
  obs_time_format(&t, got, sizeof(got));
  struct tm tm;
  time_t s = (time_t)seconds;
  assert_non_null(gmtime_r(&s, &tm));
  snprintf(want, sizeof(want), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
           tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, nanoseconds / 1000000);
  assert_string_equal(got, want);
}

static void test_agrees_with_gmtime(void **state) {
  (void)state;
  check(0, 0);
  check(-1, 0);                   /* 1969-12-31T23:59:59 */
  check(951782400, 0);            /* 2000-02-29 */
  check(4107542400LL, 999999999); /* 2100-03-01 */
  check(1796227181, 725735044);
  /* Every day from 1900 to 2200, at a time of day that moves. */
  for (long long s = -2208988800LL; s < 7258118400LL; s += 86400 + 3607)
    check(s, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_agrees_with_gmtime)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
