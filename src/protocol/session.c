/* Sessions: the library side of the protocol.
 *
 * Every call goes through here so that backends receive validated, normalised arguments:
 * workspace-relative paths without "..", a complete environment, a resolved timeout. Session
 * state is persisted as <project>/.cordon/sessions/<id>/state.json (written atomically) so a
 * later process can re-attach with cordon_session_open(). cordon_session_resume_many() forks
 * a batch of sessions from one snapshot on a pool of threads, all or none, and makes their
 * state durable with one syncfs. Here too, once for every backend, a manifest asking for a
 * policy feature the backend does not enforce is refused, or its waiver audited. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cordon/audit.h>
#include <cordon/session.h>

#include "exec/stdio.h"
#include "net/daemon.h"
#include "net/events.h"
#include "net/proxy.h"
#include "protocol/context.h"
#include "protocol/devices.h"
#include "protocol/persist.h"
#include "protocol/registry.h"
#include "protocol/rundir.h"
#include "protocol/session-id.h"
#include "protocol/session-record.h"
#include "protocol/volume.h"
#include "obs/events.h"
#include "base/cleanup.h"
#include "base/fs.h"
#include "base/id-prefix.h"
#include "base/proc.h"
#include "base/remove-detached.h"
#include "base/strv.h"

#define STATE_FILE "state.json"
#define STATE_VERSION 1
#define STATE_MAX_BYTES (1u << 20)
#define DEFAULT_ROOT "/workspace"
#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* The library's side of a session handle: the public part first (handles are allocated here
 * only), then what the library keeps for itself. */
struct session_private {
  struct cordon_session pub;
  char *saved_state; /* the state file's text as last written by this handle, or NULL */
  bool defer_sync;   /* one of a batch: the batch makes every state durable at once */
  int rundir_fd;     /* O_PATH of the session's runtime directory (protocol/rundir.h), or -1 */
  bool has_rundir;   /* it has one (made here, or the state says so): destroy removes it */
  json_t *volumes;   /* the state file's "volumes" (protocol/volume.h), or NULL: none */
  json_t *policy;    /* the state file's "policy" (session-record.h), or NULL: not recorded */
  char created[32];  /* when it was made, UTC (obs_time_format), or "": not recorded */
};

static struct session_private *session_private(struct cordon_session *s) {
  return (struct session_private *)s;
}

static struct cordon_session *session_alloc(void) {
  struct session_private *p = calloc(1, sizeof(*p));
  if (p)
    p->rundir_fd = -1;
  return p ? &p->pub : NULL;
}

const json_t *session_recorded_policy(const struct cordon_session *s) {
  return ((const struct session_private *)s)->policy;
}

const char *session_created(const struct cordon_session *s) {
  const char *created = ((const struct session_private *)s)->created;
  return created[0] ? created : NULL;
}

/* A state's "created": a UTC time as obs_time_format writes it, short enough to keep. */
static bool time_valid(const char *text) {
  struct timespec now = {0}, parsed;
  return strlen(text) < sizeof(((struct session_private *)NULL)->created) && strchr(text, 'T') &&
         obs_time_parse(text, &now, &parsed) == 0;
}

void cordon_strv_free(char **strv) {
  strv_free(strv);
}

static void session_free(struct cordon_session *s) {
  if (!s)
    return;
  if (s->backend && s->backend->release)
    s->backend->release(s);
  free(s->id);
  free(s->state_dir);
  free(s->workspace);
  free(s->root);
  free(s->home);
  strv_free(s->env);
  free(s->backend_state);
  free(session_private(s)->saved_state);
  json_decref(session_private(s)->volumes);
  json_decref(session_private(s)->policy);
  if (session_private(s)->rundir_fd >= 0)
    close(session_private(s)->rundir_fd);
  free(s);
}

void cordon_session_close(struct cordon_session *s) {
  session_free(s);
}

/* unsynced: write without syncing even when the session's state should be durable (an early
 * state, superseded before create returns); such a write is not remembered as done. */
static int write_state(struct cordon_session *s, bool unsynced, struct cordon_error **err) {
  json_t *backend_state = NULL;
  if (s->backend_state) {
    json_error_t jerr;
    backend_state = json_loads(s->backend_state, JSON_REJECT_DUPLICATES, &jerr);
    if (!json_is_object(backend_state)) {
      json_decref(backend_state);
      return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                              "backend %s produced session state that is not a JSON object",
                              s->backend->name);
    }
  }
  /* The environment's values may be secrets: they are kept in the session's runtime directory
   * (session_new), never here; the state only counts them. */
  json_t *doc = json_pack(
      "{s:i, s:s, s:s, s:s, s:s, s:[], s:I, s:b, s:f, s:b, s:o}", "version", STATE_VERSION, "id",
      s->id, "backend", s->backend->name, "workspace", s->workspace ? s->workspace : "", "root",
      s->root, "env", "env_private", (json_int_t)strv_length((const char *const *)s->env),
      "private_dir", session_private(s)->has_rundir, "default_timeout", s->default_timeout,
      "shut_down", s->shut_down, "backend_state", backend_state ? backend_state : json_object());
  if (doc && s->memory_limit)
    json_object_set_new(doc, "memory_limit", json_integer((json_int_t)s->memory_limit));
  if (!doc)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "session %s state", s->id);
  /* The volumes it mounts: `volume remove` refuses those of a live session. */
  if (session_private(s)->volumes && json_object_set(doc, "volumes", session_private(s)->volumes))
    json_decref(doc), doc = NULL;
  if (doc && session_private(s)->policy &&
      json_object_set(doc, "policy", session_private(s)->policy) < 0)
    json_decref(doc), doc = NULL;
  if (doc && session_private(s)->created[0] &&
      json_object_set_new(doc, "created", json_string(session_private(s)->created)) < 0)
    json_decref(doc), doc = NULL;
  if (!doc)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "session %s state", s->id);
  _cleanup_free_ char *text = json_dumps(doc, JSON_INDENT(2) | JSON_SORT_KEYS);
  json_decref(doc);
  if (!text)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "session %s state", s->id);
  struct session_private *p = session_private(s);
  /* Written already, with this durability, by this handle (session_persist): nothing to do. */
  if (p->saved_state && strcmp(p->saved_state, text) == 0)
    return 0;
  _cleanup_close_ int dirfd = open(s->state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirfd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "session directory %s", s->state_dir);
  size_t len = strlen(text);
  text[len] = '\n'; /* json_dumps leaves room for the NUL we overwrite; length grows by one */
  bool sync = !s->ephemeral && !p->defer_sync;
  int r = fs_write_replace_at(dirfd, STATE_FILE, text, len + 1, 0600, sync && !unsynced, err);
  text[len] = 0;
  free(p->saved_state);
  p->saved_state = NULL;
  if (r < 0)
    return cordon_error_prefix(err, "session %s", s->id);
  if (!(sync && unsynced))
    p->saved_state = steal_ptr(&text);
  return 0;
}

static int save_state(struct cordon_session *s, struct cordon_error **err) {
  return write_state(s, false, err);
}

int session_rundir(struct cordon_session *s, bool create, struct cordon_error **err) {
  struct session_private *p = session_private(s);
  if (p->rundir_fd >= 0)
    return p->rundir_fd;
  const char *project = cordon_context_state_dir(s->ctx);
  int r = create ? rundir_create(project, s->id, &p->rundir_fd, err)
                 : rundir_open(project, s->id, &p->rundir_fd, err);
  if (r == 0)
    p->has_rundir = true;
  return r < 0 ? cordon_error_prefix(err, "session %s", s->id) : p->rundir_fd;
}

/* The session's environment, kept as a JSON array of strings in its runtime directory. */
#define ENV_FILE "env"

static int write_private_env(struct cordon_session *s, struct cordon_error **err) {
  json_t *env = json_array();
  for (size_t i = 0; s->env && s->env[i]; i++)
    json_array_append_new(env, json_string(s->env[i]));
  _cleanup_free_ char *text = env ? json_dumps(env, JSON_COMPACT) : NULL;
  json_decref(env);
  if (!text)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "session %s environment", s->id);
  int fd = session_rundir(s, true, err);
  if (fd < 0 || rundir_write_private(fd, ENV_FILE, text, strlen(text), err) < 0)
    return cordon_error_prefix(err, "session %s environment", s->id);
  return 0;
}

/* Remove what a session keeps on disk: its runtime directory (when it has one), then its state
 * directory. Errors are ignored: for undoing a half-made session. */
static void session_remove_dirs(struct cordon_session *s) {
  struct cordon_error *ignored = NULL;
  if (session_private(s)->has_rundir)
    rundir_remove(cordon_context_state_dir(s->ctx), s->id, &ignored);
  cordon_error_free(ignored);
  ignored = NULL;
  fs_remove_tree(s->state_dir, &ignored);
  cordon_error_free(ignored);
}

static int read_private_env(struct cordon_session *s, size_t count, struct cordon_error **err) {
  int fd = session_rundir(s, false, err);
  if (fd < 0)
    return cordon_error_prefix(err, "its %zu environment entries are gone (after a reboot?)",
                               count);
  _cleanup_free_ unsigned char *text = NULL;
  size_t len = 0;
  if (rundir_read_private(fd, ENV_FILE, STATE_MAX_BYTES, &text, &len, err) < 0)
    return cordon_error_prefix(err, "session %s", s->id);
  json_error_t jerr;
  json_t *env = json_loadb((const char *)text, len, 0, &jerr);
  int r = 0;
  if (!json_is_array(env) || json_array_size(env) != count) {
    r = cordon_error_set(err, CORDON_ERR_INVALID, 0,
                         "session %s: its private environment does not hold %zu entries", s->id,
                         count);
  } else {
    strv_free(s->env);
    s->env = calloc(count + 1, sizeof(char *));
    size_t i;
    json_t *v;
    if (!s->env)
      r = cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "session %s", s->id);
    json_array_foreach(env, i, v) {
      if (r < 0)
        break;
      const char *e = json_string_value(v);
      if (!e || !strchr(e, '=') || e[0] == '=')
        r = cordon_error_set(err, CORDON_ERR_INVALID, 0,
                             "session %s: private environment entry is not KEY=VALUE", s->id);
      else if (!(s->env[i] = strdup(e)))
        r = cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "session %s", s->id);
    }
  }
  json_decref(env);
  return r;
}

int session_persist(struct cordon_session *s, struct cordon_error **err) {
  return write_state(s, false, err);
}

int session_persist_early(struct cordon_session *s, struct cordon_error **err) {
  return write_state(s, true, err);
}

/* The built-in microvm backend (a plugin of that name is not it). */
static bool is_microvm(const struct cordon_backend *backend) {
  for (size_t i = 0; cordon_builtin_backends[i]; i++)
    if (cordon_builtin_backends[i] == backend)
      return strcmp(backend->name, "microvm") == 0;
  return false;
}

static int session_new(struct cordon_context *ctx, const struct cordon_backend *backend,
                       const struct cordon_manifest *m, bool defer_sync,
                       struct cordon_session **out, struct cordon_error **err) {
  if (cordon_backend_check(backend, err) < 0)
    return -1;
  char *reason = NULL;
  /* microvm's `available` is its default monitor's; a monitor named in the manifest is checked
   * by the backend's create instead, which refuses it naming what it lacks. */
  bool monitor_named = m->monitor && is_microvm(backend);
  if (!monitor_named && backend->available(backend, &reason) != 1) {
    int r = cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0, "backend %s is unavailable: %s",
                             backend->name, reason ? reason : "no reason given");
    free(reason);
    return r;
  }
  free(reason);
  if (m->root && m->root[0] != '/')
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "workspace root %s must be absolute",
                            m->root);
  for (size_t i = 0; m->env && m->env[i]; i++)
    if (!strchr(m->env[i], '=') || m->env[i][0] == '=')
      return cordon_error_set(err, CORDON_ERR_USAGE, 0, "environment entry %s is not KEY=VALUE",
                              m->env[i]);
  if (m->default_timeout < 0)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "default timeout must not be negative");

  _cleanup_free_ char *sessions = NULL;
  if (context_ensure_dir(ctx, "sessions", &sessions, err) < 0)
    return -1;
  struct cordon_session *s = session_alloc();
  if (!s)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "session");
  session_private(s)->defer_sync = defer_sync;
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  obs_time_format(&now, session_private(s)->created, sizeof(session_private(s)->created));
  s->backend = backend;
  s->ctx = ctx;
  s->default_timeout = m->default_timeout;
  s->memory_limit = m->policy.limits.memory_bytes;
  s->ephemeral = m->ephemeral;
  s->one_shot = m->one_shot;
  s->root = strdup(m->root ? m->root : DEFAULT_ROOT);
  /* restricted: the proxy's variables under the session's own (which may override them) */
  s->env = m->policy.egress == CORDON_EGRESS_RESTRICTED
               ? strv_env_merge(net_proxy_environment, m->env)
               : strv_copy(m->env);
  if (!s->root || !s->env || fs_random_hex(8, &s->id, err) < 0 ||
      asprintf(&s->state_dir, "%s/%s", sessions, s->id) < 0) {
    session_free(s);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "session");
  }
  if (mkdir(s->state_dir, 0700) < 0) {
    int e = errno;
    session_free(s);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "cannot create session directory");
  }
  if (s->env[0] && write_private_env(s, err) < 0) {
    session_remove_dirs(s);
    session_free(s);
    return -1;
  }
  *out = s;
  return 0;
}

/* Undo a half-made session: the backend's own destroy, then the state directory. */
static void session_abandon(struct cordon_session *s) {
  struct cordon_error *ignored = NULL;
  s->backend->destroy(s, &ignored);
  cordon_error_free(ignored);
  session_remove_dirs(s);
  session_free(s);
}

static int check_resume(const struct cordon_backend *backend, struct cordon_error **err) {
  if (!(backend->capabilities & CORDON_CAP_SNAPSHOT) || !backend->resume)
    return cordon_error_set(err, CORDON_ERR_UNSUPPORTED, 0, "backend %s does not support snapshots",
                            backend->name);
  return 0;
}

/* ---- enforcement --------------------------------------------------------------------------- */

/* A plugin (ABI 3) cannot see user_root: it would run the command as its own user and say
 * nothing. Only the built-in backends read it (and refuse it where they cannot give it). */
static int refuse_user_root(const struct cordon_backend *backend, const struct cordon_manifest *m,
                            struct cordon_error **err) {
  if (!m->user_root)
    return 0;
  for (size_t i = 0; cordon_builtin_backends[i]; i++)
    if (cordon_builtin_backends[i] == backend)
      return 0;
  return cordon_error_set(err, CORDON_ERR_UNSUPPORTED, 0,
                          "backend %s is a plugin: the plugin ABI carries no user, so --user root "
                          "cannot be given to it",
                          backend->name);
}

/* A monitor is the microvm backend's choice of VMM: any other backend would ignore it. */
static int refuse_monitor(const struct cordon_backend *backend, const struct cordon_manifest *m,
                          struct cordon_error **err) {
  if (!m->monitor || is_microvm(backend))
    return 0;
  return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                          "a monitor (%s) is a microvm choice: backend %s has none", m->monitor,
                          backend->name);
}

/* The one check, for every backend: a manifest asking for a policy feature the backend does not
 * enforce is refused by name before anything is made, unless enforcement is waived. */
static int refuse_unenforced(const struct cordon_backend *backend, const struct cordon_manifest *m,
                             struct cordon_error **err) {
  if (refuse_user_root(backend, m, err) < 0 || refuse_monitor(backend, m, err) < 0 ||
      protocol_refuse_devices(backend, m, err) < 0)
    return -1;
  uint32_t missing = cordon_backend_unenforced(backend, &m->policy);
  if (!missing || !m->policy.require_enforcement)
    return 0;
  _cleanup_free_ char *names = cordon_features_describe(missing);
  return cordon_error_set(err, CORDON_ERR_DENIED, 0,
                          "backend %s does not enforce %s: refusing to run without %s "
                          "(enforcement is required)",
                          backend->name, names ? names : "the requested policy",
                          missing & (missing - 1) ? "them" : "it");
}

/* A waiver is the operator's explicit choice to run with less than was asked: it goes into the
 * project's audit chain before the backend starts, or nothing starts. */
static int record_waiver(struct cordon_session *s, uint32_t waived, struct cordon_error **err) {
  json_t *features = json_array();
  for (unsigned i = 0; features && i < CORDON_FEATURE_COUNT; i++)
    if (waived & (1u << i))
      json_array_append_new(features, json_string(cordon_feature_name(1u << i)));
  json_t *details =
      features ? json_pack("{s:s, s:o}", "backend", s->backend->name, "features", features) : NULL;
  _cleanup_free_ char *text = details ? json_dumps(details, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
  json_decref(details);
  if (!text)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "audit entry");
  char actor[32];
  snprintf(actor, sizeof(actor), "uid:%u", (unsigned)geteuid());
  struct cordon_audit_event ev = {"enforcement.waived", actor, "session", s->id, text};
  struct cordon_audit_log *log = NULL;
  int r = cordon_audit_open_project(s->ctx, NULL, &log, err);
  if (r == 0)
    r = cordon_audit_append(log, &ev, NULL, err);
  cordon_audit_close(log);
  return r < 0 ? cordon_error_prefix(err,
                                     "enforcement was waived for backend %s but the waiver cannot "
                                     "be recorded in the audit log",
                                     s->backend->name)
               : 0;
}

static int interrupted(struct cordon_error **err) {
  return cordon_error_set(err, CORDON_ERR_INTERRUPTED, 0, "interrupted");
}

/* ---- the project's event log (obs/events.h) ------------------------------------------------ */

static double seconds_since(const struct timespec *start) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)(now.tv_sec - start->tv_sec) + (double)(now.tv_nsec - start->tv_nsec) / 1e9;
}

/* One line per create, destroy and exec, failures too. The log is for operators: a failure to
 * write it never fails the operation, and is reported once per process. */
static void log_event(struct cordon_context *ctx, const char *verb, const char *backend,
                      const char *session, double duration, const int *exit_code, bool failed) {
  static int warned;
  struct obs_event e = {.duration_seconds = duration, .failed = failed};
  clock_gettime(CLOCK_REALTIME, &e.time);
  obs_event_set(&e, verb, backend, session);
  if (exit_code) {
    e.has_exit_code = true;
    e.exit_code = *exit_code;
  }
  struct cordon_error *err = NULL;
  if (obs_events_append(cordon_context_state_dir(ctx), &e, obs_events_max_bytes(), &err) < 0 &&
      !__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
    fprintf(stderr, "cordon: warning: the event log is not written: %s\n",
            err && err->message ? err->message : "unknown error");
  cordon_error_free(err);
}

static int summary_line(void *data, const char *line, size_t n) {
  net_summary_add_line(data, line, n);
  return 0;
}

/* The session's egress decisions (restricted: its proxy's log, which goes with its state
 * directory) summed into the project's log, one "egress" event per kind, for /metrics. The
 * proxy ends with the sandbox; its last lines (connections open at the end) are waited for a
 * moment. */
static void log_egress_summary(const struct cordon_session *s) {
  if (!s->state_dir)
    return;
  _cleanup_close_ int dir = open(s->state_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  _cleanup_close_ int fd =
      dir < 0 ? -1 : openat(dir, NET_EGRESS_EVENTS, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return; /* no proxy ran */
  net_egress_events_wait(fd, 2000);
  struct net_summary summary = {0};
  off_t offset = 0;
  struct cordon_error *ignored = NULL;
  obs_events_read_fd(fd, &offset, summary_line, &summary, &ignored);
  cordon_error_free(ignored);
  for (size_t i = 0; i < summary.count; i++) {
    const struct net_summary_kind *k = &summary.kinds[i];
    struct obs_event e = {0};
    clock_gettime(CLOCK_REALTIME, &e.time);
    obs_event_set(&e, "egress", s->backend->name, s->id);
    obs_event_set_egress(&e, k->refused ? "refused" : "allowed", k->rule, k->count, k->bytes_out,
                         k->bytes_in);
    struct cordon_error *err = NULL;
    obs_events_append(cordon_context_state_dir(s->ctx), &e, obs_events_max_bytes(), &err);
    cordon_error_free(err);
  }
}

/* A session's lifetime at its destroy: from its state directory's birth, where the filesystem
 * records one; else -1 (the caller then gives the time destroy took). */
static double session_age(const struct cordon_session *s) {
  struct statx stx;
  struct timespec now;
  if (!s->state_dir || statx(AT_FDCWD, s->state_dir, AT_SYMLINK_NOFOLLOW, STATX_BTIME, &stx) < 0 ||
      !(stx.stx_mask & STATX_BTIME) || clock_gettime(CLOCK_REALTIME, &now) < 0)
    return -1;
  double age = (double)(now.tv_sec - stx.stx_btime.tv_sec) +
               (double)(now.tv_nsec - (long)stx.stx_btime.tv_nsec) / 1e9;
  return age < 0 ? 0 : age;
}

static int session_make(struct cordon_context *ctx, const struct cordon_backend *backend,
                        const struct cordon_manifest *m, const char *snapshot_id, bool defer,
                        struct cordon_session **out, struct cordon_error **err);

/* defer: for a batch, let a backend with `ready` return before the sandbox is ready. */
static int session_start(struct cordon_context *ctx, const struct cordon_backend *backend,
                         const struct cordon_manifest *m, const char *snapshot_id, bool defer,
                         struct cordon_session **out, struct cordon_error **err) {
  struct timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  struct cordon_session *s = NULL;
  int r = session_make(ctx, backend, m, snapshot_id, defer, &s, err);
  log_event(ctx, "create", backend->name, r < 0 ? NULL : s->id, seconds_since(&start), NULL, r < 0);
  *out = s;
  return r;
}

static int session_make(struct cordon_context *ctx, const struct cordon_backend *backend,
                        const struct cordon_manifest *m, const char *snapshot_id, bool defer,
                        struct cordon_session **out, struct cordon_error **err) {
  if (snapshot_id && check_resume(backend, err) < 0)
    return -1;
  if (refuse_unenforced(backend, m, err) < 0)
    return -1;
  /* Volumes, fail closed: refused before anything is made by a backend that cannot mount
   * them; otherwise checked and resolved, and the backend gets the host directories. */
  _cleanup_(volumes_resolved_clear) struct volumes_resolved volumes = {0};
  struct cordon_manifest resolved = *m;
  if (m->n_volumes) {
    if (!(backend->capabilities & CORDON_CAP_PERSISTENT_VOLUMES))
      return cordon_error_set(err, CORDON_ERR_DENIED, 0,
                              "backend %s does not support persistent_volumes: refusing the "
                              "volumes asked for (-v)",
                              backend->name);
    if (volumes_resolve(ctx, m, m->root ? m->root : DEFAULT_ROOT, &volumes, err) < 0)
      return -1;
    resolved.volumes = volumes.list;
    m = &resolved;
  }
  struct cordon_session *s = NULL;
  if (session_new(ctx, backend, m, defer, &s, err) < 0)
    return -1;
  if (m->n_volumes)
    session_private(s)->volumes = json_incref(volumes.record);
  uint32_t waived = cordon_backend_unenforced(backend, &m->policy);
  /* What it may touch, recorded before the backend's first write of the state. */
  session_private(s)->policy = session_policy_json(m, waived);
  if (!session_private(s)->policy)
    cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "session policy");
  if (!session_private(s)->policy || (waived && record_waiver(s, waived, err) < 0)) {
    struct cordon_error *ignored = NULL;
    fs_remove_tree(s->state_dir, &ignored); /* nothing of the backend's exists yet */
    cordon_error_free(ignored);
    session_free(s);
    return -1;
  }
  s->defer_ready = defer && backend->ready;
  int r = snapshot_id ? backend->resume(s, m, snapshot_id, err) : backend->create(s, m, err);
  if (r < 0) {
    cordon_error_prefix(err, "backend %s", backend->name);
    session_abandon(s);
    return -1;
  }
  if (!s->workspace) {
    cordon_error_set(err, CORDON_ERR_INVALID, 0, "backend %s created no workspace", backend->name);
    session_abandon(s);
    return -1;
  }
  if (save_state(s, err) < 0) {
    session_abandon(s);
    return -1;
  }
  if (cordon_interrupted()) { /* asked to stop while it was being made: it goes again */
    session_abandon(s);
    return interrupted(err);
  }
  *out = s;
  return 0;
}

int cordon_session_create(struct cordon_context *ctx, const struct cordon_backend *backend,
                          const struct cordon_manifest *manifest, struct cordon_session **out,
                          struct cordon_error **err) {
  return session_start(ctx, backend, manifest, NULL, false, out, err);
}

int cordon_session_resume(struct cordon_context *ctx, const struct cordon_backend *backend,
                          const struct cordon_manifest *manifest, const char *snapshot_id,
                          struct cordon_session **out, struct cordon_error **err) {
  return session_start(ctx, backend, manifest, snapshot_id, false, out, err);
}

/* ---- a batch of sessions from one snapshot ------------------------------------------------ */

struct batch {
  struct cordon_context *ctx;
  const struct cordon_backend *backend;
  const struct cordon_manifest *m;
  const char *snapshot_id;
  struct cordon_session_batch *b;
  struct cordon_session **out;
  pthread_mutex_t mu;
  size_t next;
  bool stop;
  struct cordon_error *first_error;
};

static void *batch_worker(void *arg) {
  struct batch *t = arg;
  for (;;) {
    pthread_mutex_lock(&t->mu);
    if (!t->stop && cordon_interrupted()) {
      t->stop = true;
      interrupted(&t->first_error);
    }
    if (t->stop || t->next >= t->b->count) {
      pthread_mutex_unlock(&t->mu);
      return NULL;
    }
    size_t i = t->next++;
    if (t->b->progress)
      t->b->progress(t->b->data, i, NULL);
    pthread_mutex_unlock(&t->mu);
    struct cordon_error *e = NULL;
    struct cordon_session *s = NULL;
    int r = session_start(t->ctx, t->backend, t->m, t->snapshot_id, true, &s, &e);
    pthread_mutex_lock(&t->mu);
    if (r < 0) {
      if (!t->stop) { /* the first failure is the one reported */
        t->stop = true;
        t->b->failed_index = i;
        t->first_error = steal_ptr(&e);
      }
    } else {
      t->out[i] = s;
      if (t->b->progress)
        t->b->progress(t->b->data, i, s);
    }
    pthread_mutex_unlock(&t->mu);
    cordon_error_free(e);
  }
}

/* A backend with `ready` builds its sandboxes on their own (the ns holders): one thread starts
 * every session without waiting, then waits for each. No pool of threads, which would cost
 * more than it saves: a threaded process must fork a helper per sandbox, and every fork of it
 * makes its pages copy-on-write again. */
static void batch_start_then_wait(struct batch *t) {
  size_t started = 0;
  for (; started < t->b->count; started++) {
    if (cordon_interrupted()) {
      interrupted(&t->first_error);
      break;
    }
    if (t->b->progress)
      t->b->progress(t->b->data, started, NULL);
    if (session_start(t->ctx, t->backend, t->m, t->snapshot_id, true, &t->out[started],
                      &t->first_error) < 0) {
      t->b->failed_index = started;
      break;
    }
  }
  for (size_t i = 0; i < started; i++) {
    struct cordon_session *s = t->out[i];
    if (!t->first_error && cordon_interrupted())
      interrupted(&t->first_error);
    if (!t->first_error && t->backend->ready(s, &t->first_error) < 0) {
      cordon_error_prefix(&t->first_error, "backend %s", t->backend->name);
      t->b->failed_index = i;
    }
    s->defer_ready = false;
    if (!t->first_error && t->b->progress)
      t->b->progress(t->b->data, i, s);
  }
}

static unsigned online_cores(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (unsigned)n : 1;
}

int cordon_session_resume_many(struct cordon_context *ctx, const struct cordon_backend *backend,
                               const struct cordon_manifest *manifest, const char *snapshot_id,
                               struct cordon_session_batch *batch, struct cordon_session **out,
                               struct cordon_error **err) {
  batch->failed_index = SIZE_MAX;
  if (batch->count < 1 || batch->count > CORDON_SESSION_BATCH_MAX)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "a batch holds 1 to %u sessions, not %zu",
                            CORDON_SESSION_BATCH_MAX, batch->count);
  if (!snapshot_id || check_resume(backend, err) < 0)
    return snapshot_id ? -1 : cordon_error_set(err, CORDON_ERR_USAGE, 0, "no snapshot to resume");
  if (refuse_unenforced(backend, manifest, err) < 0) /* once, not as session 1's failure */
    return -1;
  for (size_t i = 0; i < batch->count; i++)
    out[i] = NULL;
  struct batch t = {.ctx = ctx,
                    .backend = backend,
                    .m = manifest,
                    .snapshot_id = snapshot_id,
                    .b = batch,
                    .out = out};
  pthread_mutex_init(&t.mu, NULL);
  if (backend->ready) {
    batch_start_then_wait(&t);
  } else {
    unsigned jobs = batch->jobs ? batch->jobs : online_cores();
    if (jobs > batch->count)
      jobs = (unsigned)batch->count;
    pthread_t threads[CORDON_SESSION_BATCH_MAX];
    unsigned started = 0;
    /* The calling thread is a worker too, so a batch never depends on creating threads. */
    for (unsigned i = 1; i < jobs; i++) {
      if (pthread_create(&threads[started], NULL, batch_worker, &t) != 0)
        break;
      started++;
    }
    batch_worker(&t);
    for (unsigned i = 0; i < started; i++)
      pthread_join(threads[i], NULL);
  }
  pthread_mutex_destroy(&t.mu);
  /* Every state file is written: one syncfs makes them all durable (their data, their names
   * and the session directories' names), instead of two fsyncs per session. */
  if (!t.first_error && !manifest->ephemeral) {
    _cleanup_free_ char *sessions = NULL;
    _cleanup_close_ int fd = -1;
    if (asprintf(&sessions, "%s/sessions", cordon_context_state_dir(ctx)) < 0)
      cordon_error_set(&t.first_error, CORDON_ERR_SYSTEM, ENOMEM, "sessions");
    else if ((fd = open(sessions, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 || syncfs(fd) < 0)
      cordon_error_set(&t.first_error, CORDON_ERR_SYSTEM, errno, "cannot sync %s", sessions);
  }
  if (!t.first_error) {
    for (size_t i = 0; i < batch->count; i++)
      session_private(out[i])->defer_sync = false; /* later writes sync on their own */
    return 0;
  }
  /* All or none: the ones that started go again. */
  for (size_t i = 0; i < batch->count; i++) {
    struct cordon_error *ignored = NULL;
    cordon_session_destroy(steal_ptr(&out[i]), &ignored);
    cordon_error_free(ignored);
  }
  if (err && !*err)
    *err = steal_ptr(&t.first_error);
  cordon_error_free(t.first_error);
  return -1;
}

static char *state_path(struct cordon_context *ctx, const char *id) {
  char *p = NULL;
  if (asprintf(&p, "%s/sessions/%s/%s", ctx->state_dir, id, STATE_FILE) < 0)
    return NULL;
  return p;
}

static int corrupt(struct cordon_error **err, const char *path, const char *why) {
  return cordon_error_set(err, CORDON_ERR_INVALID, 0, "session state %s is corrupt: %s", path, why);
}

static int load_state(struct cordon_context *ctx, const struct cordon_registry *reg, const char *id,
                      struct cordon_session **out, struct cordon_error **err) {
  _cleanup_free_ char *path = state_path(ctx, id);
  if (!path)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "session %s", id);
  _cleanup_free_ unsigned char *text = NULL;
  size_t len = 0;
  struct cordon_error *read_err = NULL;
  if (fs_read_file(path, STATE_MAX_BYTES, &text, &len, &read_err) < 0) {
    int r;
    if (read_err->kind == CORDON_ERR_NOT_FOUND)
      r = cordon_error_set(err, CORDON_ERR_NOT_FOUND, 0, "no session %s", id);
    else
      r = cordon_error_set(err, read_err->kind, 0, "session %s: %s", id, read_err->message);
    cordon_error_free(read_err);
    return r;
  }
  json_error_t jerr;
  json_t *doc = json_loadb((const char *)text, len, JSON_REJECT_DUPLICATES, &jerr);
  if (!doc)
    return corrupt(err, path, jerr.text);
  int version = 0, shut_down = 0;
  const char *sid = NULL, *backend_name = NULL, *workspace = NULL, *root = NULL, *created = NULL;
  double timeout = 0;
  json_t *env = NULL, *backend_state = NULL, *volumes = NULL, *policy = NULL;
  json_int_t env_private = 0, memory_limit = 0;
  int private_dir = 0;
  if (json_unpack_ex(doc, &jerr, JSON_STRICT,
                     "{s:i, s:s, s:s, s:s, s:s, s:o, s?:I, s?:b, s:F, s:b, s:o, s?:I, s?:o, s?:o, "
                     "s?:s}",
                     "version", &version, "id", &sid, "backend", &backend_name, "workspace",
                     &workspace, "root", &root, "env", &env, "env_private", &env_private,
                     "private_dir", &private_dir, "default_timeout", &timeout, "shut_down",
                     &shut_down, "backend_state", &backend_state, "memory_limit", &memory_limit,
                     "volumes", &volumes, "policy", &policy, "created", &created) < 0) {
    int r = corrupt(err, path, jerr.text);
    json_decref(doc);
    return r;
  }
  const char *why = NULL;
  if (version != STATE_VERSION)
    why = "unknown version";
  else if (strcmp(sid, id) != 0)
    why = "id does not match its directory";
  else if (!json_is_array(env))
    why = "env is not an array";
  else if (env_private < 0 || env_private > (1 << 20) || (env_private && json_array_size(env)))
    why = "env_private is not a count of privately kept entries";
  else if (!json_is_object(backend_state))
    why = "backend_state is not an object";
  else if (root[0] != '/')
    why = "root is not absolute";
  else if (!*workspace)
    why = "workspace is empty";
  else if (memory_limit < 0)
    why = "memory_limit is negative";
  else if (volumes && !volumes_record_valid(volumes))
    why = "volumes is not a list of volumes";
  else if (policy && !session_policy_valid(policy))
    why = "policy is not a session's policy";
  else if (created && !time_valid(created))
    why = "created is not a UTC time";
  if (why) {
    int r = corrupt(err, path, why);
    json_decref(doc);
    return r;
  }
  const struct cordon_backend *backend = NULL;
  if (cordon_registry_find(reg, backend_name, &backend, err) < 0) {
    json_decref(doc);
    return cordon_error_prefix(err, "session %s", id);
  }
  struct cordon_session *s = session_alloc();
  if (!s) {
    json_decref(doc);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "session");
  }
  s->backend = backend;
  s->ctx = ctx;
  /* Only whether destroy removes one: a state that lies leaves it to `cordon gc`. */
  session_private(s)->has_rundir = private_dir || env_private > 0;
  session_private(s)->volumes = json_incref(volumes);
  session_private(s)->policy = json_incref(policy);
  if (created)
    memcpy(session_private(s)->created, created, strlen(created) + 1);
  s->id = strdup(id);
  s->workspace = strdup(workspace);
  s->root = strdup(root);
  s->default_timeout = timeout;
  s->memory_limit = (uint64_t)memory_limit;
  s->shut_down = shut_down;
  s->env = calloc(json_array_size(env) + 1, sizeof(char *));
  s->backend_state = json_dumps(backend_state, JSON_COMPACT);
  int bad = !s->id || !s->workspace || !s->root || !s->env || !s->backend_state ||
            asprintf(&s->state_dir, "%s/sessions/%s", ctx->state_dir, id) < 0;
  size_t i;
  json_t *v;
  json_array_foreach(env, i, v) {
    if (bad)
      break;
    if (!json_is_string(v) || !strchr(json_string_value(v), '=')) {
      json_decref(doc);
      session_free(s);
      return corrupt(err, path, "env entry is not KEY=VALUE");
    }
    s->env[i] = strdup(json_string_value(v));
    bad = !s->env[i];
  }
  json_decref(doc);
  if (bad) {
    session_free(s);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "session %s", id);
  }
  if (env_private > 0 && read_private_env(s, (size_t)env_private, err) < 0) {
    session_free(s);
    return -1;
  }
  *out = s;
  return 0;
}

int cordon_session_open(struct cordon_context *ctx, const struct cordon_registry *reg,
                        const char *id, struct cordon_session **out, struct cordon_error **err) {
  if (!cordon_session_id_valid(id))
    return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                            "invalid session id '%s' (expected lowercase hex)", id);
  struct cordon_session *s = NULL;
  if (load_state(ctx, reg, id, &s, err) < 0)
    return -1;
  if (s->backend->attach(s, err) < 0) {
    cordon_error_prefix(err, "session %s (backend %s)", id, s->backend->name);
    session_free(s);
    return -1;
  }
  *out = s;
  return 0;
}

int cordon_session_list(struct cordon_context *ctx, char ***ids, struct cordon_error **err) {
  _cleanup_free_ char *dir = NULL;
  char **list = calloc(1, sizeof(char *));
  if (!list || asprintf(&dir, "%s/sessions", ctx->state_dir) < 0) {
    free(list);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "sessions");
  }
  _cleanup_closedir_ DIR *d = opendir(dir);
  if (!d) {
    if (errno == ENOENT) {
      *ids = list;
      return 0;
    }
    int e = errno;
    strv_free(list);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "%s", dir);
  }
  struct dirent *de;
  while ((de = readdir(d))) {
    if (!cordon_session_id_valid(de->d_name))
      continue;
    if (strv_push(&list, de->d_name) < 0) {
      strv_free(list);
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "sessions");
    }
  }
  strv_sort(list);
  *ids = list;
  return 0;
}

int cordon_session_resolve_id(struct cordon_context *ctx, const char *given, char **id,
                              struct cordon_error **err) {
  *id = NULL;
  if (!cordon_session_id_valid(given))
    return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                            "invalid session id '%s' (expected lowercase hex)", given);
  _cleanup_(strv_freep) char **ids = NULL;
  if (cordon_session_list(ctx, &ids, err) < 0)
    return -1;
  return id_prefix_resolve("session", given, (const char *const *)ids, id, err);
}

int cordon_session_path_normalize(const struct cordon_session *s, const char *path, char **out,
                                  struct cordon_error **err) {
  if (!path)
    path = "";
  if (path[0] == '/') {
    size_t rl = strlen(s->root);
    while (rl > 1 && s->root[rl - 1] == '/')
      rl--;
    if (strncmp(path, s->root, rl) != 0 || (path[rl] != '/' && path[rl] != 0))
      return cordon_error_set(err, CORDON_ERR_DENIED, 0, "path %s is outside the workspace %s",
                              path, s->root);
    path += rl;
    while (*path == '/')
      path++;
  }
  return fs_normalize_relative(path, out, err);
}

static int require(struct cordon_session *s, enum cordon_capability cap,
                   struct cordon_error **err) {
  if (!(s->backend->capabilities & cap))
    return cordon_error_set(err, CORDON_ERR_UNSUPPORTED, 0, "backend %s does not support %s",
                            s->backend->name, cordon_capability_name(cap));
  if (s->shut_down)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "session %s is shut down", s->id);
  return 0;
}

int cordon_session_read(struct cordon_session *s, const char *path, unsigned char **data,
                        size_t *length, struct cordon_error **err) {
  _cleanup_free_ char *norm = NULL;
  if (require(s, CORDON_CAP_FILE_RW, err) < 0 ||
      cordon_session_path_normalize(s, path, &norm, err) < 0)
    return -1;
  return s->backend->read(s, norm, data, length, err);
}

int cordon_session_write(struct cordon_session *s, const char *path, const void *data,
                         size_t length, unsigned mode, struct cordon_error **err) {
  _cleanup_free_ char *norm = NULL;
  if (require(s, CORDON_CAP_FILE_RW, err) < 0 ||
      cordon_session_path_normalize(s, path, &norm, err) < 0)
    return -1;
  if (!*norm)
    return cordon_error_set(err, CORDON_ERR_INVALID, EISDIR, "cannot write the workspace root");
  if (mode & ~07777u)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "mode %o has bits beyond 07777", mode);
  return s->backend->write(s, norm, data, length, mode, err);
}

int cordon_session_ls(struct cordon_session *s, const char *path, struct cordon_dirent **entries,
                      size_t *count, struct cordon_error **err) {
  _cleanup_free_ char *norm = NULL;
  if (require(s, CORDON_CAP_FILE_RW, err) < 0 ||
      cordon_session_path_normalize(s, path, &norm, err) < 0)
    return -1;
  return s->backend->ls(s, norm, entries, count, err);
}

/* The base environment every exec starts from (unless clear_env): a fixed minimum, so runs do
 * not depend on the caller's environment, then the session's own additions. HOME is the
 * backend's private home when it has one (caches stay out of the workspace). */
static char **base_environment(const struct cordon_session *s) {
  _cleanup_free_ char *home = NULL;
  if (asprintf(&home, "HOME=%s", s->home ? s->home : s->root) < 0)
    return NULL;
  const char *const fixed[] = {"PATH=" DEFAULT_PATH, home, "LANG=C.UTF-8", NULL};
  return strv_env_merge(fixed, (const char *const *)s->env);
}

/* The backend's exec for a request it can only capture (exec_emulate_caller_stdio). */
static int backend_exec_captured(void *data, const struct cordon_exec_request *req,
                                 struct cordon_exec_result *res, struct cordon_error **err) {
  struct cordon_session *s = data;
  return s->backend->exec(s, req, res, err);
}

int cordon_session_exec(struct cordon_session *s, const struct cordon_exec_request *req,
                        struct cordon_exec_result *res, struct cordon_error **err) {
  memset(res, 0, sizeof(*res));
  if (require(s, CORDON_CAP_EXEC, err) < 0)
    return -1;
  if (req->caller_stdio && (req->stdio_fds[1] < 0 || req->stdio_fds[2] < 0))
    return cordon_error_set(err, CORDON_ERR_USAGE, EBADF, "exec: caller stdio without fds");
  if (req->tty && (!req->caller_stdio || req->stdio_fds[0] < 0))
    return cordon_error_set(err, CORDON_ERR_USAGE, EINVAL,
                            "exec: a terminal needs caller stdio with a stdin fd");
  if (!req->argv || !req->argv[0] || !req->argv[0][0])
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "exec needs a command");
  if (s->one_shot && s->execs > 0)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                            "session %s was created for one command, which has run", s->id);
  for (size_t i = 0; req->env && req->env[i]; i++)
    if (!strchr(req->env[i], '=') || req->env[i][0] == '=')
      return cordon_error_set(err, CORDON_ERR_USAGE, 0, "environment entry %s is not KEY=VALUE",
                              req->env[i]);
  _cleanup_free_ char *cwd = NULL;
  if (req->cwd && req->cwd[0] == '/' &&
      (strncmp(req->cwd, s->root, strlen(s->root)) != 0 ||
       (req->cwd[strlen(s->root)] != 0 && req->cwd[strlen(s->root)] != '/'))) {
    cwd = strdup(req->cwd); /* absolute, outside the workspace: the backend decides */
    if (!cwd)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "exec");
  } else if (cordon_session_path_normalize(s, req->cwd, &cwd, err) < 0) {
    return -1;
  }
  char **env = NULL;
  if (req->clear_env) {
    env = strv_copy(req->env);
  } else {
    char **base = base_environment(s);
    env = base ? strv_env_merge((const char *const *)base, req->env) : NULL;
    strv_free(base);
  }
  if (!env)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "exec environment");
  struct cordon_exec_request resolved = *req;
  resolved.cwd = cwd;
  resolved.env = (const char *const *)env;
  resolved.clear_env = true;
  resolved.timeout = req->timeout == 0 ? s->default_timeout : req->timeout;
  if (resolved.timeout < 0)
    resolved.timeout = 0;
  if (resolved.max_output == 0)
    resolved.max_output = CORDON_EXEC_DEFAULT_MAX_OUTPUT;
  s->execs++;
  struct timespec exec_start;
  clock_gettime(CLOCK_MONOTONIC, &exec_start);
  int r;
  if (resolved.tty && !(s->backend->capabilities & CORDON_CAP_CALLER_STDIO))
    r = cordon_error_set(err, CORDON_ERR_UNSUPPORTED, 0,
                         "backend %s cannot give the command a terminal (-t): it does not "
                         "declare caller_stdio",
                         s->backend->name);
  else if (resolved.caller_stdio && !(s->backend->capabilities & CORDON_CAP_CALLER_STDIO))
    r = exec_emulate_caller_stdio(&resolved, backend_exec_captured, s, res, err);
  else
    r = s->backend->exec(s, &resolved, res, err);
  strv_free(env);
  if (r < 0)
    cordon_exec_result_clear(res);
  /* An exec that did not run (or whose end cordon lost) is logged as cordon's own failure,
   * 125, as `cordon run` reports it. */
  int code = r < 0 ? 125 : res->exit_code;
  log_event(s->ctx, "exec", s->backend->name, s->id,
            r < 0 ? seconds_since(&exec_start) : res->duration, &code, r < 0);
  return r;
}

int cordon_session_snapshot(struct cordon_session *s, char **snapshot_id,
                            struct cordon_error **err) {
  if (require(s, CORDON_CAP_SNAPSHOT, err) < 0)
    return -1;
  return s->backend->snapshot(s, snapshot_id, err);
}

int cordon_session_shutdown(struct cordon_session *s, struct cordon_error **err) {
  if (s->shut_down)
    return 0;
  if (s->backend->shutdown(s, err) < 0)
    return -1;
  s->shut_down = true;
  return save_state(s, err);
}

/* The session's directory goes last. A process that exits next (`cordon run`) leaves its
 * removal to a detached remover (base/remove-detached.h): freeing the blocks of a directory
 * can cost a millisecond each (a file system that discards them), paid after its exit code is
 * out. The directory moves into the project's trash first, so it is gone from the sessions at
 * once; `cordon gc` empties what a remover left. */
static int session_remove_state_dir(struct cordon_session *s, struct cordon_error **err) {
  _cleanup_free_ char *trash = NULL;
  if (!proc_exit_pending() || !s->ctx ||
      asprintf(&trash, "%s/trash", cordon_context_state_dir(s->ctx)) < 0)
    return fs_remove_tree(s->state_dir, err);
  return fs_remove_tree_detached(s->state_dir, trash, err);
}

int cordon_session_destroy(struct cordon_session *s, struct cordon_error **err) {
  if (!s)
    return 0;
  struct timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  double age = session_age(s);
  int r = s->backend->destroy(s, err);
  if (r == 0)
    log_egress_summary(s);
  if (r == 0 && session_private(s)->has_rundir)
    r = rundir_remove(cordon_context_state_dir(s->ctx), s->id, err);
  if (r == 0)
    r = session_remove_state_dir(s, err);
  log_event(s->ctx, "destroy", s->backend->name, s->id, age >= 0 ? age : seconds_since(&start),
            NULL, r < 0);
  session_free(s);
  return r;
}

int cordon_session_destroy_id(struct cordon_context *ctx, const struct cordon_registry *reg,
                              const char *id, struct cordon_error **err) {
  if (!cordon_session_id_valid(id))
    return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                            "invalid session id '%s' (expected lowercase hex)", id);
  struct cordon_session *s = NULL;
  struct cordon_error *open_err = NULL;
  if (load_state(ctx, reg, id, &s, &open_err) < 0) {
    if (open_err->kind == CORDON_ERR_NOT_FOUND && !strncmp(open_err->message, "no session", 10)) {
      cordon_error_free(open_err);
      /* Gone (destroy is idempotent), or a directory whose state was never written: its creator
       * died (SIGKILL) between making it and recording the session. What it holds goes too. */
      _cleanup_free_ char *dir = NULL;
      if (asprintf(&dir, "%s/sessions/%s", ctx->state_dir, id) < 0)
        return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "session %s", id);
      if (rundir_remove(ctx->state_dir, id, err) < 0)
        return cordon_error_prefix(err, "session %s", id);
      return fs_remove_tree(dir, err) < 0 ? cordon_error_prefix(err, "session %s", id) : 0;
    }
    if (err && !*err)
      *err = open_err;
    else
      cordon_error_free(open_err);
    return -1;
  }
  /* attach may fail when the session's processes already died; destroy still cleans up. */
  struct cordon_error *attach_err = NULL;
  s->backend->attach(s, &attach_err);
  cordon_error_free(attach_err);
  return cordon_session_destroy(s, err);
}
