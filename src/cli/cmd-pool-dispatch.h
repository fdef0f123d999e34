/* The dispatch side of pools on the command line (issue 23, items 4-6): a dispatch's hold on
 * its pool (a concurrency slot, and a warm session when one fits), `pool submit`, `pool warm`
 * (cmd-pool-dispatch.c), and `cordon worker` (cmd-worker.c). */
#ifndef CORDON_CLI_CMD_POOL_DISPATCH_H
#define CORDON_CLI_CMD_POOL_DISPATCH_H

#include <stdbool.h>
#include <sys/types.h>

#include <cordon/cordon.h>

#include "cli/cli.h"
#include "pool/pool.h"
#include "pool/slots.h"
#include "pool/warm.h"

/* A placed dispatch: the recipe, the placement (its receipt chained), the session inputs and
 * the backend they name. */
struct pool_dispatch_placed {
  struct pool_recipe recipe;
  struct pool_placement placement;
  struct pool_session_inputs inputs;
  const struct cordon_backend *backend;
  uint64_t max_concurrency;
};
void pool_dispatch_placed_clear(struct pool_dispatch_placed *d);
/* A read_only or hidden path of the pool not found in a session made without --workspace (a
 * fresh, empty directory): say so in err's message, naming --workspace. */
void pool_dispatch_workspace_hint(const struct pool_dispatch_placed *d, struct cordon_error *err);

/* A loaded attestation as pool_place takes it: out filled and returned, or NULL when a is NULL
 * or holds none (nothing was loaded into it). */
static inline const struct pool_attestation *pool_attestation_of(const struct cli_attestation *a,
                                                                 struct pool_attestation *out) {
  if (!a || !a->sha256[0])
    return NULL;
  *out = (struct pool_attestation){
      .sha256 = a->sha256, .kid = a->kid, .rows = a->rows, .n_rows = a->n_rows};
  return out;
}

/* Load the recipe (recipe_file, else recipe_json, else none) for pool and place it, through the
 * selector with the verified attestation att (NULL: none given). A refusal is
 * reported (its rule and receipt; an error object with json) and returns EXIT_UNAVAILABLE (4);
 * other failures are reported and return their exit code; EXIT_OK when placed. */
int pool_dispatch_place(const char *verb, struct cordon_context *ctx,
                        const struct cordon_registry *reg, const char *pool,
                        const char *recipe_file, const json_t *recipe_json,
                        const struct cli_attestation *att, bool json,
                        struct pool_dispatch_placed *out);

/* A dispatch's hold on its pool. */
struct pool_lease {
  struct pool_slot *slot;
  struct cordon_session *warm; /* a warm session attached, or NULL: create one cold */
  char warm_session[65];
};

/* Take a concurrency slot (waiting up to wait_seconds) and, when use_warm, a warm session whose
 * effective manifest is the placement's; drifted warm slots are quarantined (receipt chained,
 * session destroyed). The ceiling reached is reported and returns EXIT_UNAVAILABLE (4). */
int pool_lease_begin(const char *verb, struct cordon_context *ctx,
                     const struct cordon_registry *reg, const struct pool_dispatch_placed *d,
                     double wait_seconds, bool use_warm, bool json, struct pool_lease *lease);
/* Tie the lease's slot to a session that outlives this process (`session create --pool`). */
int pool_lease_bind(struct pool_lease *lease, const char *session_id, struct cordon_error **err);
/* Destroy a used warm session after this process has exited: a detached `cordon session
 * destroy ID` (this binary, spawned into a session of its own, stdio on /dev/null) that
 * inherits the lease's slot lock, so the slot stays held until the session is gone. s is closed
 * (not destroyed) here. When that cannot start, s is destroyed here (*destroyer -1). Otherwise
 * *destroyer is its pid: a caller that lives on reaps it (waitpid WNOHANG); one that exits
 * leaves it to be re-parented, and says so (exiting): its destroyer starts without being waited
 * for (proc_spawn_detached). */
int pool_lease_destroy_detached(struct pool_lease *lease, struct cordon_session *s, bool exiting,
                                pid_t *destroyer, struct cordon_error **err);
/* Let the slot go (one bound to a session stays with it). */
void pool_lease_end(struct pool_lease *lease);

/* The actor of audit entries: user:NAME, else uid:N (malloc'd; NULL on ENOMEM). */
char *pool_dispatch_actor(void);

int cmd_pool_submit(int argc, char **argv); /* `cordon pool submit` */
int cmd_pool_warm(int argc, char **argv);   /* `cordon pool warm` */
int cmd_worker(int argc, char **argv);      /* `cordon worker` */

#endif
