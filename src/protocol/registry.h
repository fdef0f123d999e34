/* The registry's view of the backends compiled into libcordon. The table itself lives with the
 * backends (src/backends/builtin.c), which name themselves there; the protocol layer only reads
 * it, so it never includes an implementation. */
#ifndef CORDON_PROTOCOL_REGISTRY_H
#define CORDON_PROTOCOL_REGISTRY_H

#include <cordon/backend.h>

/* NULL-terminated, in the order `cordon backends` shows them. */
extern const struct cordon_backend *const cordon_builtin_backends[];

#endif
