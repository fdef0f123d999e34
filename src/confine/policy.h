/* Confinement policy: the pure decisions behind a sandbox, with no system calls, so they can be
 * tested without root: path-policy validation (workspace-relative read-only and hidden paths,
 * host paths granted read-only, system directories), limits and egress checks, cgroup path
 * arithmetic from /proc/self/cgroup and mountinfo text, and user-namespace id-map lines.
 *
 * The file-system half of path validation (existence, kind, symlink resolution) lives in
 * confine/resolve.c; it feeds its results back through the same overlap checks. */
#ifndef CORDON_CONFINE_POLICY_H
#define CORDON_CONFINE_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cordon/backend.h>

/* The uid and gid the sandboxed command runs as, inside its user namespace. Never 0: a root
 * uid inside would look like root to every program, even without capabilities. */
#define CONFINE_SANDBOX_UID 1000u
#define CONFINE_SANDBOX_GID 1000u
/* The host uid/gid the sandbox uid maps to when cordon runs as root (override with
 * CORDON_SANDBOX_HOST_UID / CORDON_SANDBOX_HOST_GID): an unprivileged id, so host DAC checks
 * treat the sandbox as nobody, never as the owner of root's files. */
#define CONFINE_ROOT_HOST_UID 65534u
#define CONFINE_ROOT_HOST_GID 65534u

/* CFS period for CPU bandwidth limits (the kernel's default). */
#define CONFINE_CPU_PERIOD_US 100000u

/* The system directories bound read-only when the policy names none (NULL-terminated); each is
 * used only where it exists on the host. */
extern const char *const confine_default_system_paths[];

/* true when `path` is `parent` itself or lies beneath it ("a" covers "a" and "a/b", not "ab").
 * Both are normalised and either both relative or both absolute. */
bool confine_path_covers(const char *parent, const char *path);

/* A workspace-relative policy path: relative, non-empty, no "..", normalised ("a//b/./c" gives
 * "a/b/c"); a trailing slash is dropped. `what` names the list in errors ("read-only path"). */
int confine_normalize_workspace_path(const char *path, const char *what, char **out,
                                     struct cordon_error **err);

/* Pure: whether a read-only path names the workspace root itself (".", "./", "" and the like):
 * `--ro .` makes the whole workspace read-only rather than one path in it. */
bool confine_names_workspace_root(const char *path);
/* Pure: list without the entries that name the workspace root (a new vector, NULL on ENOMEM);
 * *had_root says whether there were any. */
char **confine_without_workspace_root(const char *const *list, bool *had_root);

/* An absolute host path, normalised; "/" itself and ".." are refused. */
int confine_normalize_host_path(const char *path, const char *what, char **out,
                                struct cordon_error **err);

/* Overlap rules for normalised workspace-relative lists: no entry covers another within a list,
 * and no path is both read-only and hidden. A hidden path under a read-only one is masked on
 * top of it; a read-only path strictly under a hidden directory is re-shown: that part of the
 * hidden tree appears read-only inside the mask (confine_reshown), and the rest stays hidden. */
int confine_check_workspace_lists(const char *const *read_only, const char *const *hidden,
                                  struct cordon_error **err);

/* The stricter rule of a mechanism that cannot re-show a path inside a mask: no read-only path
 * under (or on) a hidden one. */
int confine_check_no_reshown(const char *const *read_only, const char *const *hidden,
                             struct cordon_error **err);

/* Whether the read-only path `path` lies strictly beneath one of hidden_dirs: it is shown
 * read-only inside that directory's mask instead of in place. */
bool confine_reshown(const char *path, const char *const *hidden_dirs);

/* The one directory of a project's .cordon/ that a sandbox may be shown (read-only): the
 * documents an orchestrator leaves for a confined agent. */
#define CONFINE_AGENT_VISIBLE "agent-visible"

/* cordon's private state (private_hidden: the always-hidden set found in the workspace,
 * canonical, workspace-relative) stays hidden whatever the read-only list says: a read-only path
 * inside it is refused, except a .cordon/ directory's own CONFINE_AGENT_VISIBLE. */
int confine_check_private_reshown(const char *const *read_only, const char *const *private_hidden,
                                  struct cordon_error **err);

/* The directories between the workspace root and each read-only or hidden path (normalised,
 * workspace-relative, overlaps checked), each once, parents first, leaving out the read-only
 * paths themselves and the hidden directories and what lies in them (a mask is a mount point,
 * and inside it nothing is writable). The sandbox pins each as a mount point (a clone of itself,
 * read-write): the kernel refuses to rename, remove or replace a mount point (EBUSY), so no
 * protected path can be carried away by renaming a parent and recreating it. *out: a
 * NULL-terminated vector, empty when every protected path is top-level. */
int confine_protected_ancestors(const char *const *read_only, const char *const *hidden_dirs,
                                const char *const *hidden_files, char ***out,
                                struct cordon_error **err);

/* How a workspace-relative path is protected: as the innermost policy path that covers it says
 * (hidden or read-only), else not at all. *by (when not NULL) gets that policy path. */
enum confine_protection {
  CONFINE_UNPROTECTED = 0,
  CONFINE_READ_ONLY,
  CONFINE_HIDDEN,
};
enum confine_protection confine_protection_of(const char *path, const char *const *read_only,
                                              const char *const *hidden, const char **by);

/* A file of a read-only or hidden path with more than one name (a hard link: the mounts cover
 * a name, not the inode, so every other name reaches the same content). */
struct confine_linked_file {
  unsigned long nlink;      /* its link count */
  const char *const *names; /* the workspace-relative names found, NULL-terminated */
  bool searched;            /* the names come from a walk of the whole workspace, not only of the
                               protected paths */
  bool complete;            /* that walk saw every entry (no bound reached, nothing unreadable) */
};

/* Decide on one linked file. Every name found must be protected as strongly as the strongest
 * of them: a hidden file's other names hidden, a read-only file's read-only (or all hidden).
 * Names not found: 1 when the workspace was not searched yet (walk it, set `searched` and
 * `complete`, ask again); after a complete search they lie outside the workspace, where the
 * sandbox writes nothing, so a read-only file is fine, but a hidden one is refused (a grant or
 * system path may show them). 0 when fine; else CORDON_ERR_DENIED naming the protected path
 * and the other name (or how many names were not found). */
int confine_check_linked_file(const struct confine_linked_file *file, const char *const *read_only,
                              const char *const *hidden, struct cordon_error **err);

/* Host-side lists (normalised absolute paths): system paths may not overlap each other; a
 * granted read-only path may not cover a system path, the sandbox root, or the directories the
 * sandbox provides itself (/proc, /dev), and may not sit under the sandbox root, /proc or /dev.
 * sandbox_root is the absolute workspace path inside the sandbox, normalised, not "/". */
int confine_check_host_lists(const char *const *system_paths, const char *const *allow_ro,
                             const char *sandbox_root, struct cordon_error **err);

/* The sandbox root (where the workspace appears inside): absolute, normalised, not "/", and not
 * inside a directory the sandbox provides (/proc, /dev) or a system path. */
int confine_check_sandbox_root(const char *root, const char *const *system_paths,
                               struct cordon_error **err);

/* A workspace directory (absolute, real path) may not be "/" or cover a system directory
 * (/usr, /etc, /var, /proc, ...): bound read-write and, as root, owner-mapped, it would hand the
 * host's own files to the sandbox. A workspace under one of them is fine. */
int confine_check_workspace_dir(const char *path, struct cordon_error **err);

/* The always-hidden set (confine/private.h gathers it: key directory, state home, runtime
 * directory, every registered project's .cordon/): absolute canonical directories no sandbox may
 * see. The entries of `hidden` strictly beneath `root` (absolute, canonical), relative to root,
 * are appended to *out unless already there or beneath an entry already there; an entry that
 * covers earlier ones replaces them. Entries equal to or above root are not this function's
 * business (see confine_private_covering). */
int confine_hidden_beneath(const char *const *hidden, const char *root, char ***out,
                           struct cordon_error **err);

/* A caller-named workspace or grant at `path` (absolute, canonical; `what` names it) may not be
 * or lie inside cordon's state: an entry of `private_dirs`, or any directory named .cordon
 * (registered or not). CORDON_ERR_DENIED naming both paths. */
int confine_check_not_private(const char *path, const char *what, const char *const *private_dirs,
                              struct cordon_error **err);

/* Limits: refuse values that make no sense (a memory limit under 1 MiB, a CPU share that rounds
 * to less than 1 ms per period, ...), naming the limit. */
int confine_check_limits(const struct cordon_limits *limits, struct cordon_error **err);

/* The size of the sandbox's /tmp and /dev/shm tmpfs (each): limits->tmp_bytes, else the memory
 * limit, else CORDON_DEFAULT_TMP_BYTES. Never 0 (to tmpfs, size=0 means unbounded). */
uint64_t confine_tmp_bytes(const struct cordon_limits *limits);

/* Egress classes the ns backend implements: none, loopback, restricted (with its proxy), open. */
int confine_check_egress(enum cordon_egress egress, struct cordon_error **err);

/* CFS quota for `cpus` cores per CONFINE_CPU_PERIOD_US. */
uint64_t confine_cpu_quota_us(double cpus);

/* One id-map line, "inner outer 1\n", into buf; returns its length or -1 when it does not fit. */
int confine_format_id_map(unsigned inner, unsigned outer, char *buf, size_t size);

/* ---- cgroups ------------------------------------------------------------------------------ */

/* The cgroup path of `controller` in /proc/self/cgroup text ("memory", "pids", ...; NULL for
 * the v2 "0::" entry). *path is malloc'd ("/" for the root); -1 (no error set) when absent. */
int confine_cgroup_own_path(const char *proc_cgroup, const char *controller, char **path);

/* The mount point and mount root of the hierarchy of `controller` (NULL: the cgroup2 mount) in
 * /proc/self/mountinfo text. Both malloc'd; -1 (no error set) when there is none. Mount points
 * with octal escapes (\040) are decoded. */
int confine_cgroup_find_mount(const char *mountinfo, const char *controller, char **mountpoint,
                              char **root);

/* The host directory of cgroup `cgroup_path` (as read from /proc/self/cgroup) on a hierarchy
 * mounted at mountpoint with mount root `mount_root`, with `leaf` appended when not NULL.
 * NULL when the cgroup is not visible under that mount (or out of memory). */
char *confine_cgroup_dir(const char *mountpoint, const char *mount_root, const char *cgroup_path,
                         const char *leaf);

/* Whether the space-separated controller list (cgroup.controllers / subtree_control) names
 * `controller`. */
bool confine_cgroup_list_has(const char *list, const char *controller);

#endif
