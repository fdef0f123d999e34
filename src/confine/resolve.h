/* Path policy, file-system half: resolve the paths a policy names against the real trees
 * (the workspace, the host) and classify them. Workspace paths resolve beneath the workspace
 * directory fd (openat2 RESOLVE_BENEATH), so a symlink may be followed only while it stays
 * inside; the result is the canonical path, which the holder later re-opens with symlinks
 * refused, so nothing swapped in between can redirect a mount. */
#ifndef CORDON_CONFINE_RESOLVE_H
#define CORDON_CONFINE_RESOLVE_H

#include <stdbool.h>

#include <cordon/error.h>

enum confine_kind {
  CONFINE_KIND_DIR = 0,
  CONFINE_KIND_FILE,
  CONFINE_KIND_SYMLINK,
};

struct confine_path {
  char *path;   /* canonical: workspace-relative, or the absolute target inside the sandbox */
  char *source; /* host paths: the resolved host path to bind (NULL for workspace paths) */
  char *link;   /* CONFINE_KIND_SYMLINK: the link's content */
  enum confine_kind kind;
};

void confine_path_clear(struct confine_path *p);
void confine_paths_free(struct confine_path *paths, size_t count);

/* Resolve the normalised workspace-relative `path` beneath ws_fd (the workspace whose real
 * path is ws_real). Refuses a path that leaves the workspace, is missing, or is neither a
 * regular file nor a directory; `what` names the list in errors. */
int confine_resolve_workspace_path(int ws_fd, const char *ws_real, const char *path,
                                   const char *what, struct confine_path *out,
                                   struct cordon_error **err);

/* Resolve a normalised absolute host path. A system path (system = true) that is itself a
 * symlink is kept as a symlink (merged /usr: /bin -> usr/bin); a missing one gives 0 with
 * *present = false when optional. Otherwise the target is bound from its real path and must be
 * a directory or a regular file. */
int confine_resolve_host_path(const char *path, bool system, bool optional, const char *what,
                              struct confine_path *out, bool *present, struct cordon_error **err);

/* The bounds of the walks confine_check_hard_links makes: entries per walk, directory depth. */
#define CONFINE_LINK_WALK_MAX_ENTRIES 1000000u
#define CONFINE_LINK_WALK_MAX_DEPTH 256u

/* Refuse a read-only or hidden path (canonical, workspace-relative, beneath ws_fd) that stays
 * reachable through another name: a file with hard links, or a file inside a protected
 * directory with a hard link outside it, unless every other name is protected as strongly
 * (confine_check_linked_file). Walks each protected directory (openat-anchored, no symlink
 * followed, bounded: a directory too large or too deep to check is refused); only when a file
 * has names outside the protected paths is the whole workspace walked (bounded too), to find
 * and name them. */
int confine_check_hard_links(int ws_fd, const char *const *read_only, const char *const *hidden,
                             struct cordon_error **err);

/* Real path of an fd (readlink of /proc/self/fd/N); malloc'd, NULL with errno on failure. */
char *confine_fd_path(int fd);

#endif
