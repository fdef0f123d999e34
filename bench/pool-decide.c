/* bench/pool-decide: the placement decision of a pool, in process, N times: validate the pool
 * manifest, parse the recipe, merge, hash, choose through the selector, seal the signed
 * receipt (or the refusal receipt). Prints the rate of each path.
 * usage: pool-decide POOL.json RECIPE.json REFUSED-RECIPE.json N   (keys: $CORDON_KEY_DIR) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cordon/keys.h>

#include "pool/pool.h"

static char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rbe");
  static char buf[3][1 << 16];
  static int next;
  char *b = buf[next++ % 3];
  *n = f ? fread(b, 1, sizeof(buf[0]) - 1, f) : 0;
  if (f)
    fclose(f);
  b[*n] = 0;
  return b;
}

static double now(clockid_t c) {
  struct timespec t;
  clock_gettime(c, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* One decision; returns 0 placed, 1 refused, -1 on error. */
static int decide(const struct cordon_signing_key *key, const char *pool, size_t pool_n,
                  const char *recipe_text, size_t recipe_n) {
  struct cordon_error *err = NULL;
  struct pool_manifest m;
  struct pool_recipe r;
  struct pool_effective e;
  struct pool_refusal refusal;
  /* As the registry would list them: every feature enforced, every class offered. */
  static const struct pool_backend_status status[] = {
      {"ns", true, CORDON_CAP_EXEC | CORDON_CAP_FILE_RW | CORDON_CAP_NETWORK, CORDON_FEATURE_ALL,
       CORDON_TIER_CONTAINER, 0xfu},
      {"docker", true, CORDON_CAP_EXEC | CORDON_CAP_FILE_RW | CORDON_CAP_NETWORK,
       CORDON_FEATURE_ALL, CORDON_TIER_CONTAINER, 0xfu}};
  if (pool_manifest_parse(pool, pool_n, &m, &err) < 0 ||
      pool_recipe_parse(recipe_text, recipe_n, &r, &err) < 0) {
    fprintf(stderr, "pool-decide: %s\n", err ? err->message : "?");
    return -1;
  }
  char *doc = NULL;
  size_t n = 0;
  int got = pool_merge(&m, &r, &e, &refusal, &err);
  if (got == 0) {
    json_t *inputs = NULL;
    const char *chosen = NULL;
    char *reasons = NULL;
    if (pool_selector_inputs(e.manifest, status, 2, NULL, &inputs, &chosen, &reasons, &err) < 0 ||
        !chosen || pool_seal_placement(key, &m, &r, &e, inputs, chosen, &doc, &n, &err) < 0)
      got = -1;
    json_decref(inputs);
    free(reasons);
    pool_effective_clear(&e);
  } else if (got == 1) {
    if (pool_seal_refusal(key, m.name, &m, &r, &refusal, &doc, &n, &err) < 0)
      got = -1;
    pool_refusal_clear(&refusal);
  }
  free(doc);
  pool_recipe_clear(&r);
  pool_manifest_clear(&m);
  cordon_error_free(err);
  return got;
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: pool-decide POOL.json RECIPE.json REFUSED-RECIPE.json N\n");
    return 2;
  }
  size_t pool_n, ok_n, bad_n;
  const char *pool = slurp(argv[1], &pool_n);
  const char *ok = slurp(argv[2], &ok_n);
  const char *bad = slurp(argv[3], &bad_n);
  long n = atol(argv[4]);
  struct cordon_signing_key *key = NULL;
  struct cordon_error *err = NULL;
  if (cordon_signing_key_load(NULL, &key, &err) < 0) {
    fprintf(stderr, "pool-decide: %s\n", err->message);
    return 1;
  }
  const char *recipes[] = {ok, bad};
  size_t lengths[] = {ok_n, bad_n};
  const char *names[] = {"placed", "refused"};
  for (int k = 0; k < 2; k++) {
    double t0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_PROCESS_CPUTIME_ID);
    for (long i = 0; i < n; i++) {
      if (decide(key, pool, pool_n, recipes[k], lengths[k]) != k) {
        fprintf(stderr, "pool-decide: the %s recipe was not %s\n", names[k], names[k]);
        return 1;
      }
    }
    double s = now(CLOCK_MONOTONIC) - t0, cpu = now(CLOCK_PROCESS_CPUTIME_ID) - c0;
    /* On a shared machine the wall-clock rate is the machine's load; the CPU rate is ours. */
    printf("%-8s %ld decisions (validate, merge, hash, seal) in %.3f s: %.0f/s wall, %.0f/s of "
           "CPU time (goal >= 5000/s)\n",
           names[k], n, s, (double)n / s, (double)n / cpu);
  }
  cordon_signing_key_free(key);
  return 0;
}
