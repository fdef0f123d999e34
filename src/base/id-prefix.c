/* Abbreviated ids: which existing ids a prefix names (see id-prefix.h). No syscalls here. */
#include "base/id-prefix.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

bool id_prefix_usable(const char *s) {
  size_t n = 0;
  for (; s && s[n]; n++)
    if (!((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f')))
      return false;
  return n >= ID_PREFIX_MIN;
}

const char **id_prefix_matches(const char *prefix, const char *const *candidates, size_t *count) {
  size_t total = 0, n = 0, plen = strlen(prefix);
  while (candidates && candidates[total])
    total++;
  const char **out = calloc(total + 1, sizeof(*out));
  if (!out)
    return NULL;
  for (size_t i = 0; i < total; i++) {
    if (!strcmp(candidates[i], prefix)) {
      /* The whole id: never ambiguous, even if it is also the start of a longer one. */
      out[0] = candidates[i];
      out[1] = NULL;
      *count = 1;
      return out;
    }
    if (!strncmp(candidates[i], prefix, plen))
      out[n++] = candidates[i];
  }
  *count = n;
  return out;
}

char *id_prefix_join(const char *const *ids, size_t count, size_t max) {
  size_t len = 1;
  size_t shown = count < max ? count : max;
  for (size_t i = 0; i < shown; i++)
    len += strlen(ids[i]) + 2;
  len += 5; /* ", ..." */
  char *out = malloc(len);
  if (!out)
    return NULL;
  char *p = out;
  for (size_t i = 0; i < shown; i++) {
    size_t l = strlen(ids[i]);
    if (i) {
      memcpy(p, ", ", 2);
      p += 2;
    }
    memcpy(p, ids[i], l);
    p += l;
  }
  if (shown < count) {
    memcpy(p, ", ...", 5);
    p += 5;
  }
  *p = 0;
  return out;
}

int id_prefix_resolve(const char *what, const char *given, const char *const *candidates,
                      char **out, struct cordon_error **err) {
  *out = NULL;
  size_t n = 0;
  const char **found = id_prefix_matches(given, candidates, &n);
  if (!found)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "%s %s", what, given);
  /* Too short to abbreviate: only a whole id counts. */
  if (n == 1 && strcmp(found[0], given) && !id_prefix_usable(given))
    n = 0;
  if (n > 1 && !id_prefix_usable(given))
    n = 0;
  int r = 0;
  if (n == 0) {
    r = cordon_error_set(err, CORDON_ERR_NOT_FOUND, 0, "no such %s '%s'%s", what, given,
                         given[strspn(given, "0123456789abcdef")] || strlen(given) >= ID_PREFIX_MIN
                             ? ""
                             : " (an abbreviated id needs at least 8 hex digits)");
  } else if (n > 1) {
    char *names = id_prefix_join(found, n, 10);
    r = cordon_error_set(err, CORDON_ERR_USAGE, 0, "%s id '%s' is ambiguous: %zu match (%s)", what,
                         given, n, names ? names : "...");
    free(names);
  } else if (!(*out = strdup(found[0]))) {
    r = cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "%s %s", what, given);
  }
  free(found);
  return r;
}
