/* The docker backend's entry points beyond the protocol: garbage collection of containers left
 * behind by crashed cordon processes (`cordon gc`). */
#ifndef CORDON_BACKENDS_DOCKER_DOCKER_H
#define CORDON_BACKENDS_DOCKER_DOCKER_H

#include <stdbool.h>
#include <stddef.h>

#include <cordon/session.h>

/* The image sessions use when the manifest names none: $CORDON_DOCKER_IMAGE, else this. */
#define DOCKER_DEFAULT_IMAGE "cordon-test:busybox"

struct docker_gc_entry {
  char *container; /* short id */
  char *session;
  char *project; /* the project's .cordon directory */
  char *reason;  /* why it is an orphan */
  bool removed;  /* false in a dry run, or when removal failed (error says why) */
  char *error;
};

/* Find the containers cordon labelled whose session is gone: its state file does not exist
 * and the process that created it is gone (a crash between creating the container and saving
 * the state, or state removed by hand), or it was a `cordon run` session whose process died.
 * Remove them (and the dead run session's state) unless dry_run. Only the context's project unless
 * all_projects. A daemon that cannot be reached is an error naming its socket. */
int docker_gc(struct cordon_context *ctx, bool all_projects, bool dry_run,
              struct docker_gc_entry **entries, size_t *count, struct cordon_error **err);
void docker_gc_entries_free(struct docker_gc_entry *entries, size_t count);

#endif
