/* Measuring one entry's change for the cost rule (cost.c): reads blobs from the store. */
#ifndef CORDON_RACE_COST_H
#define CORDON_RACE_COST_H

#include <cordon/cas.h>
#include <cordon/race.h>
#include <cordon/snapshot.h>

/* Add to out's lines_changed, bytes_changed and meta_changed what turning was into now costs;
 * was NULL: now was added; now NULL: was was removed (the entry itself is counted by the
 * caller as added or removed). */
int race_cost_measure(struct cordon_cas *cas, const struct cordon_snapshot_entry *was,
                      const struct cordon_snapshot_entry *now, struct cordon_race_change *out,
                      struct cordon_error **err);

#endif
