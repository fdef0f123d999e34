/* Garbage collection of the store (gc.c), for a project given by its state directory. */
#ifndef CORDON_SNAPSHOT_GC_H
#define CORDON_SNAPSHOT_GC_H

#include <stdbool.h>

#include <cordon/cas.h>

/* cordon_cas_gc for the project whose state directory (<project>/.cordon) is state_dir: its
 * sessions' state and receipts count as roots beside the refs. state_dir NULL: the refs alone. */
int snap_gc(struct cordon_cas *cas, const char *state_dir, bool dry_run,
            struct cordon_cas_gc_report *report, struct cordon_error **err);

#endif
