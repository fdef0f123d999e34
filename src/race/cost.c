/* The cost rule's measurements (CORDON_COST_RULE, docs/formats.md): what one entry's change
 * costs, its file contents read from the project's store by the manifests' digests. Every read
 * is verified by the store (cordon_cas_get), so a corrupt blob fails the measurement rather
 * than skewing a score; the comparison itself is linediff.c's pure functions. */
#include "race/cost.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "race/linediff.h"

static bool is_file(const struct cordon_snapshot_entry *e) {
  return e && e->kind == CORDON_SNAPSHOT_FILE;
}

static int read_content(struct cordon_cas *cas, const struct cordon_snapshot_entry *e,
                        unsigned char **data, size_t *length, struct cordon_error **err) {
  *data = NULL;
  *length = 0;
  if (!is_file(e) || e->size == 0)
    return 0;
  if (cordon_cas_get(cas, e->digest, CORDON_RACE_DIFF_MAX_BYTES, data, length, err) < 0)
    return cordon_error_prefix(err, "the content of /%.*s", (int)e->path_length, e->path);
  return 0;
}

/* Old file content to new (either may be absent or not a file: empty). */
static int measure_content(struct cordon_cas *cas, const struct cordon_snapshot_entry *was,
                           const struct cordon_snapshot_entry *now, struct cordon_race_change *out,
                           struct cordon_error **err) {
  uint64_t old_size = is_file(was) ? was->size : 0, new_size = is_file(now) ? now->size : 0;
  if (old_size > CORDON_RACE_DIFF_MAX_BYTES || new_size > CORDON_RACE_DIFF_MAX_BYTES) {
    /* Too large to read for a score: every byte, old and new, as before the rule. */
    out->bytes_changed += old_size + new_size;
    return 0;
  }
  _cleanup_free_ unsigned char *old = NULL;
  _cleanup_free_ unsigned char *new_ = NULL;
  size_t n_old = 0, n_new = 0;
  if (read_content(cas, was, &old, &n_old, err) < 0 ||
      read_content(cas, now, &new_, &n_new, err) < 0)
    return -1;
  uint64_t cost = 0;
  bool binary = false;
  if (linediff_cost(old, n_old, new_, n_new, &cost, &binary) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "line diff");
  if (binary)
    out->bytes_changed += cost;
  else
    out->lines_changed += cost;
  return 0;
}

static bool metadata_differs(const struct cordon_snapshot_entry *a,
                             const struct cordon_snapshot_entry *b) {
  if (a->mode != b->mode || a->major != b->major || a->minor != b->minor)
    return true;
  if (!a->target || !b->target)
    return a->target != b->target;
  return strcmp(a->target, b->target) != 0;
}

int race_cost_measure(struct cordon_cas *cas, const struct cordon_snapshot_entry *was,
                      const struct cordon_snapshot_entry *now, struct cordon_race_change *out,
                      struct cordon_error **err) {
  if (was && now) {
    if (was->kind != now->kind) {
      /* A file that became a directory (or the reverse): one change, and the content the file
       * had or has. */
      out->meta_changed++;
      if (measure_content(cas, was, NULL, out, err) < 0)
        return -1;
      return measure_content(cas, NULL, now, out, err);
    }
    if (metadata_differs(was, now))
      out->meta_changed++;
    if (is_file(was) && strcmp(was->digest, now->digest) != 0)
      return measure_content(cas, was, now, out, err);
    return 0;
  }
  return measure_content(cas, was, now, out, err);
}
