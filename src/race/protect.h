/* A race's protected paths (--ro, --hide, --protect): their lists, normalised and checked as
 * `run` checks its own; the pure decisions on a candidate's terminal tree (did it change a
 * protected path; the tree its judge runs on, protected paths restored from the base); and
 * storing that tree as a snapshot, which is the only effect here. */
#ifndef CORDON_RACE_PROTECT_H
#define CORDON_RACE_PROTECT_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include <cordon/cas.h>
#include <cordon/error.h>
#include <cordon/snapshot.h>

/* Each list normalised (confine_normalize_workspace_path), sorted, without duplicates,
 * NULL-terminated and never NULL once race_protect_init succeeded. */
struct race_protect {
  char **read_only; /* enforced in the candidates' sandboxes (policy.read_only) */
  char **hidden;    /* enforced in the candidates' sandboxes (policy.hidden) */
  char **protect;   /* only compared: a change under one fails the candidate */
};

/* Normalise and check the three lists (NULL: empty): CORDON_ERR_USAGE (or DENIED for "..")
 * naming the path; read-only and hidden overlap as for `run`. */
/* Whether two entries of one path are the same to a race (pure): kind, mode, size, content,
 * link target and device numbers; what the receipt's change and the protected paths count. */
bool race_entry_same(const struct cordon_snapshot_entry *a, const struct cordon_snapshot_entry *b);

int race_protect_init(struct race_protect *p, const char *const *read_only,
                      const char *const *hidden, const char *const *protect,
                      struct cordon_error **err);
void race_protect_clear(struct race_protect *p);

/* Pure: whether any list names a path. */
bool race_protect_any(const struct race_protect *p);
/* Pure: whether a path of a manifest ("" the root) lies at or under a path of any list. */
bool race_protect_covers(const struct race_protect *p, const char *path);

/* Pure: the first path, in canonical order, under a protected path that was added, removed or
 * changed between the two manifests (in any order); NULL when there is none. Points into one of
 * the arrays. */
const char *race_protect_first_change(const struct race_protect *p,
                                      const struct cordon_snapshot_entry *base, size_t n_base,
                                      const struct cordon_snapshot_entry *terminal,
                                      size_t n_terminal);

/* Pure: the judge's tree: the terminal entries outside the protected paths and the base's
 * entries under them, in canonical order (*out borrows from the arrays; free the array only).
 * When the terminal tree lacks a directory above a protected path the base has entries under,
 * the result is no tree: storing it fails (a candidate that changed a protected path fails
 * before its judge, so that never happens in a race). */
int race_protect_compose(const struct race_protect *p, const struct cordon_snapshot_entry *base,
                         size_t n_base, const struct cordon_snapshot_entry *terminal,
                         size_t n_terminal, const struct cordon_snapshot_entry ***out,
                         size_t *n_out, struct cordon_error **err);

/* Store entries (canonical order; every file's blob already in cas) as a snapshot with its ref;
 * id receives its id. */
int race_protect_store(struct cordon_cas *cas, const struct cordon_snapshot_entry *const *entries,
                       size_t n, char id[CORDON_DIGEST_HEX_SIZE], struct cordon_error **err);

/* The receipt's "protected_paths": {"hidden", "protect", "read_only"}, each a sorted list. */
json_t *race_protect_json(const struct race_protect *p);

/* Pure, for the verifier: NULL when v is a valid "protected_paths" member (exactly the three
 * lists, each of strings that are normalised workspace paths, strictly increasing, at least one
 * path in all), else why not (static text). */
const char *race_protect_json_check(const json_t *v);
/* The lists of a "protected_paths" member race_protect_json_check accepted. */
int race_protect_from_json(const json_t *v, struct race_protect *p, struct cordon_error **err);

#endif
