/* Private to the ns backend's session code (ns.c: attach, exec, files, gc; start.c: create and
 * resume; impl.c: the in-process data and its state): a session's in-process data, the names of
 * its files, and the few helpers both halves use. */
#ifndef CORDON_BACKENDS_NS_IMPL_H
#define CORDON_BACKENDS_NS_IMPL_H

#include <stdbool.h>
#include <sys/fsuid.h>
#include <sys/types.h>

#include <cordon/backend.h>
#include <cordon/error.h>
#include <cordon/session.h>

#include "backends/ns/holder.h"
#include "backends/ns/plan.h"
#include "confine/cgroup.h"

#define SOCKET_NAME "holder.sock"
#define SECRET_NAME "secret"
/* An empty file in the session's directory whose removal (the project deleted) ends the holder,
 * now that its socket lives elsewhere. */
#define LEASE_NAME "holder.lease"
/* Resume as root mounts an overlay over a shared base; 0 restores a full copy instead. */
#ifndef NS_OVERLAY_FORKS
#define NS_OVERLAY_FORKS 1
#endif
/* The runtime's own tasks in the session's pids cgroup: the holder, two idle workers and their
 * waiting command processes, and the worker of the running exec (each further concurrent exec
 * has a worker too, counted against the limit). */
#define PIDS_OVERHEAD 6
/* A session's cgroups: CGROUP_PREFIX and its id. */
#define CGROUP_PREFIX "cordon-"

/* Host-side writes into an overlay workspace run with the file-system ids of the upper layer's
 * owner (per thread), so what the host writes the sandbox owns, as in a plain workspace. */
#define SANDBOX_OWNER_BEGIN(impl)                   \
  bool owner_switched_ = (impl) && (impl)->overlay; \
  if (owner_switched_) {                            \
    setfsgid((impl)->outer_gid);                    \
    setfsuid((impl)->outer_uid);                    \
  }
#define SANDBOX_OWNER_END() \
  if (owner_switched_) {    \
    setfsuid(0);            \
    setfsgid(0);            \
  }

struct ns_impl {
  pid_t holder_pid;
  unsigned long long holder_start;
  int run_fd; /* O_PATH of the session's runtime directory (protocol/rundir.h), where the socket
                 and the secret live; borrowed from the session (session_rundir), or -1 */
  struct crypto_hmac *auth; /* keyed with the session's secret, once needed; or NULL */
  char *socket_recorded;    /* the socket's path as the state file records it (never trusted) */
  struct confine_cgroups cgroups;
  bool owned_workspace;
  char *from_snapshot; /* the snapshot this session was resumed from, or NULL */
  /* Resumed as an overlay: lower = the shared base of from_snapshot, upper and work in the
   * state dir; the workspace is seen through the holder's root. Host-side writes go in as
   * outer_uid, the owner of everything in the upper layer. */
  bool overlay;
  uid_t outer_uid;
  gid_t outer_gid;
  char *dead; /* why the holder is unusable, or NULL */
  /* One-shot (manifest.one_shot): no holder; the sandbox is built with the command by the one
   * exec, from what create prepared. NULL once that exec has started. */
  struct ns_pending *pending;
  bool one_shot;
  /* The one-shot sandbox once its command has ended: pid 1 may still be exiting, its namespaces
   * going down, while destroy removes the session's files; reaped (ns_oneshot_free) after that,
   * or before anything needs it gone (its cgroups). NULL otherwise. */
  struct ns_oneshot *ended;
  /* A one-shot session's owner: the process whose one exec it is (`cordon run`, a race), so
   * that `cordon gc` can tell a session of a killed cordon from one in use. 0 when unknown. */
  pid_t owner_pid;
  unsigned long long owner_start;
  char owner_boot[64];
  /* A holder still building its sandbox (create/resume returned early for a batch, see
   * ns_ready): its report pipe, or -1. */
  int ready_fd;
};

/* What create prepared for a one-shot session's exec: the plan and its resolved form (which the
 * config points into), the config and the fds it names. */
struct ns_pending {
  struct ns_plan plan;
  struct ns_resolved resolved;
  struct ns_holder_config cfg;
  int workspace_fd; /* cfg.root.workspace.tree_fd */
  int cgroup_fd;
  int join_fds[CONFINE_CG_MAX_DIRS];
  int memory_join_fd;
  int home_fd;   /* cfg.root.home.tree_fd */
  int egress_fd; /* cfg.egress_fd: pid 1's end of the egress daemon's handoff, or -1 */
};

/* impl.c: the in-process data, and what the state file records of it. */
struct ns_impl *ns_impl_new(void);
void ns_impl_free(struct ns_impl *impl);
void ns_pending_free(struct ns_pending *p);
/* The session's backend_state from impl. */
int ns_save_state(struct cordon_session *s, struct ns_impl *impl, struct cordon_error **err);
/* impl from the session's backend_state, which is untrusted: only this session's own cgroups
 * (ns_cgroup_dir_ok, and their owner label) are accepted. */
int ns_load_state(struct cordon_session *s, struct ns_impl *impl, struct cordon_error **err);
/* Where the session's socket is: recomputed from the session's identity (protocol/rundir.h),
 * never read from its state. */
int ns_socket_path(const struct cordon_session *s, char **out, struct cordon_error **err);
/* Pure: whether a cgroup directory named by a session's (untrusted) state can be the session's
 * own: under /sys/fs/cgroup, in normal form, its leaf "cordon-<session id>". */
bool ns_cgroup_dir_ok(const char *dir, const char *session_id);
/* A number from a /proc/sys file, or -1. */
long ns_read_sysctl(const char *path);

/* create() and resume() (start.c): snapshot_id non-NULL restores that snapshot as the
 * session's own workspace before anything else. */
int ns_start(struct cordon_session *s, const struct cordon_manifest *m, const char *snapshot_id,
             struct cordon_error **err);

#endif
