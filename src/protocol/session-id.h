/* The form of a session id, checked in one place: cordon makes ids of 16 lowercase hex digits
 * (session.c, fs_random_hex); what it accepts, from the CLI, a state directory's entries or a
 * container's label, is 1 to 64 characters of [a-z0-9-], so an id is always a safe single path
 * component and a safe label value. */
#ifndef CORDON_PROTOCOL_SESSION_ID_H
#define CORDON_PROTOCOL_SESSION_ID_H

#include <stdbool.h>
#include <string.h>

#define CORDON_SESSION_ID_MAX 64

static inline bool cordon_session_id_valid(const char *id) {
  size_t n = id ? strlen(id) : 0;
  if (n == 0 || n > CORDON_SESSION_ID_MAX)
    return false;
  for (size_t i = 0; i < n; i++)
    if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= '0' && id[i] <= '9') || id[i] == '-'))
      return false;
  return true;
}

#endif
