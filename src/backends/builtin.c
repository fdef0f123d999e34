/* The list of built-in backends. */
#include <stddef.h>

#include "backends/builtin.h"

/* One a line, in the order `cordon backends` lists them. */
// clang-format off
const struct cordon_backend *const cordon_builtin_backends[] = {
    &cordon_backend_worktree,
    &cordon_backend_ns,
    &cordon_backend_docker,
    &cordon_backend_gvisor,
    &cordon_backend_microvm,
    NULL,
};
// clang-format on
