/* The backends compiled into libcordon. Each lives in src/backends/ and is listed once in
 * builtin.c, the table the registry (protocol/registry.h) reads. */
#ifndef CORDON_BACKENDS_BUILTIN_H
#define CORDON_BACKENDS_BUILTIN_H

#include <cordon/backend.h>

#include "protocol/registry.h"

extern const struct cordon_backend cordon_backend_worktree;
extern const struct cordon_backend cordon_backend_ns;
extern const struct cordon_backend cordon_backend_docker;
extern const struct cordon_backend cordon_backend_gvisor;
extern const struct cordon_backend cordon_backend_microvm;

#endif
