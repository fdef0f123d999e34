/* libFuzzer target for pool manifests and recipes (src/pool/manifest.c, override.c): files an
 * operator or an agent hands `cordon pool register`, `pool place` and `run --pool`. Neither
 * parser crashes or leaks on any input; a refused manifest names a field; an accepted one
 * re-parses from its canonical form to the same pool_hash; a recipe that parses merges into a
 * fixed pool as placed or refused (with a rule and a field), the same way twice. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pool/pool.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char fixed[] =
    "{\"name\":\"ci\",\"backend_allowlist\":[\"ns\",\"docker\"],\"template\":{\"env\":"
    "{\"LANG\":\"C\"},\"hidden\":[\"secrets\"],\"capabilities\":[\"exec\"]},\"exposed_fields\":"
    "[\"env\",\"net\",\"credential_env\",\"capabilities\",\"backend\",\"hidden\",\"read_only\","
    "\"memory\",\"pids\",\"image\",\"timeout_seconds\"],\"max_concurrency\":2,"
    "\"capability_ceiling\":[\"exec\",\"file_rw\"],\"network_egress_class\":\"restricted\","
    "\"credential_env_allowlist\":[\"GITHUB_TOKEN\"]}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct cordon_error *err = NULL;
  struct pool_manifest m, again;
  if (pool_manifest_parse((const char *)data, size, &m, &err) < 0) {
    if (!err || !err->message)
      abort();
    cordon_error_free(err);
    err = NULL;
  } else {
    if (pool_manifest_parse(m.canonical, m.canonical_length, &again, &err) < 0 ||
        strcmp(again.pool_hash, m.pool_hash) != 0)
      abort();
    pool_manifest_clear(&again);
    pool_manifest_clear(&m);
  }
  struct pool_recipe r;
  if (pool_recipe_parse((const char *)data, size, &r, &err) < 0) {
    cordon_error_free(err);
    return 0;
  }
  if (pool_manifest_parse(fixed, sizeof(fixed) - 1, &m, &err) < 0)
    abort();
  free(r.pool);
  r.pool = strdup("ci");
  struct pool_effective e1, e2;
  struct pool_refusal f1, f2;
  int a = pool_merge(&m, &r, &e1, &f1, &err);
  int b = pool_merge(&m, &r, &e2, &f2, &err);
  if (a != b || a < 0)
    abort();
  if (a == 0 && strcmp(e1.hash, e2.hash) != 0)
    abort();
  if (a == 1 && (!f1.field || !f1.message || f1.rule != f2.rule || strcmp(f1.field, f2.field)))
    abort();
  pool_effective_clear(&e1);
  pool_effective_clear(&e2);
  pool_refusal_clear(&f1);
  pool_refusal_clear(&f2);
  pool_recipe_clear(&r);
  pool_manifest_clear(&m);
  return 0;
}
