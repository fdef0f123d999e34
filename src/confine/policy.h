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

/* An absolute host path, normalised; "/" itself and ".." are refused. */
int confine_normalize_host_path(const char *path, const char *what, char **out,
                                struct cordon_error **err);

/* Overlap rules for normalised workspace-relative lists: no entry covers another within a list,
 * and no read-only path sits under (or on) a hidden one. A hidden path under a read-only one is
 * fine: it is masked on top. */
int confine_check_workspace_lists(const char *const *read_only, const char *const *hidden,
                                  struct cordon_error **err);

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

/* Limits: refuse values that make no sense (a memory limit under 1 MiB, a CPU share that rounds
 * to less than 1 ms per period, ...), naming the limit. */
int confine_check_limits(const struct cordon_limits *limits, struct cordon_error **err);

/* The size of the sandbox's /tmp and /dev/shm tmpfs (each): limits->tmp_bytes, else the memory
 * limit, else CORDON_DEFAULT_TMP_BYTES. Never 0 (to tmpfs, size=0 means unbounded). */
uint64_t confine_tmp_bytes(const struct cordon_limits *limits);

/* Egress classes the ns backend implements: none, loopback, open. */
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
