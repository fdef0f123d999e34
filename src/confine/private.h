/* The always-hidden set: every directory of cordon's own state that no sandbox may see,
 * whatever its policy grants. It is the key directory, the per-user state home and runtime
 * directory (base/private-dirs.h), the project's own .cordon/, every other project's .cordon/
 * known to this user (the registry of projects below), and a .cordon/ directly at the top of
 * the workspace or of a grant even when unregistered. What is hidden is an existing directory
 * named canonically (symlinks resolved); missing members are left out.
 *
 * The registry: <state home>/projects/<sha256 hex of the state directory's real path>, one
 * symlink per project whose target is that path (made whole by symlinkat, read back with one
 * readlinkat, never followed), added when a project's .cordon/ is first used. Entries whose
 * directory is gone are ignored, and removed by `cordon gc`. The pure
 * decisions on the set (what lies beneath a tree, what covers a path) are in confine/policy.h. */
#ifndef CORDON_CONFINE_PRIVATE_H
#define CORDON_CONFINE_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include <cordon/error.h>

/* Record the project whose state directory is `state_dir` (an existing directory) in the
 * registry, unless it is there already (one stat when it is); a new entry also prunes the
 * entries of deleted projects. */
int confine_projects_register(const char *state_dir, struct cordon_error **err);

/* Remove registry entries whose .cordon/ is gone (or that cannot be read as one); *removed
 * (when not NULL) gets how many went. */
int confine_projects_prune(size_t *removed, struct cordon_error **err);

/* Pure: whether the registry's directory, last changed at (sec, nsec) and read at read_at
 * (CLOCK_REALTIME), had been unchanged long enough for its time to stand for its contents, so
 * that its index may be written: 100 ms when the time has fractions of a second, two seconds
 * when it has none (a file system that keeps whole seconds). */
bool confine_projects_index_quiet(unsigned long long sec, unsigned long long nsec,
                                  const struct timespec *read_at);

/* The always-hidden set: the fixed members (canonical, existing), own_state_dir (NULL: none)
 * and the registered projects (as registered: real paths then, not checked here). Lookups that
 * cannot be made (no HOME, a relative CORDON_KEY_DIR) leave their member out: cordon itself
 * cannot use such a directory either. */
int confine_private_set(const char *own_state_dir, char ***out, struct cordon_error **err);

/* The members of `set` strictly beneath `root` (canonical) that exist there as directories by
 * that very name, and root/.cordon when `top` and it is a directory (not a symlink): relative
 * to root, outermost only (confine_hidden_beneath), appended to *out. */
int confine_private_beneath(const char *const *set, const char *root, bool top, char ***out,
                            struct cordon_error **err);

#endif
