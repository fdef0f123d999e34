/* Matching an abbreviated id (a snapshot's or a session's) against the ids that exist: the
 * pure part of cordon_snapshot_resolve_id and cordon_session_resolve_id, apart from the
 * listing they do, so it can be tested on its own. */
#ifndef CORDON_BASE_ID_PREFIX_H
#define CORDON_BASE_ID_PREFIX_H

#include <stdbool.h>
#include <stddef.h>

#include <cordon/error.h>

/* The fewest hex digits an abbreviated id may have: fewer would match by accident. */
#define ID_PREFIX_MIN 8

/* s is lowercase hex, at least ID_PREFIX_MIN digits: a usable abbreviation. */
bool id_prefix_usable(const char *s);
/* The candidates that begin with prefix, in their order, as a new vector (borrowed strings,
 * free only the array); an exact match alone when there is one. NULL only on ENOMEM. */
const char **id_prefix_matches(const char *prefix, const char *const *candidates, size_t *count);
/* "a, b, c" (at most max names, then ", ..."), malloc'd; NULL on ENOMEM. */
char *id_prefix_join(const char *const *ids, size_t count, size_t max);
/* The one candidate given names (whole, or a prefix of it), malloc'd in *out. None: "no such
 * WHAT 'given'" (CORDON_ERR_NOT_FOUND); several: "WHAT id 'given' is ambiguous: a, b, ..."
 * (CORDON_ERR_USAGE). A prefix shorter than ID_PREFIX_MIN only matches a whole id. */
int id_prefix_resolve(const char *what, const char *given, const char *const *candidates,
                      char **out, struct cordon_error **err);

#endif
