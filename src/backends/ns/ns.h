/* The ns backend's entry points beyond the protocol: garbage collection of the sessions that
 * killed cordon processes left behind (`cordon gc`). */
#ifndef CORDON_BACKENDS_NS_NS_H
#define CORDON_BACKENDS_NS_NS_H

#include <stdbool.h>
#include <stddef.h>

#include <cordon/session.h>

struct ns_gc_entry {
  char *session;
  char *reason; /* why it is left over */
  bool removed; /* false in a dry run, or when removal failed (error says why) */
  char *error;
};

/* Find this project's one-shot ns sessions (`cordon run`, race candidates) whose cordon process
 * is gone (killed with SIGKILL: nothing could clean up) and destroy them unless dry_run. A
 * session in use, a persistent session (its workspace may hold work) and a session of an older
 * cordon that recorded no owner are left alone. Then the empty cgroups of sessions of any
 * project whose directory is gone (their holder has ended itself), one entry each. */
int ns_gc(struct cordon_context *ctx, const struct cordon_registry *reg, bool dry_run,
          struct ns_gc_entry **entries, size_t *count, struct cordon_error **err);
void ns_gc_entries_free(struct ns_gc_entry *entries, size_t count);

#endif
