/* libFuzzer target for the race's unified-diff applier (src/race/patch.c): a --patch file is the
 * operator's, but it is often written by an agent, and the file it applies to is whatever a
 * candidate's workspace holds. The input is the patch, a NUL, then the old file's bytes (the
 * same for every file of the patch). Splitting and applying never crash, every file's hunks lie
 * within the patch, and every byte of a result comes from the old file or from the hunks, so a
 * result is never longer than both together. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "race/patch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *text = (const char *)data;
  const char *nul = memchr(text, 0, size);
  size_t patch_length = nul ? (size_t)(nul - text) : size;
  const char *old = nul ? nul + 1 : NULL;
  size_t old_length = nul ? size - patch_length - 1 : 0;

  struct race_patch p;
  const char *why = NULL;
  if (race_patch_parse(text, patch_length, &p, &why) < 0) {
    if (!why)
      abort(); /* a refusal always says why */
    return 0;
  }
  if (p.n_files == 0 || p.n_files > RACE_PATCH_MAX_FILES)
    abort();
  for (size_t i = 0; i < p.n_files; i++) {
    const struct race_patch_file *f = &p.files[i];
    if (!f->path || !f->path[0] || f->path[0] == '/')
      abort(); /* a path the workspace can take */
    if (f->body < text || f->body + f->body_length > text + patch_length)
      abort(); /* the hunks lie within the patch */
    char *out = NULL;
    size_t out_length = 0;
    why = NULL;
    if (race_patch_apply(f, f->creates ? NULL : old, f->creates ? 0 : old_length, &out, &out_length,
                         &why) < 0) {
      if (!why || out)
        abort();
      continue;
    }
    if (!out || out[out_length] != 0)
      abort(); /* NUL-terminated for callers that read text */
    if (out_length > (f->creates ? 0 : old_length) + f->body_length)
      abort();
    free(out);
  }
  race_patch_clear(&p);
  return 0;
}
