/* Path policy resolution and the engine configurations of the docker backend (see config.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/docker/config.h"
#include "backends/docker/protocol.h"
#include "base/cleanup.h"
#include "base/fs.h"
#include "base/strv.h"
#include "confine/devices.h"
#include "confine/policy.h"
#include "confine/private.h"
#include "confine/resolve.h"

#define CORDON_DIR ".cordon"

/* ---- path policy -------------------------------------------------------------------------- */

/* Normalise and resolve one list beneath the workspace (confine/policy.h, confine/resolve.h:
 * the ns backend's rules), keeping the canonical paths: those are what gets mounted. */
static int resolve_list(int rootfd, const char *workspace, const char *what,
                        const char *const *paths, struct docker_path **out, size_t *count,
                        char ***canonical, struct cordon_error **err) {
  size_t n = strv_length(paths);
  *out = calloc(n + 2, sizeof(**out)); /* +1: room for .cordon in the hidden list */
  *canonical = calloc(n + 2, sizeof(char *));
  if (!*out || !*canonical)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "policy");
  for (size_t i = 0; i < n; i++) {
    _cleanup_free_ char *norm = NULL;
    struct confine_path resolved = {0};
    if (confine_normalize_workspace_path(paths[i], what, &norm, err) < 0 ||
        confine_resolve_workspace_path(rootfd, workspace, norm, what, &resolved, err) < 0)
      return -1;
    (*out)[i].relative = steal_ptr(&resolved.path);
    (*out)[i].directory = resolved.kind == CONFINE_KIND_DIR;
    confine_path_clear(&resolved);
    (*canonical)[i] = (*out)[i].relative; /* borrowed */
    *count = i + 1;
  }
  return 0;
}

/* Hide the directory `rel` (a member of the always-hidden set) unless a hidden path covers it
 * already; hidden paths beneath it go. hidden_list mirrors out->hidden's names. */
static int hide_private(struct docker_paths *out, char ***hidden_list, const char *rel,
                        struct cordon_error **err) {
  size_t o = 0;
  bool covered = false;
  for (size_t i = 0; i < out->n_hidden; i++) {
    if (confine_path_covers(out->hidden[i].relative, rel)) {
      covered = true;
    } else if (confine_path_covers(rel, out->hidden[i].relative)) {
      free(out->hidden[i].relative);
      continue;
    }
    out->hidden[o++] = out->hidden[i];
  }
  out->n_hidden = o;
  if (!covered) {
    struct docker_path *h = realloc(out->hidden, (o + 2) * sizeof(*h));
    char **list = h ? realloc(*hidden_list, (o + 2) * sizeof(char *)) : NULL;
    if (h)
      out->hidden = h;
    if (list)
      *hidden_list = list;
    if (!h || !list || !(h[o].relative = strdup(rel)))
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "policy");
    h[o].directory = true;
    out->n_hidden = ++o;
  }
  for (size_t i = 0; i < out->n_hidden; i++)
    (*hidden_list)[i] = out->hidden[i].relative;
  (*hidden_list)[out->n_hidden] = NULL;
  return 0;
}

int docker_paths_resolve(const char *workspace, const char *const *read_only,
                         const char *const *hidden, const char *const *private_dirs,
                         struct docker_paths *out, struct cordon_error **err) {
  memset(out, 0, sizeof(*out));
  _cleanup_close_ int rootfd = open(workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (rootfd < 0)
    return cordon_error_set(err, CORDON_ERR_NOT_FOUND, errno, "workspace %s", workspace);
  _cleanup_free_ char **ro_list = NULL, **hidden_list = NULL;
  if (resolve_list(rootfd, workspace, "read-only path", read_only, &out->read_only,
                   &out->n_read_only, &ro_list, err) < 0 ||
      resolve_list(rootfd, workspace, "hidden path", hidden, &out->hidden, &out->n_hidden,
                   &hidden_list, err) < 0) {
    docker_paths_clear(out);
    return -1;
  }
  /* No protected file may stay reachable through another name (a hard link). */
  if (confine_check_hard_links(rootfd, (const char *const *)ro_list,
                               (const char *const *)hidden_list, err) < 0) {
    docker_paths_clear(out);
    return -1;
  }
  /* cordon's own state is always hidden (when the workspace is a project holding it). */
  struct stat st;
  if (fstatat(rootfd, CORDON_DIR, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
      (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode))) {
    bool covered = false;
    for (size_t i = 0; i < out->n_hidden; i++)
      covered |= confine_path_covers(out->hidden[i].relative, CORDON_DIR);
    if (!covered) {
      struct docker_path *h = &out->hidden[out->n_hidden];
      h->relative = strdup(CORDON_DIR);
      h->directory = S_ISDIR(st.st_mode);
      if (!h->relative) {
        docker_paths_clear(out);
        return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "policy");
      }
      hidden_list[out->n_hidden++] = h->relative;
    }
  }
  /* cordon's keys, state home and every other project's .cordon/, at any depth. */
  _cleanup_free_ char *real = confine_fd_path(rootfd);
  char **beneath = NULL;
  int r = real ? confine_private_beneath(private_dirs, real, false, &beneath, err)
               : cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "workspace %s", workspace);
  for (size_t i = 0; r == 0 && beneath && beneath[i]; i++)
    r = hide_private(out, &hidden_list, beneath[i], err);
  strv_free(beneath);
  if (r < 0) {
    docker_paths_clear(out);
    return -1;
  }
  /* Overlaps are judged on the canonical paths: two names of one directory overlap. */
  if (confine_check_workspace_lists((const char *const *)ro_list, (const char *const *)hidden_list,
                                    err) < 0 ||
      /* Docker's mounts cannot re-show a read-only path inside a hidden directory's mask. */
      confine_check_no_reshown((const char *const *)ro_list, (const char *const *)hidden_list,
                               err) < 0) {
    docker_paths_clear(out);
    return -1;
  }
  return 0;
}

void docker_paths_clear(struct docker_paths *paths) {
  for (size_t i = 0; paths->read_only && i < paths->n_read_only; i++)
    free(paths->read_only[i].relative);
  for (size_t i = 0; paths->hidden && i < paths->n_hidden; i++)
    free(paths->hidden[i].relative);
  free(paths->read_only);
  free(paths->hidden);
  memset(paths, 0, sizeof(*paths));
}

/* ---- container configuration -------------------------------------------------------------- */

static char *join_path(const char *dir, const char *rel) {
  char *p = NULL;
  size_t n = strlen(dir);
  while (n > 1 && dir[n - 1] == '/')
    n--;
  if (asprintf(&p, "%.*s/%s", (int)n, dir, rel) < 0)
    return NULL;
  return p;
}

static json_t *bind_mount(const char *source, const char *target, bool read_only) {
  /* rprivate: nothing mounted later on either side propagates through the bind. */
  return json_pack("{s:s, s:s, s:s, s:b, s:{s:s}}", "Type", "bind", "Source", source, "Target",
                   target, "ReadOnly", read_only, "BindOptions", "Propagation", "rprivate");
}

static int unenforceable(struct cordon_error **err, const char *what) {
  return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0,
                          "the Docker engine cannot enforce the %s requested (its host lacks the "
                          "cgroup support); refusing rather than running without it",
                          what);
}

/* The path policy as mounts, appended to mounts: the protected paths' ancestors bound onto
 * themselves, read-only paths re-bound read-only, hidden paths covered, and the always-hidden
 * directories inside host grants covered. */
static int append_policy_mounts(const struct docker_container_spec *spec, json_t *mounts,
                                struct cordon_error **err) {
  const struct docker_paths *p = spec->paths;
  int r = 0;
  /* Every directory between the workspace root and a protected path is bound onto itself
   * (read-write, like the workspace): a mount point cannot be renamed or removed from inside, so
   * `mv .git x; mkdir -p .git/hooks` cannot carry `--ro .git/hooks` away. The engine mounts
   * parents first (it sorts by depth). */
  _cleanup_free_ const char **ro_list = calloc(p->n_read_only + 1, sizeof(char *));
  _cleanup_free_ const char **hidden_list = calloc(p->n_hidden + 1, sizeof(char *));
  char **ancestors = NULL;
  if (!ro_list || !hidden_list)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "container configuration");
  for (size_t i = 0; i < p->n_read_only; i++)
    ro_list[i] = p->read_only[i].relative;
  for (size_t i = 0; i < p->n_hidden; i++)
    hidden_list[i] = p->hidden[i].relative;
  if (confine_protected_ancestors(ro_list, hidden_list, NULL, &ancestors, err) < 0)
    return -1;
  for (size_t i = 0; ancestors[i] && r == 0; i++) {
    _cleanup_free_ char *source = join_path(spec->workspace, ancestors[i]);
    _cleanup_free_ char *target = join_path(spec->root, ancestors[i]);
    if (!source || !target)
      r = -1;
    else
      json_array_append_new(mounts, bind_mount(source, target, spec->workspace_read_only));
  }
  strv_free(ancestors);
  for (size_t i = 0; i < p->n_read_only && r == 0; i++) {
    _cleanup_free_ char *source = join_path(spec->workspace, p->read_only[i].relative);
    _cleanup_free_ char *target = join_path(spec->root, p->read_only[i].relative);
    if (!source || !target)
      r = -1;
    else
      json_array_append_new(mounts, bind_mount(source, target, true));
  }
  for (size_t i = 0; i < p->n_hidden && r == 0; i++) {
    _cleanup_free_ char *target = join_path(spec->root, p->hidden[i].relative);
    if (!target) {
      r = -1;
    } else if (p->hidden[i].directory) {
      /* An empty, read-only tmpfs owned by root: nothing to read, nothing to keep. */
      json_array_append_new(mounts, json_pack("{s:s, s:s, s:b, s:{s:I, s:i}}", "Type", "tmpfs",
                                              "Target", target, "ReadOnly", 1, "TmpfsOptions",
                                              "SizeBytes", (json_int_t)4096, "Mode", 0555));
    } else {
      json_array_append_new(mounts, bind_mount(spec->empty_file, target, true));
    }
  }
  for (size_t i = 0; spec->hidden_grant_dirs && spec->hidden_grant_dirs[i]; i++)
    json_array_append_new(mounts,
                          json_pack("{s:s, s:s, s:b, s:{s:I, s:i}}", "Type", "tmpfs", "Target",
                                    spec->hidden_grant_dirs[i], "ReadOnly", 1, "TmpfsOptions",
                                    "SizeBytes", (json_int_t)4096, "Mode", 0555));
  if (r < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "container configuration");
  return 0;
}

/* The private HOME (CORDON_SANDBOX_HOME): a tmpfs owned by the command's uid, capped like /tmp,
 * so caches live as long as the container and never land in the workspace or a snapshot. */
static void add_home_tmpfs(json_t *host, const char *user, uint64_t bytes) {
  unsigned uid = 0, gid = 0;
  char options[160];
  if (user && sscanf(user, "%u:%u", &uid, &gid) == 2)
    snprintf(options, sizeof(options), "rw,exec,nosuid,nodev,size=%llu,mode=0700,uid=%u,gid=%u",
             (unsigned long long)bytes, uid, gid);
  else
    snprintf(options, sizeof(options), "rw,exec,nosuid,nodev,size=%llu,mode=1777",
             (unsigned long long)bytes);
  json_object_set_new(json_object_get(host, "Tmpfs"), CORDON_SANDBOX_HOME, json_string(options));
}

bool docker_devices_need_nvidia(const char *const *devices) {
  for (size_t i = 0; devices && devices[i]; i++) {
    const char *colon = strchr(devices[i], ':');
    const char *target = colon ? colon + 1 : devices[i];
    /* without a target, a node outside /dev appears as /dev/BASENAME (confine/devices.h) */
    if (!colon && strncmp(target, "/dev/", 5) != 0) {
      const char *base = strrchr(target, '/');
      if (base && !strncmp(base + 1, "nvidia", 6))
        return true;
    } else if (!strncmp(target, "/dev/nvidia", 11)) {
      return true;
    }
  }
  return false;
}

/* HostConfig.Devices: each node at its target with a device cgroup rule for it alone ("rwm":
 * read, write, mknod of that one node; the container has no CAP_MKNOD anyway). NVIDIA nodes
 * also take a device request for their GPUs (the runtime's hook brings the driver's libraries,
 * without which the nodes are of no use), and so the engine's nvidia runtime, refused by name
 * when it has none. */
static int devices_json(const char *const *devices, const struct docker_engine_features *f,
                        json_t *host, struct cordon_error **err) {
  json_t *a = json_array(), *ids = json_array();
  for (size_t i = 0; a && ids && devices && devices[i]; i++) {
    _cleanup_free_ char *path = NULL, *target = NULL;
    if (confine_device_parse(devices[i], &path, &target, err) < 0 ||
        confine_device_check(path, err) < 0) {
      json_decref(a);
      json_decref(ids);
      return -1;
    }
    json_array_append_new(a, json_pack("{s:s, s:s, s:s}", "PathOnHost", path, "PathInContainer",
                                       target, "CgroupPermissions", "rwm"));
    const char *n = target + strlen("/dev/nvidia");
    if (!strncmp(target, "/dev/nvidia", 11) && *n >= '0' && *n <= '9' &&
        strspn(n, "0123456789") == strlen(n))
      json_array_append_new(ids, json_string(n));
  }
  if (!a || !ids) {
    json_decref(a);
    json_decref(ids);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "devices");
  }
  json_object_set_new(host, "Devices", a);
  if (!docker_devices_need_nvidia(devices)) {
    json_decref(ids);
    return 0;
  }
  if (!f || !f->nvidia_runtime) {
    json_decref(ids);
    return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0,
                            "docker: NVIDIA GPUs need the engine's nvidia runtime "
                            "(nvidia-container-toolkit), which this engine does not have");
  }
  json_object_set_new(host, "DeviceRequests",
                      json_pack("[{s:s, s:o, s:[[s]]}]", "Driver", "nvidia", "DeviceIDs", ids,
                                "Capabilities", "gpu"));
  return 0;
}

int docker_container_config(const struct docker_container_spec *spec, json_t **out,
                            struct cordon_error **err) {
  const struct cordon_limits *l = spec->limits;
  const struct docker_engine_features *f = spec->features;
  if (l->memory_bytes && !f->memory_limit)
    return unenforceable(err, "memory limit");
  if (l->pids && !f->pids_limit)
    return unenforceable(err, "pids limit");
  if (l->cpus > 0 && !f->cpu_cfs_quota)
    return unenforceable(err, "CPU limit");
  if (l->memory_bytes && l->memory_bytes < 6u * 1024u * 1024u)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                            "memory limit %llu bytes is below the engine's minimum of 6 MiB",
                            (unsigned long long)l->memory_bytes);

  json_t *mounts = json_array();
  json_array_append_new(mounts, bind_mount(spec->workspace, spec->root, spec->workspace_read_only));
  json_array_append_new(mounts, bind_mount(spec->init_path, DOCKER_INIT_TARGET, true));
  /* Writable: init binds the agent's socket there (docs/security.md says why that is safe). */
  if (spec->agent_dir)
    json_array_append_new(mounts, bind_mount(spec->agent_dir, DOCKER_AGENT_TARGET, false));
  /* The same users as on ns: `id -un` is cordon on both. */
  if (spec->passwd && spec->group) {
    json_array_append_new(mounts, bind_mount(spec->passwd, "/etc/passwd", true));
    json_array_append_new(mounts, bind_mount(spec->group, "/etc/group", true));
  }
  for (size_t i = 0; i < spec->n_allow_ro; i++)
    json_array_append_new(mounts,
                          bind_mount(spec->allow_ro[i].source, spec->allow_ro[i].path, true));
  for (size_t i = 0; i < spec->n_volumes; i++)
    json_array_append_new(mounts, bind_mount(spec->volumes[i].source, spec->volumes[i].target,
                                             spec->volumes[i].read_only));
  /* /tmp a capped tmpfs as in the ns backend (not the container's writable layer), and
   * /dev/shm (ShmSize below) the same size; their pages count against the memory limit. */
  const uint64_t tmp_bytes = confine_tmp_bytes(l);
  if (append_policy_mounts(spec, mounts, err) < 0) {
    json_decref(mounts);
    return -1;
  }

  json_t *ulimits = json_pack("[{s:s, s:i, s:i}]", "Name", "core", "Soft", 0, "Hard", 0);
  if (l->nofile)
    json_array_append_new(ulimits, json_pack("{s:s, s:I, s:I}", "Name", "nofile", "Soft",
                                             (json_int_t)l->nofile, "Hard", (json_int_t)l->nofile));
  /* Always a file-size limit: the default when none was asked for, -1 (none) when asked. */
  json_int_t fsize = !l->fsize_bytes ? (json_int_t)CORDON_DEFAULT_FSIZE_BYTES
                     : l->fsize_bytes == CORDON_LIMIT_UNLIMITED ? -1
                                                                : (json_int_t)l->fsize_bytes;
  json_array_append_new(
      ulimits, json_pack("{s:s, s:I, s:I}", "Name", "fsize", "Soft", fsize, "Hard", fsize));

  json_t *host =
      json_pack("{s:o, s:s, s:[s], s:[s], s:o, s:b, s:b, s:s, s:{s:s, s:{}}, s:{s:s}}", "Mounts",
                mounts, "NetworkMode", spec->network, "CapDrop", "ALL", "SecurityOpt",
                "no-new-privileges:true", "Ulimits", ulimits, "Privileged", 0, "Init", 0, "IpcMode",
                "private", "LogConfig", "Type", "none", "Config", "RestartPolicy", "Name", "no");
  if (!host)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                            "container configuration: a path or name is not valid UTF-8 (the "
                            "Docker engine API carries text only)");
  if (spec->read_only_root)
    json_object_set_new(host, "ReadonlyRootfs", json_true());
  if (spec->devices && spec->devices[0] && devices_json(spec->devices, f, host, err) < 0) {
    json_decref(host);
    return -1;
  }
  if (l->memory_bytes) {
    json_object_set_new(host, "Memory", json_integer((json_int_t)l->memory_bytes));
    /* No swap beyond the limit, where the host accounts swap at all. */
    if (f->swap_limit)
      json_object_set_new(host, "MemorySwap", json_integer((json_int_t)l->memory_bytes));
  }
  json_object_set_new(host, "ShmSize", json_integer((json_int_t)tmp_bytes));
  /* HostConfig.Tmpfs, not a tmpfs in Mounts: only these options can say exec (the engine's
   * default for a tmpfs is noexec; the ns backend's /tmp allows exec, and test runners build
   * and run binaries there). */
  char tmp_options[128];
  snprintf(tmp_options, sizeof(tmp_options), "rw,exec,nosuid,nodev,size=%llu,mode=1777",
           (unsigned long long)tmp_bytes);
  json_object_set_new(host, "Tmpfs", json_pack("{s:s}", "/tmp", tmp_options));
  add_home_tmpfs(host, spec->user, tmp_bytes);
  if (l->pids)
    json_object_set_new(host, "PidsLimit", json_integer((json_int_t)l->pids));
  if (l->cpus > 0)
    json_object_set_new(host, "NanoCpus", json_integer((json_int_t)(l->cpus * 1e9)));
  /* The CPUs the command sees (nproc), besides the time it gets. */
  if (spec->cpuset)
    json_object_set_new(host, "CpusetCpus", json_string(spec->cpuset));

  json_t *labels =
      json_pack("{s:s, s:s, s:s}", DOCKER_LABEL_SESSION, spec->session_id, DOCKER_LABEL_PROJECT,
                spec->project_state_dir, DOCKER_LABEL_EPHEMERAL, spec->ephemeral ? "1" : "0");
  if (spec->creator)
    json_object_set_new(labels, DOCKER_LABEL_CREATOR, json_string(spec->creator));

  json_t *config =
      json_pack("{s:s, s:[s], s:[s], s:[], s:s, s:s, s:o, s:b, s:b, s:b, s:b, s:s, s:i, s:o}",
                "Image", spec->image, "Entrypoint", DOCKER_INIT_TARGET, "Cmd", "init", "Env",
                "WorkingDir", spec->root, "User", spec->user, "Labels", labels, "AttachStdin", 0,
                "OpenStdin", 0, "Tty", 0, "NetworkDisabled", !strcmp(spec->network, "none"),
                "StopSignal", "SIGTERM", "StopTimeout", 2, "HostConfig", host);
  if (!config)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                            "container configuration: the image name or a label is not valid "
                            "UTF-8");
  *out = config;
  return 0;
}

int docker_command_identity(uid_t owner_uid, gid_t owner_gid, bool user_root,
                            const struct docker_engine_features *features, uid_t *uid, gid_t *gid,
                            struct cordon_error **err) {
  if (user_root) {
    if (!features->userns)
      return cordon_error_set(err, CORDON_ERR_UNSUPPORTED, 0,
                              "--user root: this Docker engine runs containers in the host's user "
                              "namespace, where uid 0 is the host's root; refused (it needs a "
                              "daemon with userns-remap; the ns backend offers --user root)");
    *uid = 0;
    *gid = 0;
    return 0;
  }
  *uid = owner_uid;
  *gid = owner_gid;
  return 0;
}

int docker_identity_files(char **passwd, char **group, struct cordon_error **err) {
  *passwd = *group = NULL;
  if (asprintf(passwd,
               "root:x:0:0:root:/root:/sbin/nologin\n"
               "cordon:x:%u:%u:cordon sandbox:%s:/bin/sh\n"
               "nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n",
               CONFINE_SANDBOX_UID, CONFINE_SANDBOX_GID, CORDON_SANDBOX_HOME) < 0) {
    *passwd = NULL;
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "passwd");
  }
  if (asprintf(group, "root:x:0:\ncordon:x:%u:\nnogroup:x:65534:\n", CONFINE_SANDBOX_GID) < 0) {
    *group = NULL;
    free(*passwd);
    *passwd = NULL;
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "group");
  }
  return 0;
}

int docker_network_mode(enum cordon_egress egress, const char *open_network, const char **out,
                        struct cordon_error **err) {
  switch (egress) {
  case CORDON_EGRESS_NONE:
  case CORDON_EGRESS_LOOPBACK:
  /* restricted: lo only too; the bridge inside reaches the host's proxy through a socket in
   * the agent's directory (session.c, start_egress). */
  case CORDON_EGRESS_RESTRICTED: *out = "none"; return 0;
  case CORDON_EGRESS_OPEN: *out = open_network && *open_network ? open_network : "bridge"; return 0;
  default:
    return cordon_error_set(err, CORDON_ERR_UNSUPPORTED, 0,
                            "egress class %s is not implemented by the docker backend (use none, "
                            "loopback, restricted or open)",
                            cordon_egress_name(egress));
  }
}

/* ---- exec configuration ------------------------------------------------------------------- */

/* Append a string, remembering a failure (jansson refuses bytes that are not UTF-8). */
static void append_string(json_t *array, const char *text, size_t length, bool *bad) {
  json_t *s = json_stringn(text, length);
  if (!s || json_array_append_new(array, s) < 0)
    *bad = true;
}

int docker_exec_config(const struct docker_exec_spec *spec, json_t **out,
                       struct cordon_error **err) {
  bool bad = false;
  json_t *cmd = json_array(), *env = json_array();
  const char *fixed[] = {DOCKER_INIT_TARGET, "exec", "--token", spec->token};
  for (size_t i = 0; i < 4; i++)
    append_string(cmd, fixed[i], strlen(fixed[i]), &bad);
  if (spec->timeout > 0) {
    char ms[32];
    double v = spec->timeout * 1000.0;
    snprintf(ms, sizeof(ms), "%lld", (long long)(v < 1 ? 1 : v));
    append_string(cmd, "--timeout-ms", 12, &bad);
    append_string(cmd, ms, strlen(ms), &bad);
  }
  if (spec->cwd) {
    append_string(cmd, "--cwd", 5, &bad);
    append_string(cmd, spec->cwd, strlen(spec->cwd), &bad);
  }
  for (size_t i = 0; spec->env && spec->env[i]; i++) {
    const char *eq = strchr(spec->env[i], '=');
    if (!eq)
      continue;
    append_string(cmd, "--keep", 6, &bad);
    append_string(cmd, spec->env[i], (size_t)(eq - spec->env[i]), &bad);
    append_string(env, spec->env[i], strlen(spec->env[i]), &bad);
  }
  append_string(cmd, "--", 2, &bad);
  for (size_t i = 0; spec->argv[i]; i++)
    append_string(cmd, spec->argv[i], strlen(spec->argv[i]), &bad);
  if (bad) {
    json_decref(cmd);
    json_decref(env);
    return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                            "an argument, environment entry or directory is not valid UTF-8: "
                            "the Docker engine API carries text only");
  }
  *out = json_pack("{s:b, s:b, s:b, s:b, s:o, s:o, s:s}", "AttachStdin", spec->attach_stdin,
                   "AttachStdout", 1, "AttachStderr", 1, "Tty", 0, "Cmd", cmd, "Env", env,
                   "WorkingDir", "/");
  return *out ? 0 : cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "exec configuration");
}
