/* The ns plan: what a session's sandbox will look like (the host trees, the workspace's
 * read-only and hidden lists, the identity and its maps, rlimits, cgroups, network and the
 * identity files), first as a pure value of paths and numbers that ns_plan_build makes from the
 * manifest and a few facts about the caller without touching the host (plan.c); then resolved on
 * the host (resolve.c: symlinks followed, trees found, the always-hidden set added) into struct
 * ns_resolved, whose trees later carry the fds that build the root. What is decided is kept
 * apart from what carries it out, so the decisions can be tested without root. */
#ifndef CORDON_BACKENDS_NS_PLAN_H
#define CORDON_BACKENDS_NS_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cordon/backend.h>
#include <cordon/error.h>

#include "confine/caps.h"
#include "confine/mount.h"
#include "confine/resolve.h"

/* The facts about the caller the plan depends on, read by the caller (ns.c) so that the builder
 * stays pure. */
struct ns_plan_host {
  uid_t euid, egid;
  /* As root, the host ids the sandbox uid maps to (CORDON_SANDBOX_HOST_UID/GID or their
   * defaults). */
  uid_t sandbox_host_uid;
  gid_t sandbox_host_gid;
  const char *root;   /* the workspace's path inside the sandbox (the session's root) */
  bool from_snapshot; /* resume: the workspace is restored from a snapshot */
  bool overlay_forks; /* resume as root may mount an overlay over a shared base */
};

struct ns_volume {
  char *source, *target;
  bool read_only;
};

struct ns_plan {
  /* Host trees, normalised and checked by name; resolved on the host by ns_resolve_host. */
  char **system_paths;
  bool system_optional; /* the default list: a path this host lacks is skipped */
  char **grants;        /* allow_ro */
  /* The workspace's lists, normalised and checked by name; resolved beneath the workspace by
   * ns_resolve_workspace. */
  char **read_only, **hidden;
  /* Identity: the sandbox uid inside, and the host ids it maps to (as root an unprivileged
   * host uid; rootless, ours). */
  struct confine_identity identity;
  uid_t outer_uid;
  gid_t outer_gid;
  bool rootless;
  /* The workspace of a resume as root is an overlay over the snapshot's shared base. */
  bool overlay;
  /* No holder: the one exec builds the sandbox (the manifest's files of an overlay session go
   * in through the holder's view, so those take the holder). */
  bool one_shot;
  struct confine_rlimits rlimits;
  struct cordon_limits limits;
  /* cgroups: for a holder (a leaf per exec), limits, and a device grant (the device cgroup rule
   * lives on the session's cgroup v2, devfilter.h); a one-shot sandbox with none of them has none.
   */
  bool needs_cgroups;
  bool oom_shield; /* a memory limit: pid 1 is shielded from the OOM killer (holder.h) */
  uint64_t tmp_bytes;
  bool new_network, loopback;
  /* The identity files: only the sandbox uid and the overflow id exist inside. */
  char *passwd, *group;
  /* Volumes (-v): host directories (canonical, from the library) bound at their targets. */
  struct ns_volume *volumes;
  size_t n_volumes;
  bool workspace_read_only; /* `--ro .`: the whole workspace is read-only */
  /* Device nodes (--device, --gpu): source and target malloc'd, tree_fd -1 (the holder clones
   * each, confine_root_prepare_trees). */
  struct confine_tree *devices;
  size_t n_devices;
};

/* Pure: the plan of the manifest's sandbox for this caller, or the first reason the policy
 * cannot be (lexical checks only: what the host holds is resolve.c's). */
int ns_plan_build(const struct cordon_manifest *m, const struct ns_plan_host *host,
                  struct ns_plan *out, struct cordon_error **err);
void ns_plan_clear(struct ns_plan *p);

/* The plan resolved on the host: what the sandbox code (confine_root_spec) is given. */
struct ns_resolved {
  struct confine_path *system; /* resolved; kind DIR/FILE/SYMLINK; path NULL when absent */
  size_t n_system;
  struct confine_path *grants; /* resolved allow_ro */
  size_t n_grants;
  char **ro, **hidden_dirs, **hidden_files; /* canonical, beneath the workspace */
  char **private_dirs;                      /* the always-hidden set (confine/private.h) */
  char **hidden_host_dirs;       /* members of it inside system paths and grants, sandbox paths */
  struct confine_tree *trees;    /* tree_fd -1 until prepared (ns.c) */
  size_t n_trees, n_grant_trees; /* grants come last */
  char *workspace_real;
  /* The plan's volumes, in its order: tree_fd -1 until prepared (start.c). */
  struct confine_tree *volume_trees;
  size_t n_volume_trees;
  char *home; /* the private HOME on the host, in the session's state directory (start.c) */
};

/* Resolve the plan's host trees (private_dirs set already) and the always-hidden set in them. */
int ns_resolve_host(struct ns_resolved *r, const struct ns_plan *plan, struct cordon_error **err);
/* Resolve the workspace's lists beneath ws_fd (r->workspace_real set already), check them
 * again on the canonical paths and for hard links, and hide the always-hidden set in it. */
int ns_resolve_workspace(struct ns_resolved *r, const struct ns_plan *plan, int ws_fd,
                         struct cordon_error **err);
/* The plan's volumes as trees to bind (writable unless read-only). */
int ns_resolve_volumes(struct ns_resolved *r, const struct ns_plan *plan,
                       struct cordon_error **err);
/* Closes the trees' fds. */
void ns_resolved_clear(struct ns_resolved *r);

#endif
