/* `--pool NAME [--recipe FILE]` of `cordon run` and `cordon session create` (cmd-pool.c):
 * place first, then create from the effective manifest. */
#ifndef CORDON_CLI_CMD_POOL_H
#define CORDON_CLI_CMD_POOL_H

#include <stdbool.h>

#include <cordon/cordon.h>

#include "pool/pool.h"

/* Place recipe_file (NULL: no overrides) into pool and, when it is placed, fill *in with the
 * session's inputs and *backend with the chosen backend (found in reg). A refusal prints its
 * rule and receipt on stderr (or, with json, an error object) and returns EXIT_UNAVAILABLE
 * (4): nothing was created. Any other failure is reported and returns its exit code. */
int pool_cli_place(const char *verb, struct cordon_context *ctx, const struct cordon_registry *reg,
                   const char *pool, const char *recipe_file, bool json,
                   struct pool_session_inputs *in, const struct cordon_backend **backend);

#endif
