/* bench/audit-fill: append N audit entries through the library's bulk path
 * (cordon_audit_append_many, one lock and one fsync per batch) for bench/audit.
 * usage: audit-fill LOG_DIR KEY_DIR N [ROTATE_BYTES] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cordon/audit.h>
#include <cordon/keys.h>

#define BATCH 10000

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: audit-fill LOG_DIR KEY_DIR N [ROTATE_BYTES]\n");
    return 2;
  }
  unsigned long long n = strtoull(argv[3], NULL, 10);
  struct cordon_audit_options opts = {.key_dir = argv[2],
                                      .rotate_bytes = argc > 4 ? strtoull(argv[4], NULL, 10) : 0};
  struct cordon_error *err = NULL;
  struct cordon_audit_log *log = NULL;
  if (cordon_key_init(argv[2], NULL, &err) < 0 || cordon_audit_open(argv[1], &opts, &log, &err) < 0)
    goto fail;
  static struct cordon_audit_event events[BATCH];
  static char ids[BATCH][72], details[BATCH][160];
  for (unsigned long long done = 0; done < n;) {
    size_t count = n - done < BATCH ? (size_t)(n - done) : BATCH;
    for (size_t i = 0; i < count; i++) {
      unsigned long long k = done + i;
      /* Shaped like a race receipt entry: a snapshot digest and a few details. */
      snprintf(ids[i], sizeof(ids[i]), "%016llx%016llx%016llx%016llx", k * 0x9e3779b97f4a7c15ull, k,
               ~k, k * 31);
      snprintf(details[i], sizeof(details[i]),
               "{\"candidate\":\"task-%llu\",\"k\":8,\"score\":%.4f,\"tier\":\"process\","
               "\"winner\":true}",
               k % 8, (double)(k % 1000) / 1000.0);
      events[i] =
          (struct cordon_audit_event){"race.select", "user:bench", "snapshot", ids[i], details[i]};
    }
    if (cordon_audit_append_many(log, events, count, NULL, &err) < 0)
      goto fail;
    done += count;
  }
  cordon_audit_close(log);
  return 0;
fail:
  fprintf(stderr, "audit-fill: %s\n", err ? err->message : "failed");
  cordon_error_free(err);
  cordon_audit_close(log);
  return 1;
}
