/* The ns backend's create and resume: the plan built (plan.c) and resolved on the host
 * (resolve.c), then carried out step by step (the workspace, the cgroups, the session's control,
 * the identity on the host's files, the holder's configuration) and handed to the holder, or
 * kept for the one exec of a one-shot session. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/crypto.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cordon/cas.h>
#include <cordon/session.h>
#include <cordon/snapshot.h>

#include "backends/ns/holder.h"
#include "backends/ns/egress.h"
#include "backends/ns/impl.h"
#include "backends/ns/plan.h"
#include "backends/ns/proto.h"
#include "base/cleanup.h"
#include "base/fs.h"
#include "base/proc.h"
#include "base/syscalls.h"
#include "confine/cgroup.h"
#include "confine/cpus.h"
#include "confine/devfilter.h"
#include "confine/devices.h"
#include "confine/policy.h"
#include "confine/private.h"
#include "confine/resolve.h"
#include "confine/userns.h"
#include "crypto/digest.h"
#include "protocol/persist.h"
#include "net/proxy.h"
#include "protocol/rundir.h"
#include "protocol/workspace.h"

/* The session socket, bound in the session's fresh runtime directory (never in the project
 * tree, which a sandbox may reach); the holder listens on it. */
static int make_listen_socket(int run_fd, struct cordon_error **err) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "socket");
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  /* The directory's path may exceed sun_path's 108 bytes: go through our fd of it. */
  snprintf(addr.sun_path, sizeof(addr.sun_path), "/proc/self/fd/%d/%s", run_fd, SOCKET_NAME);
  if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
      fchmodat(run_fd, SOCKET_NAME, 0600, 0) < 0) {
    int e = errno;
    close(fd);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "cannot create the session socket");
  }
  return fd;
}

/* The session's control: its runtime directory, a fresh secret in it (0600, O_EXCL) and the
 * HMAC keyed with it, the socket, and an O_PATH of the lease file in the session's directory
 * (the holder watches it: a session whose directory is gone ends). */
static int make_control(struct cordon_session *s, struct ns_impl *impl, int *listen_fd,
                        int *socket_file_fd, struct cordon_error **err) {
  impl->run_fd = session_rundir(s, true, err);
  if (impl->run_fd < 0)
    return -1;
  uint8_t secret[NS_AUTH_SECRET_LEN];
  if (fs_random_bytes(secret, sizeof(secret)) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno,
                            "no random bytes for the session secret");
  int r = rundir_write_private(impl->run_fd, SECRET_NAME, secret, sizeof(secret), err);
  if (r == 0)
    r = crypto_hmac_new(secret, sizeof(secret), &impl->auth, err);
  OPENSSL_cleanse(secret, sizeof(secret));
  if (r < 0)
    return cordon_error_prefix(err, "session %s", s->id);
  *listen_fd = make_listen_socket(impl->run_fd, err);
  if (*listen_fd < 0)
    return -1;
  _cleanup_close_ int state_fd = open(s->state_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  _cleanup_close_ int lease =
      state_fd < 0 ? -1
                   : openat(state_fd, LEASE_NAME,
                            O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  *socket_file_fd = lease < 0 ? -1 : openat(state_fd, LEASE_NAME, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (*socket_file_fd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot create %s/%s", s->state_dir,
                            LEASE_NAME);
  return 0;
}

static uid_t overflow_uid(void) {
  long v = ns_read_sysctl("/proc/sys/kernel/overflowuid");
  return v > 0 ? (uid_t)v : 65534;
}

static uid_t env_id(const char *name, unsigned fallback) {
  const char *v = getenv(name);
  if (!v || !*v)
    return fallback;
  char *end = NULL;
  unsigned long x = strtoul(v, &end, 10);
  return (end && !*end && x > 0 && x < 0xfffffffful) ? (uid_t)x : fallback;
}

/* The holder exists (it may still be building its sandbox): record it, and write the session's
 * state file now, so that its write and sync overlap the holder's setup. */
static int holder_started(struct cordon_session *s, struct ns_impl *impl,
                          struct cordon_error **err) {
  impl->holder_start = proc_start_time(impl->holder_pid);
  if (!impl->holder_start)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, 0, "the sandbox holder died right away");
  if (impl->overlay) {
    /* The merged view exists only in the holder's mount namespace: reach it through the
     * holder's root (workspace.c stays beneath it with RESOLVE_BENEATH). */
    free(s->workspace);
    if (asprintf(&s->workspace, "/proc/%d/root%s", (int)impl->holder_pid, s->root) < 0) {
      s->workspace = NULL;
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "workspace");
    }
  }
  if (ns_save_state(s, impl, err) < 0)
    return -1;
  return session_persist(s, err);
}

/* ---- create and resume, step by step ----------------------------------------------------------
 *
 * ns_start builds the plan (plan.h), resolves it on the host, then carries it out in named
 * steps; everything a step opens lives in struct start until the holder (or, one-shot, the one
 * exec) takes it, and start_clear closes what is left on any path. What a failed start leaves
 * on the host (cgroups, a workspace we made, the session's directory) goes with the session's
 * destroy. */

struct start {
  struct cordon_session *s;
  const struct cordon_manifest *m;
  struct ns_impl *impl;
  struct ns_plan plan;
  struct ns_resolved resolved;
  struct ns_holder_config cfg;
  char *overlay_upper, *overlay_work; /* a resume as an overlay: its layers */
  int ws_fd;                          /* the workspace on the host, O_RDONLY */
  int idmap_fd;                       /* the user namespace of the workspace's id-mapped mount */
  int workspace_tree_fd;              /* the workspace as the sandbox mounts it */
  int cgroup_fd;
  int join_fds[CONFINE_CG_MAX_DIRS];
  int memory_join_fd;
  int listen_fd, socket_file_fd;
  int home_tree_fd; /* it as the sandbox mounts it (as root), or -1: the holder clones it */
  struct net_rules *egress_rules; /* egress restricted: the manifest's rules, parsed */
  int egress_fd;                  /* pid 1's end of the egress daemon's handoff, or -1 */
};

/* The fds the holder has taken copies of (or the one exec will take): ours go. */
static void start_close_fds(struct start *st) {
  fs_close_reset(&st->ws_fd);
  fs_close_reset(&st->idmap_fd);
  fs_close_reset(&st->workspace_tree_fd);
  fs_close_reset(&st->cgroup_fd);
  for (int i = 0; i < CONFINE_CG_MAX_DIRS; i++)
    fs_close_reset(&st->join_fds[i]);
  fs_close_reset(&st->memory_join_fd);
  fs_close_reset(&st->listen_fd);
  fs_close_reset(&st->socket_file_fd);
  fs_close_reset(&st->home_tree_fd);
  fs_close_reset(&st->egress_fd);
}

static void start_clear(struct start *st) {
  start_close_fds(st);
  ns_plan_clear(&st->plan);
  ns_resolved_clear(&st->resolved);
  free(st->overlay_upper);
  free(st->overlay_work);
  net_rules_free(st->egress_rules);
}

/* The plan: the caller's facts read here, so that ns_plan_build stays pure. */
static int build_plan(struct start *st, const char *snapshot_id, struct cordon_error **err) {
  const struct ns_plan_host host = {
      .euid = geteuid(),
      .egid = getegid(),
      .sandbox_host_uid = env_id("CORDON_SANDBOX_HOST_UID", CONFINE_ROOT_HOST_UID),
      .sandbox_host_gid = env_id("CORDON_SANDBOX_HOST_GID", CONFINE_ROOT_HOST_GID),
      .root = st->s->root,
      .from_snapshot = snapshot_id != NULL,
      .overlay_forks = NS_OVERLAY_FORKS,
  };
  return ns_plan_build(st->m, &host, &st->plan, err);
}

/* Resume: the snapshot restored as the session's own workspace with every blob verified; as
 * root (plan.overlay), one shared read-only base per snapshot and this session's own upper
 * layer instead of a copy. Apart from prepare_workspace: only a resume pays for it. */
static int restore_snapshot(struct start *st, const char *snapshot_id, struct cordon_error **err) {
  struct cordon_session *s = st->s;
  struct ns_impl *impl = st->impl;
  if (st->m->workspace)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                            "a session resumed from a snapshot gets a fresh workspace; a "
                            "workspace cannot be given too");
  if (asprintf(&s->workspace, "%s/workspace", s->state_dir) < 0) {
    s->workspace = NULL;
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "workspace");
  }
  impl->from_snapshot = strdup(snapshot_id);
  if (!impl->from_snapshot)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "workspace");
  impl->owned_workspace = true;
  struct cordon_cas *cas = NULL;
  if (cordon_cas_open_project(s->ctx, &cas, err) < 0)
    return -1;
  int r;
  if (st->plan.overlay) {
    /* The policy is resolved on the base (the merged view's content until the session runs). */
    impl->overlay = true;
    impl->outer_uid = st->plan.outer_uid;
    impl->outer_gid = st->plan.outer_gid;
    _cleanup_free_ char *bases = NULL;
    if (asprintf(&bases, "%s/bases", cordon_context_state_dir(s->ctx)) < 0)
      bases = NULL;
    if (!bases || asprintf(&st->overlay_upper, "%s/upper", s->state_dir) < 0 ||
        asprintf(&st->overlay_work, "%s/work", s->state_dir) < 0) {
      cordon_cas_close(cas);
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "workspace");
    }
    free(s->workspace);
    s->workspace = NULL;
    r = fs_mkdir_p(bases, 0700, err);
    if (r == 0)
      r = cordon_snapshot_materialize_base(cas, snapshot_id, bases, &s->workspace, err);
    /* The merged root takes the upper layer's mode: make it the base's (the snapshot's
     * root), whatever our umask, so a fork's root is the tree it was forked from. */
    struct stat base_st;
    if (r == 0 &&
        (stat(s->workspace, &base_st) < 0 || mkdir(st->overlay_upper, 0700) < 0 ||
         chown(st->overlay_upper, impl->outer_uid, impl->outer_gid) < 0 ||
         chmod(st->overlay_upper, base_st.st_mode & 07777 & ~(mode_t)(S_ISUID | S_ISGID)) < 0 ||
         mkdir(st->overlay_work, 0700) < 0))
      r = cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot create the overlay layers in %s",
                           s->state_dir);
  } else {
    r = cordon_snapshot_restore(cas, snapshot_id, s->workspace, NULL, err);
  }
  cordon_cas_close(cas);
  return r;
}

/* Step: the workspace on the host: the caller's directory, a fresh one in the session's state,
 * or (resume) the snapshot restored there; the manifest's files in it, and the plan's workspace
 * lists resolved beneath it. Everything after it needs only st->ws_fd and the resolved plan. */
static int prepare_workspace(struct start *st, const char *snapshot_id, struct cordon_error **err) {
  struct cordon_session *s = st->s;
  const struct cordon_manifest *m = st->m;
  if (snapshot_id) {
    if (restore_snapshot(st, snapshot_id, err) < 0)
      return -1;
  } else if (m->workspace) {
    char real[PATH_MAX];
    struct stat st_ws;
    if (!realpath(m->workspace, real) || stat(real, &st_ws) < 0)
      return cordon_error_set(err, CORDON_ERR_NOT_FOUND, errno, "workspace %s", m->workspace);
    if (!S_ISDIR(st_ws.st_mode))
      return cordon_error_set(err, CORDON_ERR_USAGE, ENOTDIR, "workspace %s", m->workspace);
    if (confine_check_workspace_dir(real, err) < 0 ||
        confine_check_not_private(real, "workspace", (const char *const *)st->resolved.private_dirs,
                                  err) < 0)
      return -1;
    s->workspace = strdup(real);
  } else {
    if (asprintf(&s->workspace, "%s/workspace", s->state_dir) < 0)
      s->workspace = NULL;
    else if (mkdir(s->workspace, 0755) < 0 || chmod(s->workspace, 0755) < 0) /* not umask's */
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot create %s", s->workspace);
    st->impl->owned_workspace = true;
  }
  if (!s->workspace)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "workspace");
  if (!st->impl->overlay && workspace_write_manifest_files(s->workspace, m, err) < 0)
    return -1;
  st->ws_fd = open(s->workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (st->ws_fd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "workspace %s", s->workspace);
  st->resolved.workspace_real = confine_fd_path(st->ws_fd);
  if (!st->resolved.workspace_real)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "workspace %s", s->workspace);
  return ns_resolve_workspace(&st->resolved, &st->plan, st->ws_fd, err);
}

/* Step: the session's cgroups (limits, and the v2 cgroup whose leaves let each exec's tree be
 * killed at once) and the fds the sandbox joins them by. Apart: they outlive a failed start
 * and must be named in the state before anything runs in them. */
static int make_cgroups(struct start *st, struct cordon_error **err) {
  struct ns_impl *impl = st->impl;
  char cg_name[96];
  snprintf(cg_name, sizeof(cg_name), CGROUP_PREFIX "%s", st->s->id);
  if (st->plan.needs_cgroups &&
      confine_cgroups_create(cg_name, &st->plan.limits, PIDS_OVERHEAD, st->plan.outer_uid,
                             st->plan.outer_gid, &impl->cgroups, err) < 0)
    return -1;
  /* Should the session's directory go without a destroy (its project deleted), `cordon gc`
   * still finds these, empty once the holder has ended itself. */
  confine_cgroups_set_owner(&impl->cgroups, st->s->state_dir);
  int r = confine_cgroups_open_v1_procs(&impl->cgroups, st->join_fds, &st->memory_join_fd, err);
  st->cgroup_fd =
      impl->cgroups.v2 ? open(impl->cgroups.v2, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
  return r;
}

/* The defaults and one rule per granted node, read and write, by the numbers the host path has
 * now. Should the node be swapped before the holder clones it, the clone has other numbers and
 * the rule does not cover it: fail closed. */
static int device_rules(const struct ns_plan *plan, struct confine_dev_rule **rules, size_t *n,
                        struct cordon_error **err) {
  const struct confine_dev_rule *defaults;
  size_t n_defaults = confine_devfilter_defaults(&defaults);
  *rules = calloc(n_defaults + plan->n_devices, sizeof(**rules));
  if (!*rules)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "device rules");
  memcpy(*rules, defaults, n_defaults * sizeof(*defaults));
  *n = n_defaults;
  for (size_t i = 0; i < plan->n_devices; i++) {
    const char *host = plan->devices[i].source;
    struct stat node;
    if (confine_device_check(host, err) < 0)
      return -1;
    if (lstat(host, &node) < 0)
      return cordon_error_set(err, CORDON_ERR_NOT_FOUND, errno, "device %s", host);
    if (!S_ISCHR(node.st_mode))
      return cordon_error_set(err, CORDON_ERR_USAGE, ENODEV, "device %s is not a character device",
                              host);
    (*rules)[(*n)++] = (struct confine_dev_rule){.type = CONFINE_DEV_CHAR,
                                                 .major = major(node.st_rdev),
                                                 .minor = minor(node.st_rdev),
                                                 .access = CONFINE_DEV_READ | CONFINE_DEV_WRITE};
  }
  return 0;
}

/* Step: the device cgroup rule on the session's cgroup v2, before anything is born in it: the
 * sandbox opens the nodes its /dev holds and the granted ones, nothing else. Without a grant,
 * a host where it cannot be applied (no cgroup v2 of the session, no CAP_BPF: rootless) still
 * has the mount tree gate (docs/security.md); a grant it cannot back is refused by name. */
static int apply_device_filter(struct start *st, struct cordon_error **err) {
  const bool granted = st->plan.n_devices > 0;
  if (st->cgroup_fd < 0) {
    if (!granted)
      return 0;
    return cordon_error_set(
        err, CORDON_ERR_UNAVAILABLE, 0,
        "--device/--gpu cannot be enforced: its device cgroup rule needs a cgroup "
        "v2 of the session, and none could be made here (no cgroup v2 "
        "hierarchy, or none delegated to this user: see CORDON_CGROUP_ROOT)");
  }
  _cleanup_free_ struct confine_dev_rule *rules = NULL;
  _cleanup_free_ struct bpf_insn *insns = NULL;
  size_t n_rules = 0, count = 0;
  if (device_rules(&st->plan, &rules, &n_rules, err) < 0 ||
      confine_devfilter_build(rules, n_rules, &insns, &count, err) < 0)
    return -1;
  struct cordon_error *attach_err = NULL;
  if (confine_devfilter_attach(st->cgroup_fd, insns, count, &attach_err) < 0) {
    if (!granted) {
      cordon_error_free(attach_err);
      return 0;
    }
    if (err && !*err)
      *err = attach_err;
    else
      cordon_error_free(attach_err);
    return cordon_error_prefix(err, "--device/--gpu cannot be enforced");
  }
  return 0;
}

/* The workspace as the sandbox mounts it: the overlay of a resume, a one-shot's own workspace
 * handed to the sandbox uid, or (as root) id-mapped, falling back to a chown of a workspace we
 * made when its file system cannot be id-mapped; rootless, bound as it is by the holder. */
static int prepare_workspace_tree(struct start *st, bool hand_over, struct cordon_error **err) {
  const char *ws = st->s->workspace, *real = st->resolved.workspace_real;
  const uint64_t rw = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
  uid_t uid = st->plan.outer_uid;
  gid_t gid = st->plan.outer_gid;
  if (st->impl->overlay) {
    st->workspace_tree_fd =
        confine_overlay_prepare(real, st->idmap_fd, st->overlay_upper, st->overlay_work, err);
    return st->workspace_tree_fd < 0 ? -1 : 0;
  }
  if (hand_over) {
    if (fs_chown_tree(st->ws_fd, uid, gid) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot hand %s to the sandbox uid",
                              ws);
    st->workspace_tree_fd = confine_tree_prepare(real, rw, -1, err);
    return st->workspace_tree_fd < 0 ? -1 : 0;
  }
  if (st->plan.rootless)
    return 0;
  struct cordon_error *idmap_err = NULL;
  st->workspace_tree_fd = confine_tree_prepare(real, rw, st->idmap_fd, &idmap_err);
  if (st->workspace_tree_fd >= 0)
    return 0;
  /* No idmapped mounts on this file system: a workspace we made ourselves can be handed to the
   * sandbox uid instead; the caller's own directory is never chowned. */
  int r = 0;
  bool fallback = st->impl->owned_workspace && idmap_err->kind == CORDON_ERR_UNAVAILABLE;
  if (!fallback) {
    r = cordon_error_set(err, idmap_err->kind, idmap_err->errnum,
                         "workspace: the sandbox uid cannot be given write access: %s",
                         idmap_err->message);
  } else if (fs_chown_tree(st->ws_fd, uid, gid) < 0) {
    r = cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot hand %s to the sandbox uid", ws);
  } else {
    st->workspace_tree_fd = confine_tree_prepare(real, rw, -1, err);
    if (st->workspace_tree_fd < 0)
      r = -1;
  }
  cordon_error_free(idmap_err);
  return r;
}

/* As root, each volume (-v) cloned here with its owner id-mapped to the sandbox uid, as the
 * workspace is: what the sandbox writes in it belongs to that owner on the host. Rootless, the
 * holder clones them (confine_root_prepare_trees); the sandbox uid is ours already. */
static int prepare_volume_trees(struct start *st, struct cordon_error **err) {
  struct ns_resolved *res = &st->resolved;
  for (size_t i = 0; i < res->n_volume_trees && !st->plan.rootless; i++) {
    struct confine_tree *v = &res->volume_trees[i];
    struct stat owner;
    if (stat(v->source, &owner) < 0)
      return cordon_error_set(err, CORDON_ERR_NOT_FOUND, errno, "volume source %s", v->source);
    _cleanup_close_ int idmap = confine_userns_idmap_fd(owner.st_uid, st->plan.outer_uid,
                                                        owner.st_gid, st->plan.outer_gid, err);
    if (idmap < 0)
      return -1;
    v->tree_fd = confine_volume_prepare(v->source, v->writable, idmap, err);
    if (v->tree_fd < 0)
      return -1;
  }
  return 0;
}

/* Step: the identity on the host's files. As root we clone the host trees here, with our
 * privileges, and the holder only attaches them; the workspace is id-mapped so its owner
 * appears as the sandbox uid inside and what the sandbox creates belongs to that owner on the
 * host. Apart: the only step that needs our privileges over the host's trees. */
static int map_identity(struct start *st, struct cordon_error **err) {
  struct ns_impl *impl = st->impl;
  /* A one-shot sandbox's own fresh workspace is simply handed to the sandbox uid: nobody
   * writes into it from the host while the command runs, and it goes with the session. That
   * saves the throw-away user namespace an id-mapped mount needs. */
  bool hand_over = !st->plan.rootless && impl->one_shot && impl->owned_workspace && !impl->overlay;
  if (!st->plan.rootless) {
    const uint64_t ro = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
    struct ns_resolved *res = &st->resolved;
    for (size_t i = 0; i < res->n_trees; i++)
      if (!res->trees[i].link) {
        res->trees[i].tree_fd = confine_tree_prepare(res->trees[i].source, ro, -1, err);
        if (res->trees[i].tree_fd < 0)
          return -1;
      }
    struct stat ws;
    if (fstat(st->ws_fd, &ws) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "workspace %s", st->s->workspace);
    if (!hand_over) {
      st->idmap_fd = confine_userns_idmap_fd(ws.st_uid, st->plan.outer_uid, ws.st_gid,
                                             st->plan.outer_gid, err);
      if (st->idmap_fd < 0)
        return -1;
    }
  }
  if (prepare_volume_trees(st, err) < 0)
    return -1;
  return prepare_workspace_tree(st, hand_over, err);
}

/* Step: the private HOME, a directory in the session's state (outside the workspace, so neither
 * the project nor a snapshot gets the command's caches), owned by the sandbox uid's host ids
 * and mounted at CORDON_SANDBOX_HOME; it goes with the session's directory. As root its tree
 * is cloned here, with our privileges; rootless the holder clones it. */
static int prepare_home(struct start *st, struct cordon_error **err) {
  char **home = &st->resolved.home;
  if (asprintf(home, "%s/home", st->s->state_dir) < 0) {
    *home = NULL;
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "home");
  }
  if (mkdir(*home, 0700) < 0 && errno != EEXIST)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot create %s", *home);
  _cleanup_close_ int fd = open(*home, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 || fchown(fd, st->plan.outer_uid, st->plan.outer_gid) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot hand %s to the sandbox uid",
                            *home);
  free(st->s->home);
  st->s->home = strdup(CORDON_SANDBOX_HOME);
  if (!st->s->home)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "home");
  if (st->plan.rootless)
    return 0;
  st->home_tree_fd = confine_tree_prepare(*home, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, -1, err);
  return st->home_tree_fd < 0 ? -1 : 0;
}

/* Step: the configuration the holder (or the one exec) builds the sandbox from: the plan's
 * identity, limits and network, its identity files and the resolved root, and the fds that
 * carry them out. Apart: the one place where plan, resolved form and fds meet. */
static void holder_config(struct start *st) {
  const struct ns_plan *plan = &st->plan;
  const struct ns_resolved *res = &st->resolved;
  st->cfg = (struct ns_holder_config){
      .identity = plan->identity,
      .outer_uid = plan->outer_uid,
      .outer_gid = plan->outer_gid,
      .rootless = plan->rootless,
      .rlimits = plan->rlimits,
      .new_network = plan->new_network,
      .loopback = plan->loopback,
      .listen_fd = st->listen_fd,
      .cgroup_fd = st->cgroup_fd,
      .memory_join_fd = st->memory_join_fd,
      .oom_shield = plan->oom_shield,
      .auth = st->impl->auth,
      .socket_file_fd = st->socket_file_fd,
      .cpus_visible = confine_cpus_visible(plan->limits.cpus),
      .egress_fd = st->egress_fd,
  };
  memcpy(st->cfg.cgroup_join_fds, st->join_fds, sizeof(st->join_fds));
  /* The operator as the holder's user namespace sees it: rootless, the sandbox uid (ours); as
   * root, unmapped, so the overflow uid. */
  if (!st->impl->one_shot)
    st->cfg.client_uid = geteuid() == plan->outer_uid ? plan->identity.uid : overflow_uid();
  st->cfg.root = (struct confine_root_spec){
      .staging = "/tmp",
      .trees = res->trees,
      .n_trees = res->n_trees,
      .workspace = {.target = st->s->root,
                    .source = res->workspace_real,
                    .tree_fd = st->workspace_tree_fd,
                    .is_dir = true},
      .ro_paths = (const char *const *)res->ro,
      .hidden_dirs = (const char *const *)res->hidden_dirs,
      .hidden_files = (const char *const *)res->hidden_files,
      .hidden_host_dirs = (const char *const *)res->hidden_host_dirs,
      .passwd = plan->passwd,
      .group = plan->group,
      .deny_user_namespaces = true,
      .tmp_bytes = plan->tmp_bytes,
      .volumes = res->volume_trees,
      .n_volumes = res->n_volume_trees,
      .home = {.target = CORDON_SANDBOX_HOME,
               .source = res->home,
               .tree_fd = st->home_tree_fd,
               .is_dir = true},
      .workspace_read_only = plan->workspace_read_only,
      .devices = plan->devices,
      .n_devices = plan->n_devices,
  };
}

/* Step, one-shot: no holder; the plan, its resolved form, the config and its fds are kept for
 * the one exec, which builds the sandbox with the command (ns_exec). */
static int keep_for_exec(struct start *st, struct cordon_error **err) {
  struct ns_impl *impl = st->impl;
  struct ns_pending *p = calloc(1, sizeof(*p));
  if (!p)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "session");
  /* The plan moves (the config points into its heap parts); the fds move with it. */
  p->plan = st->plan;
  memset(&st->plan, 0, sizeof(st->plan));
  p->resolved = st->resolved;
  memset(&st->resolved, 0, sizeof(st->resolved));
  p->cfg = st->cfg;
  p->workspace_fd = st->workspace_tree_fd;
  p->cgroup_fd = st->cgroup_fd;
  memcpy(p->join_fds, st->join_fds, sizeof(p->join_fds));
  p->memory_join_fd = st->memory_join_fd;
  p->home_fd = st->home_tree_fd;
  p->egress_fd = st->egress_fd;
  st->workspace_tree_fd = st->cgroup_fd = st->memory_join_fd = st->home_tree_fd = -1;
  st->egress_fd = -1;
  for (int i = 0; i < CONFINE_CG_MAX_DIRS; i++)
    st->join_fds[i] = -1;
  impl->pending = p;
  start_close_fds(st);
  impl->owner_pid = getpid();
  impl->owner_start = proc_start_time(impl->owner_pid);
  fs_boot_id(impl->owner_boot, sizeof(impl->owner_boot));
  return ns_save_state(st->s, impl, err);
}

/* Step: spawn the holder, record it in the session's state while it builds its sandbox, and
 * (unless a batch waits later, ns_ready) wait until it is ready; a holder that was spawned but
 * cannot be recorded is killed. */
static int spawn_holder(struct start *st, struct cordon_error **err) {
  struct cordon_session *s = st->s;
  struct ns_impl *impl = st->impl;
  /* Named before it exists: if this process is killed between the holder's clone and
   * holder_started, `session destroy` still finds the holder, through its cgroup. */
  int r = 0;
  if (ns_save_state(s, impl, err) < 0 || session_persist_early(s, err) < 0)
    r = -1;
  int ready_fd = -1;
  if (r == 0)
    r = ns_holder_spawn(&st->cfg, &impl->holder_pid, &ready_fd, err);
  /* While the holder builds its sandbox (on another core, when there is one), the session's
   * state is written and made durable: it only needs the holder's pid and start time. */
  if (r == 0)
    r = holder_started(s, impl, err);
  /* In a batch, the next sessions start while this sandbox builds (ns_ready waits). Files
   * of the manifest go in through the ready sandbox: such a session waits here. */
  bool wait_later = s->defer_ready && !(impl->overlay && st->m->n_files);
  if (r == 0 && wait_later) {
    impl->ready_fd = ready_fd;
  } else if (r == 0) {
    r = ns_holder_wait(impl->holder_pid, ready_fd, err);
  } else if (ready_fd >= 0) {
    kill(impl->holder_pid, SIGKILL);
    waitpid(impl->holder_pid, NULL, 0);
    close(ready_fd);
  }
  start_close_fds(st);
  if (r < 0)
    return -1;
  if (impl->overlay && st->m->n_files) {
    SANDBOX_OWNER_BEGIN(impl);
    r = workspace_write_manifest_files(s->workspace, st->m, err);
    SANDBOX_OWNER_END();
  }
  return r;
}

/* Step, egress restricted: the proxy's daemon, started before the sandbox (it waits for pid 1's
 * listening socket, and ends with pid 1); the session gets a runtime directory for its socket
 * when it has none yet (one-shot). The daemon took its copy of the rules. */
static int start_egress(struct start *st, struct cordon_error **err) {
  if (!st->egress_rules)
    return 0;
  struct ns_impl *impl = st->impl;
  if (impl->run_fd < 0 && (impl->run_fd = session_rundir(st->s, true, err)) < 0)
    return -1;
  return ns_egress_start(st->egress_rules, impl->run_fd, st->s->state_dir, &st->egress_fd, err);
}

/* create() and resume(): snapshot_id non-NULL restores that snapshot as the session's own
 * workspace before anything else. */
int ns_start(struct cordon_session *s, const struct cordon_manifest *m, const char *snapshot_id,
             struct cordon_error **err) {
  const struct cordon_policy *policy = &m->policy;
  struct ns_impl *impl = ns_impl_new();
  if (!impl)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "session");
  s->impl = impl;
  if (confine_check_egress(policy->egress, err) < 0 ||
      confine_check_limits(&policy->limits, err) < 0 ||
      confine_check_cpu_count(policy->limits.cpus, err) < 0)
    return -1;
  if (m->repo)
    return cordon_error_set(err, CORDON_ERR_UNSUPPORTED, 0,
                            "the ns backend does not check out repositories; pass the "
                            "checkout as the workspace");
  _cleanup_(start_clear) struct start st = {
      .s = s,
      .m = m,
      .impl = impl,
      .ws_fd = -1,
      .idmap_fd = -1,
      .workspace_tree_fd = -1,
      .cgroup_fd = -1,
      .join_fds = {-1, -1, -1, -1},
      .memory_join_fd = -1,
      .listen_fd = -1,
      .socket_file_fd = -1,
      .home_tree_fd = -1,
      .egress_fd = -1,
  };
  /* The rules first: a bad entry is refused (named) before anything is made. */
  if (m->egress_rules && policy->egress != CORDON_EGRESS_RESTRICTED)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                            "egress rules (allowed domains, ranges, pinned names) need egress "
                            "class restricted, not %s",
                            cordon_egress_name(policy->egress));
  if (policy->egress == CORDON_EGRESS_RESTRICTED &&
      net_rules_parse(m->egress_rules, &st.egress_rules, err) < 0)
    return -1;
  /* What the sandbox will be, then what it is on this host. */
  if (build_plan(&st, snapshot_id, err) < 0 ||
      confine_private_set(s->ctx ? cordon_context_state_dir(s->ctx) : NULL,
                          &st.resolved.private_dirs, err) < 0 ||
      ns_resolve_host(&st.resolved, &st.plan, err) < 0 ||
      ns_resolve_volumes(&st.resolved, &st.plan, err) < 0 ||
      prepare_workspace(&st, snapshot_id, err) < 0)
    return -1;
  impl->one_shot = st.plan.one_shot;
  /* Carried out: each step's fds stay in st, closed by start_clear if a later step fails. */
  if (make_cgroups(&st, err) < 0 || apply_device_filter(&st, err) < 0 ||
      (!impl->one_shot && make_control(s, impl, &st.listen_fd, &st.socket_file_fd, err) < 0) ||
      map_identity(&st, err) < 0 || prepare_home(&st, err) < 0 || start_egress(&st, err) < 0)
    return -1;
  holder_config(&st);
  return impl->one_shot ? keep_for_exec(&st, err) : spawn_holder(&st, err);
}
