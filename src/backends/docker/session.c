/* The docker backend's sessions as containers: create and resume (the container
 * configuration, grants, the agent's directory, start and wait for the agent), attach from
 * the persisted state, shutdown and destroy; and the records that name the container (the
 * state file and the private copy in the session's runtime directory it is checked against,
 * the labels checked before anything is stopped or removed). */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/docker/agent-dir.h"
#include "backends/docker/config.h"
#include "backends/docker/container.h"
#include "backends/docker/egress.h"
#include "backends/docker/engine.h"
#include "backends/docker/internal.h"
#include "backends/docker/session.h"
#include "backends/docker/settings.h"
#include "backends/docker/workspace.h"
#include "base/cleanup.h"
#include "base/fs.h"
#include "base/strv.h"
#include "confine/cpus.h"
#include "confine/policy.h"
#include "confine/private.h"
#include "confine/resolve.h"
#include "protocol/persist.h"
#include "protocol/rundir.h"

/* The empty file, in the session's state directory, mounted read-only over hidden files. */
#define EMPTY_FILE "docker-empty"
#define PASSWD_FILE "docker-passwd" /* the container's /etc/passwd and /etc/group */
#define GROUP_FILE "docker-group"

static void docker_session_free(struct docker_session *d) {
  if (!d)
    return;
  docker_engine_free(d->engine);
  free(d->container);
  free(d);
}

/* ---- session state ------------------------------------------------------------------------ */

static int save_backend_state(struct cordon_session *s, const char *container, const char *socket,
                              const char *image, bool owned, const char *snapshot_id,
                              long agent_pid, struct cordon_error **err) {
  json_t *o =
      json_pack("{s:s, s:s, s:s, s:b, s:b, s:I}", "container", container, "socket", socket, "image",
                image, "owned_workspace", owned, "agent", 1, "agent_pid", (json_int_t)agent_pid);
  /* Also what keeps the snapshot from `cas gc` while the session lives. */
  if (o && snapshot_id)
    json_object_set_new(o, "from_snapshot", json_string(snapshot_id));
  free(s->backend_state);
  s->backend_state = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
  json_decref(o);
  return s->backend_state ? 0 : cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "state");
}

/* Container id, socket and agent from the persisted state (a state without "agent" is a
 * container made before the agent existed: its execs go through the exec API). */
static int load_backend_state(struct cordon_session *s, char **container, char **socket,
                              bool *agent, long *agent_pid, struct cordon_error **err) {
  _cleanup_json_ json_t *o = s->backend_state ? json_loads(s->backend_state, 0, NULL) : NULL;
  *agent = json_is_true(json_object_get(o, "agent"));
  json_t *pid = json_object_get(o, "agent_pid");
  *agent_pid =
      json_is_integer(pid) && json_integer_value(pid) > 0 && json_integer_value(pid) <= INT32_MAX
          ? (long)json_integer_value(pid)
          : 0;
  const char *c = json_string_value(json_object_get(o, "container"));
  const char *k = json_string_value(json_object_get(o, "socket"));
  if (!c || !k || !*c || !*k)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                            "session %s: the docker backend state names no container", s->id);
  *container = strdup(c);
  *socket = strdup(k);
  if (!*container || !*socket) {
    free(*container);
    free(*socket);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "state");
  }
  return 0;
}

/* The state file sits in the project tree, where a sandbox may reach it: what it says about
 * the engine, the container and the agent's pid is also kept in the session's runtime
 * directory ("<container>\n<engine socket>\n<agent pid>\n", 0600), and a state that differs
 * from that record is refused. */
#define PRIVATE_RECORD "docker"

static char *private_record(const char *container, const char *socket, long agent_pid) {
  char *text = NULL;
  return asprintf(&text, "%s\n%s\n%ld\n", container, socket, agent_pid) < 0 ? NULL : text;
}

static int write_private_record(struct cordon_session *s, const char *container, const char *socket,
                                long agent_pid, struct cordon_error **err) {
  _cleanup_free_ char *text = private_record(container, socket, agent_pid);
  if (!text)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "state");
  int fd = session_rundir(s, true, err);
  if (fd < 0 || rundir_write_private(fd, PRIVATE_RECORD, text, strlen(text), err) < 0)
    return cordon_error_prefix(err, "session %s", s->id);
  return 0;
}

static int check_private_record(struct cordon_session *s, const char *container, const char *socket,
                                long agent_pid, struct cordon_error **err) {
  _cleanup_free_ char *expected = private_record(container, socket, agent_pid);
  if (!expected)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "state");
  struct cordon_error *open_err = NULL;
  int fd = session_rundir(s, false, &open_err);
  _cleanup_free_ unsigned char *text = NULL;
  size_t len = 0;
  if (fd >= 0 && rundir_read_private(fd, PRIVATE_RECORD, 4096, &text, &len, &open_err) == 0) {
    if (len == strlen(expected) && memcmp(text, expected, len) == 0)
      return 0;
    return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                            "session %s: its docker state differs from the session's private "
                            "record (state tampered with): refusing to act on it",
                            s->id);
  }
  bool missing = open_err && open_err->kind == CORDON_ERR_NOT_FOUND;
  if (!missing) {
    if (err && !*err)
      *err = open_err;
    else
      cordon_error_free(open_err);
    return -1;
  }
  cordon_error_free(open_err);
  /* No record (the runtime directory went with a reboot): no agent socket either, and the
   * engine must be the one this process would use anyway. */
  _cleanup_free_ char *engine = NULL;
  if (docker_host_socket(getenv("DOCKER_HOST"), &engine, err) < 0)
    return -1;
  if (strcmp(engine, socket) != 0)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                            "session %s: its state names the Docker engine %s, not %s, and the "
                            "session's private record is gone: refused",
                            s->id, socket, engine);
  return 0;
}

/* ---- create --------------------------------------------------------------------------------- */

static int engine_features(struct docker_engine *e, struct docker_engine_features *f,
                           struct cordon_error **err) {
  _cleanup_json_ json_t *info = NULL;
  if (docker_engine_call(e, "GET", "/info", NULL, &info, err) < 0)
    return -1;
  f->memory_limit = json_is_true(json_object_get(info, "MemoryLimit"));
  f->swap_limit = json_is_true(json_object_get(info, "SwapLimit"));
  f->cpu_cfs_quota = json_is_true(json_object_get(info, "CpuCfsQuota"));
  f->pids_limit = json_is_true(json_object_get(info, "PidsLimit"));
  size_t i;
  json_t *opt;
  json_array_foreach(json_object_get(info, "SecurityOptions"), i, opt) {
    const char *v = json_string_value(opt);
    if (v && !strncmp(v, "name=seccomp", 12))
      f->seccomp = true;
    if (v && !strncmp(v, "name=userns", 11))
      f->userns = true;
  }
  f->nvidia_runtime = json_object_get(json_object_get(info, "Runtimes"), "nvidia") != NULL;
  return 0;
}

/* An empty file owned by us, mounted read-only over hidden files. */
static int make_empty_file(struct cordon_session *s, char **out, struct cordon_error **err) {
  if (asprintf(out, "%s/%s", s->state_dir, EMPTY_FILE) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "empty file");
  int fd = open(*out, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0444);
  if (fd < 0 && errno != EEXIST)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot create %s", *out);
  if (fd >= 0)
    close(fd);
  return 0;
}

/* Who commands run as, and the identity files that name them (docker_command_identity,
 * docker_identity_files). As root, a workspace cordon made (created or restored) is first given
 * to the sandbox user, so that uid 1000 runs there as it does on ns; a workspace the caller gave
 * keeps its owner. */
static int command_identity(struct cordon_session *s, const struct cordon_manifest *m, bool owned,
                            const struct docker_engine_features *features, uid_t *uid, gid_t *gid,
                            char **passwd_path, char **group_path, struct cordon_error **err) {
  if (owned && geteuid() == 0 && docker_give_workspace(s->workspace, err) < 0)
    return -1;
  struct stat ws;
  if (stat(s->workspace, &ws) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "workspace %s", s->workspace);
  if (docker_command_identity(ws.st_uid, ws.st_gid, m->user_root, features, uid, gid, err) < 0)
    return -1;
  _cleanup_free_ char *passwd = NULL, *group = NULL;
  if (docker_identity_files(&passwd, &group, err) < 0)
    return -1;
  if (asprintf(passwd_path, "%s/" PASSWD_FILE, s->state_dir) < 0 ||
      asprintf(group_path, "%s/" GROUP_FILE, s->state_dir) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "identity files");
  if (fs_write_atomic(*passwd_path, passwd, strlen(passwd), 0444, err) < 0 ||
      fs_write_atomic(*group_path, group, strlen(group), 0444, err) < 0)
    return -1;
  return 0;
}

/* Remove a container we made, on a failure path: best effort, errors are not the news. */
static void remove_container(struct docker_engine *e, const char *id) {
  _cleanup_free_ char *path = NULL;
  if (asprintf(&path, "/containers/%s?force=true&v=true", id) < 0)
    return;
  long status = 0;
  struct cordon_error *ignored = NULL;
  docker_engine_request(e, "DELETE", path, NULL, &status, NULL, &ignored);
  cordon_error_free(ignored);
}

/* The always-hidden set inside a grant (and a .cordon/ at its top): container paths to cover
 * with an empty tmpfs, added to *hidden once each. */
static int hide_in_grant(const struct confine_path *grant, const char *const *private_dirs,
                         char ***hidden, struct cordon_error **err) {
  char **beneath = NULL;
  int r = confine_private_beneath(private_dirs, grant->source, true, &beneath, err);
  for (size_t i = 0; r == 0 && beneath && beneath[i]; i++) {
    char *target = NULL;
    bool seen = false;
    if (asprintf(&target, "%s/%s", grant->path, beneath[i]) < 0) {
      r = cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "policy");
      break;
    }
    for (size_t j = 0; *hidden && (*hidden)[j]; j++)
      seen |= strcmp((*hidden)[j], target) == 0;
    if (seen)
      free(target);
    else if (strv_push_take(hidden, target) < 0)
      r = cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "policy");
  }
  strv_free(beneath);
  return r;
}

/* Host paths granted read-only, checked by the ns backend's rules and resolved to the real
 * paths the engine will bind (at their own path inside the container). */
static int resolve_grants(const char *const *allow_ro, const char *root,
                          const char *const *private_dirs, struct confine_path **out, size_t *count,
                          char ***hidden, struct cordon_error **err) {
  size_t n = strv_length(allow_ro);
  *count = 0;
  *out = calloc(n + 1, sizeof(**out));
  char **norm = calloc(n + 1, sizeof(char *));
  int r = *out && norm ? 0 : cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "policy");
  for (size_t i = 0; i < n && r == 0; i++)
    r = confine_normalize_host_path(allow_ro[i], "read-only grant", &norm[i], err);
  if (r == 0)
    r = confine_check_host_lists(NULL, (const char *const *)norm, root, err);
  for (size_t i = 0; i < n && r == 0; i++) {
    r = confine_resolve_host_path(norm[i], false, false, "read-only grant", &(*out)[i], NULL, err);
    *count = i + 1;
    if (r == 0)
      r = confine_check_not_private((*out)[i].source, "read-only grant", private_dirs, err);
    if (r == 0 && (*out)[i].kind == CONFINE_KIND_DIR)
      r = hide_in_grant(&(*out)[i], private_dirs, hidden, err);
  }
  strv_free(norm);
  return r;
}

/* Make the container (not started yet): *id is the engine's id for it, malloc'd. */
static int create_container(struct docker_engine *e, const char *session_id, json_t *config,
                            const char *image, char **id, struct cordon_error **err) {
  _cleanup_free_ char *name = NULL;
  if (asprintf(&name, "/containers/create?name=cordon-%s", session_id) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "container");
  long status = 0;
  _cleanup_json_ json_t *created = NULL;
  if (docker_engine_request(e, "POST", name, config, &status, &created, err) < 0) {
    /* The engine may have made it before the connection broke: remove it by its name. */
    remove_container(e, name + strlen("/containers/create?name="));
    return -1;
  }
  if (status == 404)
    return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0,
                            "image %s is not present in the Docker engine at %s (cordon does not "
                            "pull images: build, pull or import it first)",
                            image, docker_engine_socket(e));
  const char *made = json_string_value(json_object_get(created, "Id"));
  if (status != 201 || !made) {
    const char *msg = json_string_value(json_object_get(created, "message"));
    return cordon_error_set(err, CORDON_ERR_SYSTEM, 0,
                            "Docker engine refused the container (HTTP %ld): %s", status,
                            msg ? msg : "no message");
  }
  *id = strdup(made);
  if (!*id) {
    remove_container(e, made);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "container");
  }
  return 0;
}

/* Commands run as the workspace's owner, who must be able to write a writable named volume:
 * its top directory (cordon's own, in .cordon/volumes/) goes to that owner. A host directory
 * bound with -v is the operator's and keeps its owner. */
static int give_named_volumes(struct cordon_session *s, const struct cordon_manifest *m, uid_t uid,
                              gid_t gid, struct cordon_error **err) {
  _cleanup_free_ char *prefix = NULL;
  if (asprintf(&prefix, "%s/volumes", cordon_context_state_dir(s->ctx)) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "volumes");
  for (size_t i = 0; i < m->n_volumes; i++) {
    const struct cordon_volume *v = &m->volumes[i];
    if (v->read_only || !confine_path_covers(prefix, v->source) || !strcmp(prefix, v->source))
      continue;
    _cleanup_close_ int fd = open(v->source, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "volume %s", v->source);
    if ((st.st_uid != uid || st.st_gid != gid) && fchown(fd, uid, gid) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno,
                              "cannot give volume %s to the container's user", v->source);
  }
  return 0;
}

/* create and resume: the workspace, then the container. */
/* HOME is the container's private tmpfs (docker_container_config mounts it). */
static int docker_set_home(struct cordon_session *s, struct cordon_error **err) {
  free(s->home);
  s->home = strdup(CORDON_SANDBOX_HOME);
  return s->home ? 0 : cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "home");
}

static int start_session(struct cordon_session *s, const struct cordon_manifest *m,
                         const char *snapshot_id, struct cordon_error **err) {
  const struct cordon_policy *p = &m->policy;
  if (docker_set_home(s, err) < 0)
    return -1;
  if (m->repo)
    return cordon_error_set(err, CORDON_ERR_UNSUPPORTED, 0,
                            "git repository workspaces are not supported by the docker backend "
                            "yet; give a --workspace directory");
  const char *network = NULL;
  if (docker_network_mode(p->egress, getenv("CORDON_DOCKER_NETWORK"), &network, err) < 0)
    return -1;
  const char *image = m->image && *m->image ? m->image : docker_default_image();
  const char *init = NULL;
  if (docker_check_image_name(image, err) < 0 || docker_init_binary(&init, err) < 0)
    return -1;

  char cpuset[512] = "";
  unsigned cpus_visible = confine_cpus_visible(p->limits.cpus);
  if (confine_check_sandbox_root(s->root, NULL, err) < 0 ||
      confine_check_limits(&p->limits, err) < 0 ||
      confine_check_cpu_count(p->limits.cpus, err) < 0 ||
      (cpus_visible && confine_cpuset_list(cpus_visible, cpuset, sizeof(cpuset), err) < 0))
    return -1;
  bool owned = false;
  _cleanup_(strv_freep) char **private_dirs = NULL, **hidden_grant_dirs = NULL;
  if (confine_private_set(cordon_context_state_dir(s->ctx), &private_dirs, err) < 0 ||
      docker_prepare_workspace(s, m, snapshot_id, (const char *const *)private_dirs, &owned, err) <
          0)
    return -1;
  /* `--ro .`: the whole workspace read-only; the rest of the list still counts. */
  bool workspace_read_only = false;
  _cleanup_(strv_freep) char **read_only =
      confine_without_workspace_root(p->read_only, &workspace_read_only);
  if (!read_only)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "policy");
  struct docker_paths paths;
  if (docker_paths_resolve(s->workspace, (const char *const *)read_only, p->hidden,
                           (const char *const *)private_dirs, &paths, err) < 0)
    return -1;
  int r = -1;
  struct confine_path *grants = NULL;
  size_t n_grants = 0;
  _cleanup_engine_ struct docker_engine *e = NULL;
  _cleanup_free_ char *empty = NULL, *creator = NULL, *user = NULL, *id = NULL, *start = NULL,
                      *agent_dir = NULL, *passwd = NULL, *group = NULL;
  long agent_pid = 0;
  _cleanup_close_ int egress_handoff = -1; /* restricted: the proxy's daemon waits on it */
  _cleanup_json_ json_t *config = NULL;
  struct docker_engine_features features = {0};
  const struct cordon_limits *l = &p->limits;
  bool limited = l->memory_bytes || l->pids || l->cpus > 0;
  uid_t uid = 0;
  gid_t gid = 0;
  if (resolve_grants(p->allow_ro, s->root, (const char *const *)private_dirs, &grants, &n_grants,
                     &hidden_grant_dirs, err) < 0 ||
      docker_engine_open(NULL, &e, err) < 0 || make_empty_file(s, &empty, err) < 0)
    goto out;
  /* /info costs ~25 ms: ask only when there are limits (or --user root, or NVIDIA nodes) to
   * check. */
  if ((limited || m->user_root || docker_devices_need_nvidia(m->devices)) &&
      engine_features(e, &features, err) < 0)
    goto out;
  /* A session resumed from a snapshot (race candidates and judges) never runs as root: its
   * fresh workspace goes to the sandbox user, its root file system is read-only and /tmp
   * is its own tmpfs, so a command cannot replace a tool a later command (a judge) uses. */
  bool resumed = snapshot_id != NULL && owned;
  if (command_identity(s, m, owned, &features, &uid, &gid, &passwd, &group, err) < 0 ||
      docker_make_agent_dir(s, uid, gid, &agent_dir, err) < 0 ||
      docker_egress_start(s, m, agent_dir, uid, gid, &egress_handoff, err) < 0)
    goto out;
  if (asprintf(&user, "%u:%u", (unsigned)uid, (unsigned)gid) < 0) {
    cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "container");
    goto out;
  }
  if (give_named_volumes(s, m, uid, gid, err) < 0)
    goto out;
  creator = docker_creator_identity(getpid());
  struct docker_container_spec spec = {
      .image = image,
      .session_id = s->id,
      .project_state_dir = cordon_context_state_dir(s->ctx),
      .creator = creator,
      .ephemeral = m->ephemeral,
      .workspace = s->workspace,
      .root = s->root,
      .init_path = init,
      .agent_dir = agent_dir,
      .empty_file = empty,
      .user = user,
      .network = network,
      .allow_ro = grants,
      .n_allow_ro = n_grants,
      .hidden_grant_dirs = (const char *const *)hidden_grant_dirs,
      .paths = &paths,
      .limits = l,
      .features = &features,
      .read_only_root = resumed,
      .volumes = m->volumes,
      .n_volumes = m->n_volumes,
      .passwd = passwd,
      .group = group,
      .workspace_read_only = workspace_read_only,
      .cpuset = cpuset[0] ? cpuset : NULL,
      .devices = m->devices,
  };
  if (docker_container_config(&spec, &config, err) < 0)
    goto out;
  if (create_container(e, s->id, config, image, &id, err) < 0)
    goto out;
  if (asprintf(&start, "/containers/%s/start", id) < 0) {
    cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "container");
    remove_container(e, id);
    goto out;
  }
  /* Whatever fails from here on, the container must not outlive the attempt. */
  if (docker_engine_call(e, "POST", start, NULL, NULL, err) < 0 ||
      docker_agent_wait_ready(s, id, &agent_pid, err) < 0 ||
      docker_egress_bind(egress_handoff, agent_pid, err) < 0 ||
      write_private_record(s, id, docker_engine_socket(e), agent_pid, err) < 0 ||
      save_backend_state(s, id, docker_engine_socket(e), image, owned, snapshot_id, agent_pid,
                         err) < 0) {
    remove_container(e, id);
    goto out;
  }
  struct docker_session *d = calloc(1, sizeof(*d));
  if (!d || !(d->container = strdup(id))) {
    free(d);
    remove_container(e, id);
    cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "session");
    goto out;
  }
  d->engine = steal_ptr(&e);
  d->agent = true;
  d->agent_pid = agent_pid;
  s->impl = d;
  r = 0;
out:
  confine_paths_free(grants, n_grants);
  docker_paths_clear(&paths);
  return r;
}

int docker_create(struct cordon_session *s, const struct cordon_manifest *m,
                  struct cordon_error **err) {
  return start_session(s, m, NULL, err);
}

int docker_resume(struct cordon_session *s, const struct cordon_manifest *m,
                  const char *snapshot_id, struct cordon_error **err) {
  return start_session(s, m, snapshot_id, err);
}

int docker_attach(struct cordon_session *s, struct cordon_error **err) {
  _cleanup_free_ char *container = NULL, *socket = NULL;
  bool agent = false;
  long agent_pid = 0;
  if (load_backend_state(s, &container, &socket, &agent, &agent_pid, err) < 0 ||
      check_private_record(s, container, socket, agent_pid, err) < 0 || docker_set_home(s, err) < 0)
    return -1;
  struct docker_session *d = calloc(1, sizeof(*d));
  if (!d)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "session");
  d->agent = agent;
  d->agent_pid = agent_pid;
  /* No request here: a stopped or removed container shows at the first operation, with a
   * message saying so, and attaching stays free for commands that only read files. */
  if (docker_engine_open(socket, &d->engine, err) < 0) {
    free(d);
    return -1;
  }
  d->container = steal_ptr(&container);
  s->impl = d;
  return 0;
}

void docker_release(struct cordon_session *s) {
  docker_session_free(s->impl);
  s->impl = NULL;
}

/* The session's engine client and container, attaching from the state when create/attach
 * did not (destroy after a failed attach). */
int docker_session_handle(struct cordon_session *s, struct docker_session **out,
                          struct cordon_error **err) {
  if (!s->impl && docker_attach(s, err) < 0)
    return -1;
  *out = s->impl;
  return 0;
}

/* Whether the container the state names is this session's: labelled by cordon for this
 * session of this project (or already gone). Anything else is never stopped or removed. */
static int check_container_labels(struct cordon_session *s, struct docker_session *d,
                                  struct cordon_error **err) {
  long status = 0;
  _cleanup_json_ json_t *info = NULL;
  if (docker_inspect_container(d, &status, &info, err) < 0)
    return cordon_error_prefix(err, "session %s", s->id);
  if (status == 404)
    return 0;
  json_t *labels = json_object_get(json_object_get(info, "Config"), "Labels");
  const char *session = json_string_value(json_object_get(labels, DOCKER_LABEL_SESSION));
  const char *project = json_string_value(json_object_get(labels, DOCKER_LABEL_PROJECT));
  if (status != 200 || !session || !project || strcmp(session, s->id) != 0 ||
      strcmp(project, cordon_context_state_dir(s->ctx)) != 0)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                            "session %s: container %.12s is not labelled as this session's "
                            "(state tampered with?): refusing to act on it",
                            s->id, d->container);
  return 0;
}

int docker_destroy(struct cordon_session *s, struct cordon_error **err) {
  struct docker_session *d = NULL;
  struct cordon_error *state_err = NULL;
  if (!s->impl && !s->backend_state)
    return 0; /* create failed before it recorded anything (and removed its own container) */
  if (docker_session_handle(s, &d, &state_err) < 0) {
    /* No container was recorded: create failed before making one (and removed its own). */
    if (state_err && state_err->kind != CORDON_ERR_INVALID) {
      cordon_error_free(state_err);
      return 0;
    }
    if (err && !*err)
      *err = state_err;
    else
      cordon_error_free(state_err);
    return -1;
  }
  if (check_container_labels(s, d, err) < 0)
    return -1;
  _cleanup_free_ char *path = NULL;
  if (asprintf(&path, "/containers/%s?force=true&v=true", d->container) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "destroy");
  long status = 0;
  json_t *answer = NULL;
  if (docker_engine_request(d->engine, "DELETE", path, NULL, &status, &answer, err) < 0)
    return cordon_error_prefix(err, "session %s: cannot remove container %.12s", s->id,
                               d->container);
  const char *msg = json_string_value(json_object_get(answer, "message"));
  int r = 0;
  if (status != 204 && status != 404) /* 404: already gone, destroy is idempotent */
    r = cordon_error_set(err, CORDON_ERR_SYSTEM, 0,
                         "session %s: the Docker engine did not remove container %.12s (HTTP "
                         "%ld): %s",
                         s->id, d->container, status, msg ? msg : "no message");
  json_decref(answer);
  return r;
}

int docker_shutdown(struct cordon_session *s, struct cordon_error **err) {
  struct docker_session *d = NULL;
  if (docker_session_handle(s, &d, err) < 0 || check_container_labels(s, d, err) < 0)
    return -1;
  _cleanup_free_ char *path = NULL;
  if (asprintf(&path, "/containers/%s/stop?t=2", d->container) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "shutdown");
  long status = 0;
  json_t *answer = NULL;
  if (docker_engine_request(d->engine, "POST", path, NULL, &status, &answer, err) < 0)
    return cordon_error_prefix(err, "session %s", s->id);
  const char *msg = json_string_value(json_object_get(answer, "message"));
  int r = 0;
  /* 304: already stopped; 404: already removed. Both are "stopped". */
  if (status != 204 && status != 304 && status != 404)
    r = cordon_error_set(err, CORDON_ERR_SYSTEM, 0,
                         "session %s: the Docker engine did not stop container %.12s (HTTP %ld): "
                         "%s",
                         s->id, d->container, status, msg ? msg : "no message");
  json_decref(answer);
  return r;
}
