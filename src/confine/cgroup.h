/* cgroups of a sandbox: resource limits (memory, pids, CPU) and a handle to kill everything.
 *
 * A session's cgroups nest under the caller's own (read from /proc/self/cgroup). The v2
 * hierarchy is used for a limit when it offers the controller there; otherwise the v1
 * hierarchy of that controller (hybrid hosts mount memory, pids and cpu on v1). A v2 cgroup is
 * made in any case when possible: its cgroup.kill reaches every process, and delegated to the
 * sandbox's holder it hosts one leaf per exec. A requested limit with no writable hierarchy is
 * refused by name, never dropped. */
#ifndef CORDON_CONFINE_CGROUP_H
#define CORDON_CONFINE_CGROUP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <cordon/backend.h>

enum confine_cgroup_v1 {
  CONFINE_CG_MEMORY = 0,
  CONFINE_CG_PIDS,
  CONFINE_CG_CPU,
  CONFINE_CG_V1_COUNT
};

struct confine_cgroups {
  char *v2;                      /* NULL when no v2 cgroup could be made */
  char *v1[CONFINE_CG_V1_COUNT]; /* v1 cgroups used for limits, NULL when unused */
};

#define CONFINE_CG_MAX_DIRS (1 + CONFINE_CG_V1_COUNT)

/* Make the cgroups for `name` with `limits` (pids gets `pids_extra` added, for the runtime's own
 * processes). When the caller is not delegate_uid, the v2 cgroup is delegated to
 * delegate_uid/gid (it may create children and move processes between them). */
int confine_cgroups_create(const char *name, const struct cordon_limits *limits,
                           uint64_t pids_extra, uid_t delegate_uid, gid_t delegate_gid,
                           struct confine_cgroups *out, struct cordon_error **err);

/* Open cgroup.procs of each v1 cgroup (-1 padded), for a child to join with
 * confine_cgroups_join_fds() between fork and anything else. (The v2 cgroup is joined at birth:
 * clone3 CLONE_INTO_CGROUP with a directory fd.) With memory_fd, the v1 memory cgroup's is
 * opened there instead (-1 when there is none), for the commands alone to join: a process in a
 * memory cgroup can be the OOM killer's victim, and the kernel kills every process sharing the
 * victim's memory with it. */
int confine_cgroups_open_v1_procs(const struct confine_cgroups *cg, int fds[CONFINE_CG_MAX_DIRS],
                                  int *memory_fd, struct cordon_error **err);
/* Move process pid (0: the caller) into each cgroup whose cgroup.procs fd is given.
 * Async-signal-safe. Returns 0 or -errno. */
int confine_cgroups_join_fds(const int fds[CONFINE_CG_MAX_DIRS], pid_t pid);

/* Kill every process in the cgroups (v2 cgroup.kill; v1: SIGKILL to each listed pid). */
void confine_cgroups_kill(const struct confine_cgroups *cg);

/* Remove the cgroups (and any leaves under the v2 one), killing stragglers; bounded wait. */
int confine_cgroups_remove(const struct confine_cgroups *cg, struct cordon_error **err);

void confine_cgroups_clear(struct confine_cgroups *cg);

/* Label the cgroups with the path of what owns them (a session's state directory), so that
 * confine_cgroups_sweep can tell when the owner is gone. Best effort: an unlabelled cgroup is
 * never swept. */
void confine_cgroups_set_owner(const struct confine_cgroups *cg, const char *owner);

/* A cgroup whose owner is gone (confine_cgroups_sweep). */
struct confine_cgroup_orphan {
  char *dir;
  char *owner;
  char *error; /* why it could not be removed; NULL when it was (or in a dry run) */
};

/* Find the cgroups named PREFIX... beside the ones confine_cgroups_create makes (under the
 * caller's own cgroup, in v2 and in the v1 hierarchies it uses) that hold no process and whose
 * owner label names a path that no longer exists, and remove them unless dry_run. -1 only when
 * the hierarchies cannot be read. */
int confine_cgroups_sweep(const char *prefix, bool dry_run, struct confine_cgroup_orphan **found,
                          size_t *count, struct cordon_error **err);
void confine_cgroup_orphans_free(struct confine_cgroup_orphan *found, size_t count);

/* The value N of the line "key N" in the flat-keyed cgroup file dir/file (memory.events,
 * memory.oom_control) into *value: 0, or -1 when the file is unreadable or has no such line
 * (*value untouched). */
int confine_cgroup_read_key(const char *dir, const char *file, const char *key, uint64_t *value);

/* How many processes the out-of-memory killer has killed in the sandbox's memory cgroup so far
 * (oom_kill of the v1 memory.oom_control, or of the v2 cgroup's memory.events, which counts its
 * leaves too); 0 when there is no memory cgroup or no counter. Compared before and after an
 * exec, it tells an OOM kill from any other SIGKILL. */
uint64_t confine_cgroups_oom_kills(const struct confine_cgroups *cg);

/* Whether the v2 cgroup dirfd still holds a process (cgroup.events). */
bool confine_cgroup_populated(int dirfd);

/* Move process pid from the v2 cgroup dir to its parent cgroup. 0 or -1 (errno). */
int confine_cgroup_move_to_parent(const char *dir, pid_t pid);

/* Kill everything in the v2 cgroup dirfd and wait (up to `seconds`) until it is empty. */
void confine_cgroup_kill_fd(int dirfd, double seconds);

#endif
