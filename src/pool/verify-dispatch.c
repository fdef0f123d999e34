/* The audit events of the dispatch side of pools (enrolment, claims, warm slots) that
 * `pool verify` re-checks: one row per event kind, added by the code that appends it. The
 * core's own events (pool.registered, pool.updated, pool.retired, pool.placed,
 * pool.override_refused) are checked in verify.c. */
#include <stddef.h>

#include "pool/pool.h"

const struct pool_event_checker pool_dispatch_checkers[] = {
    {NULL, NULL},
};
