/* libFuzzer target for the gate baseline file (src/agent/gate-format.c): a baseline lives in
 * .cordon/gates/ or wherever --baseline names, so anyone who can write there can hand the gate
 * any bytes. Decoding never crashes; what decodes has sorted, unique, normalised paths and
 * encodes back to exactly the bytes it came from (the format is canonical JSON, one spelling
 * per baseline). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/gate.h"
#include "snapshot/manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct agent_gate_baseline *b = NULL;
  struct cordon_error *err = NULL;
  if (agent_gate_decode((const char *)data, size, &b, &err) < 0) {
    if (b || !err || !err->message)
      abort();
    cordon_error_free(err);
    return 0;
  }
  for (size_t i = 1; i < b->count; i++) {
    const char *p = b->paths[i - 1].path, *q = b->paths[i].path;
    if (snap_path_compare(p, strlen(p), q, strlen(q)) >= 0)
      abort();
  }
  char *out = NULL;
  size_t length = 0;
  if (agent_gate_encode(b, &out, &length, NULL) < 0)
    abort();
  if (length != size || memcmp(out, data, size))
    abort(); /* one spelling per baseline */
  free(out);
  agent_gate_baseline_free(b);
  return 0;
}
