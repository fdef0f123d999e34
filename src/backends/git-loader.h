/* libgit2, loaded on first use.
 *
 * Linking libgit2 would make every `cordon` start-up load it and its ~15 dependencies
 * (Kerberos, mbedTLS, libssh2, PCRE2...), a large share of a cold `cordon run`. Only sessions
 * made from a repository need it, so the worktree backend calls it through this table, filled
 * by dlopen() of the soname the build was compiled against. */
#ifndef CORDON_BACKENDS_GIT_LOADER_H
#define CORDON_BACKENDS_GIT_LOADER_H

#include <git2.h>

#include <cordon/error.h>

#define GIT_LOADER_FUNCTIONS(X) \
  X(git_libgit2_init)           \
  X(git_libgit2_shutdown)       \
  X(git_error_last)             \
  X(git_repository_open_ext)    \
  X(git_repository_commondir)   \
  X(git_repository_free)        \
  X(git_revparse_single)        \
  X(git_object_peel)            \
  X(git_object_free)            \
  X(git_branch_create)          \
  X(git_branch_lookup)          \
  X(git_reference_delete)       \
  X(git_reference_free)         \
  X(git_worktree_add)           \
  X(git_worktree_lookup)        \
  X(git_worktree_prune)         \
  X(git_worktree_free)          \
  X(git_checkout_tree)          \
  X(git_object_id)              \
  X(git_oid_tostr_s)

struct git_api {
#define GIT_LOADER_FIELD(name) __typeof__(&name) name;
  GIT_LOADER_FUNCTIONS(GIT_LOADER_FIELD)
#undef GIT_LOADER_FIELD
};

/* The loaded table, or NULL with *err naming the library that could not be loaded. */
const struct git_api *git_api_get(struct cordon_error **err);

#endif
