/* Mount setup: build a sandbox's file system from a spec, inside a fresh mount namespace.
 *
 * The new root is a tmpfs entered with pivot_root (the old root detached). Host trees arrive as
 * detached mount trees (open_tree OPEN_TREE_CLONE), their flags set on every submount with
 * mount_setattr(AT_RECURSIVE): read-only, nosuid, nodev for system paths and grants; nosuid,
 * nodev (and, as root, an id mapping) for the workspace. The tree can be prepared by a
 * privileged parent in the host namespace (confine_tree_prepare) and handed over as an fd, or
 * cloned by the holder itself. Policy paths are re-opened beneath the mounted workspace with
 * symlinks refused and covered by fd (no path is looked up twice). Every directory above a
 * read-only or hidden path is pinned first as a mount point (a read-write clone of itself), so
 * the sandbox cannot rename a parent to carry the protected path away (EBUSY). */
#ifndef CORDON_CONFINE_MOUNT_H
#define CORDON_CONFINE_MOUNT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cordon/error.h>

struct confine_tree {
  const char *target; /* absolute path inside the sandbox */
  const char *source; /* host path to clone when tree_fd < 0 */
  const char *link;   /* non-NULL: make a symlink with this content instead of a mount */
  int tree_fd;        /* detached tree prepared beforehand, or -1 */
  bool is_dir;
  bool writable; /* a volume (-v) without :ro */
};

struct confine_root_spec {
  const char *staging;        /* existing host directory the new root is mounted on before pivot */
  struct confine_tree *trees; /* system paths and read-only grants, parents first */
  size_t n_trees;
  struct confine_tree workspace;   /* read-write at workspace.target */
  const char *const *ro_paths;     /* canonical workspace-relative paths */
  const char *const *hidden_dirs;  /* masked by an empty read-only tmpfs */
  const char *const *hidden_files; /* masked by an empty read-only file */
  /* Absolute sandbox paths of directories inside the trees (cordon's state inside a grant),
   * canonical below their tree's target: masked by an empty read-only tmpfs. */
  const char *const *hidden_host_dirs;
  const char *passwd; /* contents of /etc/passwd and /etc/group; NULL: host's */
  const char *group;
  bool deny_user_namespaces; /* set user.max_user_namespaces to 0 in the new namespace */
  uint64_t tmp_bytes;        /* size of the /tmp and /dev/shm tmpfs, each (0 is refused: to
                                tmpfs it would mean half the host's memory) */
  /* Volumes (-v): host directories bound at their targets (outside the workspace and the host
   * trees), nosuid, nodev, read-only unless writable; attached last. */
  struct confine_tree *volumes;
  size_t n_volumes;
  /* The private HOME, read-write at home.target (nosuid, nodev), owned by the sandbox uid on
   * the host already; target NULL: none. */
  struct confine_tree home;
  bool workspace_read_only; /* the whole workspace read-only (`--ro .`), recursively */
  /* Granted device nodes (--device, --gpu): source the host node, target beneath /dev
   * (confine/devices.h); each bound into the sandbox's /dev before it turns read-only. */
  struct confine_tree *devices;
  size_t n_devices;
};

/* Clone host path `source` into a detached tree (recursively) with `attr_set` (MOUNT_ATTR_*)
 * applied to every mount in it; userns_fd >= 0 adds an id mapping. Returns the tree fd. */
int confine_tree_prepare(const char *source, uint64_t attr_set, int userns_fd,
                         struct cordon_error **err);

/* A detached overlayfs mount (nosuid, nodev) over the read-only base lower_dir (id-mapped
 * through lower_userns_fd when >= 0, so its owner appears as the sandbox's host uid) with
 * upper_dir and work_dir (same file system, not id-mapped: overlayfs works in them with the
 * mounter's credentials, which an id mapping would not cover). Layers are passed as fds
 * (Linux 6.13). Returns the mount's fd; CORDON_ERR_UNAVAILABLE when the kernel cannot. */
int confine_overlay_prepare(const char *lower_dir, int lower_userns_fd, const char *upper_dir,
                            const char *work_dir, struct cordon_error **err);

/* A volume's detached tree: its source (canonical) opened with no symlink anywhere on the way
 * and found to be that very directory, then cloned recursively, nosuid, nodev, read-only unless
 * `writable`; userns_fd >= 0 adds an id mapping (its owner appears as the sandbox uid). */
int confine_volume_prepare(const char *source, bool writable, int userns_fd,
                           struct cordon_error **err);

/* Take the trees that are cloned inside the holder (tree_fd < 0, not symlinks) now, before the
 * staging mount can hide their sources. */
int confine_root_prepare_trees(struct confine_root_spec *spec, struct cordon_error **err);

/* Build the root and pivot into it. Must run in a new mount namespace, as pid 1 of a new pid
 * namespace (for /proc). On return the cwd and root are the sandbox's "/". */
int confine_build_root(const struct confine_root_spec *spec, struct cordon_error **err);

#endif
