/* Warm slots: sessions provisioned ahead of dispatches (`cordon pool warm`), each keyed by the
 * effective manifest hash it was created from. Records under
 * <project>/.cordon/pools/warm/<pool>/: ready/<SESSION>.json, taken by renaming into used/
 * (atomic: a slot serves one dispatch, once), or into quarantine/ when it drifted.
 *
 * A record: {"backend","effective_manifest_hash","overrides_hash","pool","pool_hash","session"}
 * (canonical JSON). */
#ifndef CORDON_POOL_WARM_H
#define CORDON_POOL_WARM_H

#include <stddef.h>

#include <cordon/error.h>

struct pool_warm_record {
  char pool[65];
  char session[65];
  char backend[65];
  char pool_hash[65];
  char overrides_hash[65];
  char effective_manifest_hash[65];
};

/* ---- pure ---- */

enum pool_warm_fit {
  POOL_WARM_OTHER = 0, /* made for another recipe: left for its own dispatches */
  POOL_WARM_MATCH,     /* the same effective manifest and backend: may serve the dispatch */
  POOL_WARM_DRIFTED,   /* made from another body of the pool (or the same recipe merged to
                          another manifest): never used, quarantined */
};

/* How a slot fits a dispatch placed as `current` (the pool's hash, the recipe's overrides hash,
 * the effective manifest hash and the chosen backend). */
enum pool_warm_fit pool_warm_classify(const struct pool_warm_record *slot,
                                      const struct pool_warm_record *current);

int pool_warm_record_format(const struct pool_warm_record *r, char **out,
                            struct cordon_error **err);
int pool_warm_record_parse(const char *text, size_t length, struct pool_warm_record *out,
                           struct cordon_error **err);

/* ---- effects ---- */

int pool_warm_add(const char *state_dir, const struct pool_warm_record *r,
                  struct cordon_error **err);

struct pool_warm_take {
  struct pool_warm_record taken; /* when found is 1 */
  int found;
  struct pool_warm_record *drifted; /* moved to quarantine/: the caller records and destroys */
  size_t n_drifted;
};
void pool_warm_take_clear(struct pool_warm_take *t);

/* Scan pool's ready slots for a dispatch placed as current: move each drifted one into
 * quarantine/, and take the first match (moved into used/). */
int pool_warm_take(const char *state_dir, const struct pool_warm_record *current,
                   struct pool_warm_take *out, struct cordon_error **err);
/* The pool's ready slots' records (malloc'd array; none when the pool never had any). Creates
 * nothing; a record taken meanwhile or unreadable is left out. */
int pool_warm_list(const char *state_dir, const char *pool, struct pool_warm_record **out,
                   size_t *n, struct cordon_error **err);
/* Ready slots of the pool. */
int pool_warm_count(const char *state_dir, const char *pool, size_t *count,
                    struct cordon_error **err);

#endif
