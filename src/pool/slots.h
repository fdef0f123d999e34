/* A pool's concurrency ceiling across processes: a slot table under
 * <project>/.cordon/pools/slots/<pool>/. Each slot is a lock file <i>.lock and a record <i>.json.
 *
 * A slot is held while a live process holds the flock of its lock file (a `run --pool` process,
 * or a `session create --pool` still creating), or while its record names a session whose state
 * directory still exists (a session outlives the process that created it: the slot is tied to
 * the session, and frees when `session destroy` removes it). A holder that dies drops its flock,
 * so its slot frees without anyone cleaning up. Acquisitions are serialised by the table's own
 * lock file, so N slots are never handed out N+1 times, even when the ceiling shrank. */
#ifndef CORDON_POOL_SLOTS_H
#define CORDON_POOL_SLOTS_H

#include <stdbool.h>
#include <stddef.h>

#include <cordon/error.h>

#define POOL_SLOTS_MAX 4096u

/* ---- pure ---- */

enum pool_slot_state {
  POOL_SLOT_FREE = 0,
  POOL_SLOT_PROCESS, /* a live process holds its lock */
  POOL_SLOT_SESSION, /* its record names a session that still exists */
  POOL_SLOT_DAMAGED, /* its record cannot be read: counted as held (fail closed) */
};

struct pool_slot_record {
  long long pid;    /* the process that took the slot (diagnostics only: the flock decides) */
  char session[65]; /* "" for none */
};

/* Parse a slot record ({"pid":N,"session":ID|null}); -1 with err when malformed. */
int pool_slot_record_parse(const char *text, size_t length, struct pool_slot_record *out,
                           struct cordon_error **err);
/* Its canonical JSON, malloc'd. */
int pool_slot_record_format(const struct pool_slot_record *record, char **out,
                            struct cordon_error **err);
/* What a slot is, from what was observed: lock_busy (another process holds its flock), the
 * record (NULL: none, or damaged is true), and whether the record's session exists. */
enum pool_slot_state pool_slot_classify(bool lock_busy, bool damaged,
                                        const struct pool_slot_record *record, bool session_exists);

/* ---- effects ---- */

struct pool_slot;

struct pool_slot_options {
  double wait_seconds; /* 0: refuse at once when every slot is held */
  double poll_seconds; /* 0: 0.05 */
};

/* Take a slot of pool_name's table under state_dir (<project>/.cordon), of max_concurrency in
 * all. Every slot held: CORDON_ERR_DENIED naming the pool and the ceiling (after waiting up to
 * opts->wait_seconds). The slot is held by this process until pool_slot_release. */
int pool_slot_acquire(const char *state_dir, const char *pool_name, unsigned max_concurrency,
                      const struct pool_slot_options *opts, struct pool_slot **out,
                      struct cordon_error **err);
/* Tie the slot to session_id (durably): it stays held after this process is gone, until the
 * session's state directory is removed. */
int pool_slot_bind_session(struct pool_slot *slot, const char *session_id,
                           struct cordon_error **err);
unsigned pool_slot_index(const struct pool_slot *slot);
/* The fd whose flock holds the slot (O_CLOEXEC): a process it is handed to holds the slot too,
 * until the last holder closes it. */
int pool_slot_lock_fd(const struct pool_slot *slot);
/* Let the slot go (a slot bound to a session stays held by the session). NULL is a no-op. */
void pool_slot_release(struct pool_slot *slot);

struct pool_slot_usage {
  unsigned held;     /* by processes and sessions */
  unsigned sessions; /* of which by sessions */
};
/* How many slots of the table are held right now (an absent table: none). */
int pool_slot_usage(const char *state_dir, const char *pool_name, struct pool_slot_usage *out,
                    struct cordon_error **err);

#endif
