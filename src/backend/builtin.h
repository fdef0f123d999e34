/* The backends compiled into libcordon. Each lives in src/backends/ and is listed here once. */
#ifndef CORDON_BACKEND_BUILTIN_H
#define CORDON_BACKEND_BUILTIN_H

#include <cordon/backend.h>

extern const struct cordon_backend cordon_backend_worktree;
extern const struct cordon_backend cordon_backend_ns;
extern const struct cordon_backend cordon_backend_docker;

/* NULL-terminated, in the order `cordon backends` shows them. */
extern const struct cordon_backend *const cordon_builtin_backends[];

#endif
