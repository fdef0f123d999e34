/* The `microvm` backend: each session is a virtual machine with its own kernel, driven through
 * the monitor shim (monitor.h), never a hypervisor directly. This file owns the session: which
 * monitor runs it (manifest, else $CORDON_MICROVM_MONITOR, else qemu; an unusable one is
 * refused naming every missing requirement, never replaced), the VM's configuration from the
 * manifest (memory, whole vCPUs, egress none or loopback), the workspace (a host directory
 * shared into the guest: read, write, ls and snapshots happen on the host side, through
 * protocol/workspace.c, so the snapshot id is the one ns gives for the same tree) and the
 * state a later process needs to reach the VM again. The monitor's control directory (sockets,
 * console log) is the session's runtime directory, outside every workspace and snapshot. A
 * one-shot session (manifest one_shot) boots its VM with its one exec rather than at create or
 * resume, so one that is only read, written or snapshotted (host-side work) never boots. */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cordon/session.h>

#include "backends/builtin.h"
#include "backends/microvm/microvm.h"
#include "base/cleanup.h"
#include "protocol/persist.h"
#include "protocol/rundir.h"
#include "protocol/workspace.h"

/* What a session holds in this process. cfg's strings point into this struct or the session. */
struct microvm_session {
  const struct microvm_monitor *monitor;
  struct microvm_config cfg;
  char *control_dir;
  struct microvm_vm vm;
  bool booted;
  /* A one-shot session's VM is booted by its one exec, not by create or resume: a session
   * only read, written and snapshotted (all on the host side) never boots one. What the state
   * needs once it boots: */
  bool boot_pending, owned;
  char *from_snapshot;
};

#define _cleanup_json_ _cleanup_(json_decrefp)

/* ---- availability and the summary ----------------------------------------------------------- */

/* `cordon backends` prints the summary after asking `available`, which fills this in with the
 * monitor a session would get, so a fake monitor is never shown as a virtual machine. */
static char summary[256] = "microVM with its own kernel, behind a monitor shim";

static void set_summary(const struct microvm_monitor *m) {
  if (strcmp(m->name, "fake") == 0)
    snprintf(summary, sizeof(summary),
             "microVM shim (monitor fake: NO isolation, commands run on the host, for tests)");
  else
    snprintf(summary, sizeof(summary), "microVM with its own kernel (monitor %s: %s)", m->name,
             m->summary);
}

static pthread_mutex_t summary_lock = PTHREAD_MUTEX_INITIALIZER;

/* Preflight of monitor m for cfg: 1 when it can run, 0 with *reason naming every missing
 * requirement, -1 on error. */
static int preflight(const struct microvm_monitor *m, const struct microvm_config *cfg,
                     char **reason, struct cordon_error **err) {
  struct microvm_preflight p = {0};
  *reason = NULL;
  if (m->preflight(cfg, &p, err) < 0)
    return -1;
  *reason = microvm_preflight_describe(m, &p);
  bool missing = false;
  for (size_t i = 0; i < p.count; i++)
    missing |= p.items[i].missing != NULL;
  microvm_preflight_clear(&p);
  if (missing && !*reason)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "preflight");
  return missing ? 0 : 1;
}

static int microvm_available(const struct cordon_backend *self, char **reason) {
  (void)self;
  const struct microvm_monitor *m = NULL;
  struct cordon_error *err = NULL;
  *reason = NULL;
  if (microvm_monitor_choose(NULL, &m, &err) < 0) {
    *reason = strdup(err->message);
    cordon_error_free(err);
    return 0;
  }
  pthread_mutex_lock(&summary_lock);
  set_summary(m);
  pthread_mutex_unlock(&summary_lock);
  struct microvm_config cfg = {0};
  int r = preflight(m, &cfg, reason, &err);
  if (r < 0) {
    *reason = strdup(err->message);
    cordon_error_free(err);
    return 0;
  }
  return r;
}

/* ---- configuration ------------------------------------------------------------------------- */

/* The VM's shape from the manifest: what the monitor enforces (memory, whole vCPUs, egress none
 * or loopback); the library has refused every other policy feature already. */
static int config_from_manifest(const struct cordon_manifest *m, struct microvm_config *cfg,
                                struct cordon_error **err) {
  const struct cordon_limits *l = &m->policy.limits;
  if (l->cpus != 0 && (l->cpus < 1 || floor(l->cpus) != l->cpus || l->cpus > 255))
    return cordon_error_set(err, CORDON_ERR_UNSUPPORTED, 0,
                            "--cpus %g: a microVM has whole vCPUs (1 to 255), not a share of "
                            "one",
                            l->cpus);
  if (m->policy.egress > CORDON_EGRESS_LOOPBACK)
    return cordon_error_set(err, CORDON_ERR_UNSUPPORTED, 0,
                            "egress %s: the microVM has no network interface to the outside "
                            "(none and loopback only)",
                            cordon_egress_name(m->policy.egress));
  if (m->repo)
    return cordon_error_set(err, CORDON_ERR_UNSUPPORTED, 0,
                            "a repository workspace is not offered by microvm: give --workspace "
                            "or files");
  /* The kernel exempts root from RLIMIT_NPROC, the guest agent's means for --pids. */
  if (l->pids && m->user_root)
    return cordon_error_set(err, CORDON_ERR_DENIED, 0,
                            "pids: microvm limits the sandbox user's processes in the guest; "
                            "the guest's root is exempt from that limit (drop --user root)");
  if (l->memory_bytes && l->memory_bytes < MICROVM_MIN_MEMORY_BYTES)
    return cordon_error_set(err, CORDON_ERR_UNSUPPORTED, 0,
                            "--memory %llu MiB: a microVM's memory is its RAM, and its kernel "
                            "and initramfs need at least %llu MiB to boot",
                            (unsigned long long)(l->memory_bytes >> 20),
                            (unsigned long long)(MICROVM_MIN_MEMORY_BYTES >> 20));
  cfg->pids = l->pids;
  cfg->memory_bytes = l->memory_bytes ? l->memory_bytes : MICROVM_DEFAULT_MEMORY_BYTES;
  cfg->vcpus = l->cpus ? (unsigned)l->cpus : MICROVM_DEFAULT_VCPUS;
  cfg->egress = m->policy.egress;
  cfg->user_root = m->user_root;
  return 0;
}

static int save_state(struct cordon_session *s, struct microvm_session *v, bool owned,
                      const char *snapshot_id, struct cordon_error **err) {
  json_t *vm = v->vm.state ? json_loads(v->vm.state, 0, NULL) : json_object();
  json_t *o = json_pack("{s:s, s:o, s:b, s:I, s:I, s:s, s:b}", "monitor", v->monitor->name, "vm",
                        vm ? vm : json_null(), "owned_workspace", owned, "memory_bytes",
                        (json_int_t)v->cfg.memory_bytes, "vcpus", (json_int_t)v->cfg.vcpus,
                        "egress", cordon_egress_name(v->cfg.egress), "user_root", v->cfg.user_root);
  /* No VM yet: another process that opens the session finds nothing to attach to or stop. */
  if (o && v->boot_pending)
    json_object_set_new(o, "boot_pending", json_true());
  /* Also what keeps the snapshot from `cas gc` while the session lives. */
  if (o && snapshot_id)
    json_object_set_new(o, "from_snapshot", json_string(snapshot_id));
  free(s->backend_state);
  s->backend_state = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
  json_decref(o);
  return s->backend_state ? 0 : cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "state");
}

static void session_impl_free(struct microvm_session *v) {
  if (!v)
    return;
  if (v->vm.monitor && v->vm.monitor->release)
    v->vm.monitor->release(&v->vm);
  free(v->vm.state);
  free(v->control_dir);
  free(v->from_snapshot);
  free(v);
}

/* The session's in-process data, its config pointing at the session's strings. */
static int session_impl_new(struct cordon_session *s, const struct microvm_monitor *m,
                            struct microvm_session **out, struct cordon_error **err) {
  struct microvm_session *v = calloc(1, sizeof(*v));
  if (!v)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "microvm session");
  if (rundir_path(cordon_context_state_dir(s->ctx), s->id, NULL, &v->control_dir, err) < 0) {
    free(v);
    return -1;
  }
  v->monitor = m;
  v->cfg.workspace = s->workspace;
  v->cfg.root = s->root;
  v->cfg.control_dir = v->control_dir;
  v->cfg.env = (const char *const *)s->env;
  v->cfg.boot_timeout = 0;
  *out = v;
  return 0;
}

/* ---- create, resume, attach ---------------------------------------------------------------- */

/* The monitor the manifest asks for, usable here for cfg, or a refusal naming every missing
 * requirement. */
static int choose_usable(const struct cordon_manifest *m, const struct microvm_config *cfg,
                         const struct microvm_monitor **out, struct cordon_error **err) {
  if (microvm_monitor_choose(m->monitor, out, err) < 0)
    return -1;
  _cleanup_free_ char *reason = NULL;
  int r = preflight(*out, cfg, &reason, err);
  if (r < 0)
    return -1;
  if (r == 0)
    return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0, "monitor unavailable: %s", reason);
  return 0;
}

/* Everything after the workspace exists: the runtime directory, the boot, the state. */
static int start_vm(struct cordon_session *s, const struct cordon_manifest *m,
                    const struct microvm_monitor *mon, const struct microvm_config *shape,
                    bool owned, const char *snapshot_id, struct cordon_error **err) {
  if (workspace_write_manifest_files(s->workspace, m, err) < 0)
    return -1;
  struct microvm_session *v = NULL;
  if (session_impl_new(s, mon, &v, err) < 0)
    return -1;
  s->impl = v;
  v->cfg.memory_bytes = shape->memory_bytes;
  v->cfg.vcpus = shape->vcpus;
  v->cfg.egress = shape->egress;
  v->cfg.user_root = shape->user_root;
  v->cfg.pids = shape->pids;
  /* The session's runtime directory (the session layer may have made it already, for the
   * environment of --env). */
  if (session_rundir(s, true, err) < 0)
    return -1;
  v->owned = owned;
  if (snapshot_id && !(v->from_snapshot = strdup(snapshot_id)))
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "microvm session");
  if (m->one_shot) {
    v->boot_pending = true;
    return save_state(s, v, owned, snapshot_id, err);
  }
  if (mon->boot(&v->cfg, &v->vm, err) < 0)
    return cordon_error_prefix(err, "monitor %s: boot", mon->name);
  v->vm.monitor = mon;
  v->booted = true;
  return save_state(s, v, owned, snapshot_id, err);
}

/* The deferred boot of a one-shot session, before its exec; the state (now naming the VM) is
 * written at once, so `session destroy` from another process stops it. */
static int boot_pending(struct cordon_session *s, struct microvm_session *v,
                        struct cordon_error **err) {
  v->boot_pending = false;
  if (v->monitor->boot(&v->cfg, &v->vm, err) < 0)
    return cordon_error_prefix(err, "monitor %s: boot", v->monitor->name);
  v->vm.monitor = v->monitor;
  v->booted = true;
  if (save_state(s, v, v->owned, v->from_snapshot, err) < 0 || session_persist(s, err) < 0)
    return -1;
  return 0;
}

static int microvm_create(struct cordon_session *s, const struct cordon_manifest *m,
                          struct cordon_error **err) {
  struct microvm_config shape = {0};
  const struct microvm_monitor *mon = NULL;
  if (config_from_manifest(m, &shape, err) < 0 || choose_usable(m, &shape, &mon, err) < 0)
    return -1;
  bool owned = !m->workspace;
  if (m->workspace) {
    char resolved[PATH_MAX];
    struct stat st;
    if (!realpath(m->workspace, resolved) || stat(resolved, &st) < 0)
      return cordon_error_set(err, CORDON_ERR_NOT_FOUND, errno, "workspace %s", m->workspace);
    if (!S_ISDIR(st.st_mode))
      return cordon_error_set(err, CORDON_ERR_USAGE, ENOTDIR, "workspace %s", m->workspace);
    s->workspace = strdup(resolved);
  } else if (asprintf(&s->workspace, "%s/workspace", s->state_dir) < 0) {
    s->workspace = NULL;
  }
  if (!s->workspace)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "workspace");
  if (owned && (mkdir(s->workspace, 0755) < 0 || chmod(s->workspace, 0755) < 0)) /* not umask's */
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot create %s", s->workspace);
  return start_vm(s, m, mon, &shape, owned, NULL, err);
}

/* Resume: a fresh owned workspace restored from the snapshot exactly as ns and docker restore
 * theirs (every blob verified), the manifest's files on top, then a fresh VM over it. */
static int microvm_resume(struct cordon_session *s, const struct cordon_manifest *m,
                          const char *snapshot_id, struct cordon_error **err) {
  struct microvm_config shape = {0};
  const struct microvm_monitor *mon = NULL;
  if (config_from_manifest(m, &shape, err) < 0 || choose_usable(m, &shape, &mon, err) < 0)
    return -1;
  if (m->workspace)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                            "a session resumed from a snapshot gets a fresh workspace; a "
                            "workspace cannot be given too");
  if (asprintf(&s->workspace, "%s/workspace", s->state_dir) < 0) {
    s->workspace = NULL;
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "workspace");
  }
  if (workspace_restore(s, snapshot_id, s->workspace, err) < 0)
    return -1;
  return start_vm(s, m, mon, &shape, true, snapshot_id, err);
}

/* Reach the VM another process booted, from the saved state: the monitor by its recorded name
 * (never another), the VM by the monitor's own state. */
static int microvm_attach(struct cordon_session *s, struct cordon_error **err) {
  _cleanup_json_ json_t *o = s->backend_state ? json_loads(s->backend_state, 0, NULL) : NULL;
  const char *name = json_string_value(json_object_get(o, "monitor"));
  const struct microvm_monitor *mon = microvm_monitor_find(name);
  if (!mon)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                            "session %s: its state names no known microvm monitor", s->id);
  struct microvm_session *v = NULL;
  if (session_impl_new(s, mon, &v, err) < 0)
    return -1;
  s->impl = v;
  /* A one-shot session whose command has not run: no VM to reach (exec says so). */
  if (json_is_true(json_object_get(o, "boot_pending")))
    return 0;
  json_int_t memory = json_integer_value(json_object_get(o, "memory_bytes"));
  json_int_t vcpus = json_integer_value(json_object_get(o, "vcpus"));
  enum cordon_egress egress = CORDON_EGRESS_NONE;
  cordon_egress_parse(json_string_value(json_object_get(o, "egress")), &egress);
  v->cfg.memory_bytes = memory > 0 ? (uint64_t)memory : MICROVM_DEFAULT_MEMORY_BYTES;
  v->cfg.vcpus = vcpus > 0 ? (unsigned)vcpus : MICROVM_DEFAULT_VCPUS;
  v->cfg.egress = egress;
  v->cfg.user_root = json_is_true(json_object_get(o, "user_root"));
  _cleanup_free_ char *vm_state =
      json_dumps(json_object_get(o, "vm"), JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
  if (!vm_state)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "session %s: no VM state", s->id);
  if (mon->attach(&v->cfg, vm_state, &v->vm, err) < 0)
    return cordon_error_prefix(err, "monitor %s: attach", mon->name);
  v->vm.monitor = mon;
  v->booted = true;
  return 0;
}

/* ---- the running session ------------------------------------------------------------------- */

static int microvm_shutdown(struct cordon_session *s, struct cordon_error **err) {
  struct microvm_session *v = s->impl;
  if (v)
    v->boot_pending = false; /* never booted, and now never will be */
  if (!v || !v->booted)
    return 0;
  if (v->monitor->shutdown(&v->vm, err) < 0)
    return cordon_error_prefix(err, "monitor %s: shutdown", v->monitor->name);
  v->booted = false;
  return 0;
}

static int microvm_destroy(struct cordon_session *s, struct cordon_error **err) {
  if (microvm_shutdown(s, err) < 0)
    return -1;
  /* An owned workspace lives in the state directory, which the library removes. */
  return rundir_remove(cordon_context_state_dir(s->ctx), s->id, err);
}

static void microvm_release(struct cordon_session *s) {
  session_impl_free(s->impl);
  s->impl = NULL;
}

static int microvm_exec(struct cordon_session *s, const struct cordon_exec_request *req,
                        struct cordon_exec_result *res, struct cordon_error **err) {
  struct microvm_session *v = s->impl;
  if (v && v->boot_pending && boot_pending(s, v, err) < 0)
    return -1;
  if (!v || !v->booted)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "session %s: its VM is not running", s->id);
  return v->monitor->exec(&v->vm, &v->cfg, req, res, err);
}

static int microvm_read(struct cordon_session *s, const char *path, unsigned char **data,
                        size_t *length, struct cordon_error **err) {
  return workspace_read(s->workspace, path, data, length, err);
}

static int microvm_write(struct cordon_session *s, const char *path, const void *data,
                         size_t length, unsigned mode, struct cordon_error **err) {
  return workspace_write(s->workspace, path, data, length, mode, err);
}

static int microvm_ls(struct cordon_session *s, const char *path, struct cordon_dirent **entries,
                      size_t *count, struct cordon_error **err) {
  return workspace_ls(s->workspace, path, entries, count, err);
}

/* The workspace's snapshot, made on the host exactly as ns makes it: the same id for the same
 * tree. The control directory is not in the workspace, so it never enters one. */
static int microvm_snapshot(struct cordon_session *s, char **snapshot_id,
                            struct cordon_error **err) {
  return workspace_snapshot(s, NULL, snapshot_id, err);
}

const struct cordon_backend cordon_backend_microvm = {
    .abi_version = CORDON_BACKEND_ABI_VERSION,
    .name = "microvm",
    .summary = summary,
    .capabilities =
        CORDON_CAP_FILE_RW | CORDON_CAP_EXEC | CORDON_CAP_SNAPSHOT | CORDON_CAP_CALLER_STDIO,
    .tier = CORDON_TIER_VM,
    /* What the VM's shape gives: its memory size, its vCPU count, no NIC (none) or only the
     * guest's lo (loopback); and what the guest agent sets: the sandbox user's process limit
     * (pids). Paths, other rlimits and /tmp size are the guest's own business and not yet set
     * by cordon: refused by name. */
    .enforces = CORDON_FEATURE_MEMORY | CORDON_FEATURE_CPU | CORDON_FEATURE_PIDS |
                CORDON_FEATURE_NET_NONE | CORDON_FEATURE_NET_LOOPBACK,
    .available = microvm_available,
    .create = microvm_create,
    .resume = microvm_resume,
    .attach = microvm_attach,
    .destroy = microvm_destroy,
    .shutdown = microvm_shutdown,
    .release = microvm_release,
    .read = microvm_read,
    .write = microvm_write,
    .ls = microvm_ls,
    .exec = microvm_exec,
    .snapshot = microvm_snapshot,
};
