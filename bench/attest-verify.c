/* bench/attest-verify: verify one attestation N times through the library
 * (cordon_attest_verify, the function `cordon attest verify` calls) and print the rate.
 * usage: attest-verify FILE KID N */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cordon/attest.h>

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: attest-verify FILE KID N\n");
    return 2;
  }
  FILE *f = fopen(argv[1], "rbe");
  static char doc[1 << 20];
  size_t length = f ? fread(doc, 1, sizeof(doc), f) : 0;
  if (f)
    fclose(f);
  long n = atol(argv[3]);
  struct timespec t0, t1, c0, c1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
  for (long i = 0; i < n; i++) {
    struct cordon_attest_report report;
    struct cordon_error *err = NULL;
    if (cordon_attest_verify(doc, length, argv[2], &report, &err) < 0 ||
        report.verdict != CORDON_VERDICT_VERIFIED) {
      fprintf(stderr, "attest-verify: not verified: %s\n", report.reason ? report.reason : "?");
      return 1;
    }
    cordon_attest_report_clear(&report);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
  double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  double cpu = (double)(c1.tv_sec - c0.tv_sec) + (double)(c1.tv_nsec - c0.tv_nsec) / 1e9;
  /* On a shared machine the wall-clock rate is the machine's load; the CPU rate is ours. */
  printf("verified %ld attestations (%zu bytes each) in %.3f s: %.0f/s wall, %.0f/s of CPU time "
         "(goal >= 1000/s)\n",
         n, length, s, (double)n / s, (double)n / cpu);
  return 0;
}
