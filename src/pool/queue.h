/* The dispatch queue of a pool: <project>/.cordon/pools/queue/<pool>/{pending,claimed,done}/.
 *
 * `cordon pool submit` writes a dispatch, a canonical JSON document
 *   {"argv":[...],"nonce":HEX32,"pool":NAME,"recipe":OBJECT|null,"type":"cordon.pool.dispatch"}
 * whose id is the SHA-256 of those bytes, atomically into pending/ as <SEQ>-<ID>.json (SEQ: the
 * submission time, so workers take the oldest first). A worker claims it by renaming it into
 * claimed/: rename is atomic, so exactly one worker wins and the others see it gone. The result
 * goes to done/<ID>.json and the claimed file is removed. */
#ifndef CORDON_POOL_QUEUE_H
#define CORDON_POOL_QUEUE_H

#include <stddef.h>

#include <jansson.h>

#include <cordon/error.h>

#define POOL_DISPATCH_MAX (1024u * 1024u)
#define POOL_DISPATCH_ARGV_MAX 4096u

struct pool_dispatch {
  char id[65];
  char *pool;
  char **argv;     /* NULL-terminated */
  json_t *recipe;  /* the recipe object, or NULL */
  char *canonical; /* the dispatch's bytes, whose SHA-256 is id */
  size_t canonical_length;
  char *file; /* its name in claimed/ (claimed dispatches only) */
};

void pool_dispatch_clear(struct pool_dispatch *d);

/* ---- pure ---- */

/* Build a dispatch from its parts (recipe may be NULL; nonce 32 lowercase hex digits). */
int pool_dispatch_build(const char *pool, const json_t *recipe, const char *const *argv,
                        const char *nonce, struct pool_dispatch *out, struct cordon_error **err);
/* Parse dispatch bytes, which must be canonical; when expected_id is not NULL the bytes' hash
 * must equal it. */
int pool_dispatch_parse(const char *text, size_t length, const char *expected_id,
                        struct pool_dispatch *out, struct cordon_error **err);

/* ---- effects ---- */

/* Queue a dispatch (the nonce is drawn here); its id in d->id. */
int pool_queue_submit(const char *state_dir, const char *pool, const json_t *recipe,
                      const char *const *argv, struct pool_dispatch *out,
                      struct cordon_error **err);
/* Claim the oldest pending dispatch of pool: 1 with *out, 0 when none is pending. */
int pool_queue_claim(const char *state_dir, const char *pool, struct pool_dispatch *out,
                     struct cordon_error **err);
/* Record the result of a claimed dispatch (a JSON object, canonicalised) in done/<ID>.json and
 * remove it from claimed/. */
int pool_queue_finish(const char *state_dir, const struct pool_dispatch *d, const json_t *result,
                      struct cordon_error **err);
/* Where a dispatch stands, by its id (64 lowercase hex digits, else CORDON_ERR_USAGE). */
enum pool_dispatch_state {
  POOL_DISPATCH_UNKNOWN = 0, /* in no part of the pool's queue */
  POOL_DISPATCH_PENDING,
  POOL_DISPATCH_CLAIMED,
  POOL_DISPATCH_DONE, /* *result: the recorded result, parsed */
};
const char *pool_dispatch_state_name(enum pool_dispatch_state state);
int pool_queue_status(const char *state_dir, const char *pool, const char *id,
                      enum pool_dispatch_state *state, json_t **result, struct cordon_error **err);
/* How many dispatches of pool are pending. */
int pool_queue_pending(const char *state_dir, const char *pool, size_t *count,
                       struct cordon_error **err);

#endif
