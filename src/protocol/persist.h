/* For built-in backends: write the session's state file before create/resume returns.
 *
 * A backend that starts slow work elsewhere (the ns holder building its sandbox on another core)
 * calls session_persist() with s->workspace and s->backend_state already final, so that writing
 * (and syncing) the state overlaps that work instead of following it. The library writes the
 * state again after create/resume only if it changed since. The durability is the session's:
 * fsync'ed unless the session is ephemeral or part of a batch (which syncs once at its end). */
#ifndef CORDON_BACKEND_PERSIST_H
#define CORDON_BACKEND_PERSIST_H

#include <stdbool.h>

#include <cordon/backend.h>

int session_persist(struct cordon_session *s, struct cordon_error **err);
/* An early state, written (not synced) before the backend starts what must not outlive the
 * session unnamed: if this process is killed before create/resume returns, `session destroy`
 * still finds it from this state. */
int session_persist_early(struct cordon_session *s, struct cordon_error **err);

/* The session's private runtime directory (protocol/rundir.h), an O_PATH fd owned by the
 * session: made (and refused if it exists) when create is true, else opened and checked. */
int session_rundir(struct cordon_session *s, bool create, struct cordon_error **err);

#endif
