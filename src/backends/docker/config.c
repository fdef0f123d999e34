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
#include "confine/policy.h"
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

int docker_paths_resolve(const char *workspace, const char *const *read_only,
                         const char *const *hidden, struct docker_paths *out,
                         struct cordon_error **err) {
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
  /* Overlaps are judged on the canonical paths: two names of one directory overlap. */
  if (confine_check_workspace_lists((const char *const *)ro_list, (const char *const *)hidden_list,
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
  if (spec->read_only_root)
    json_array_append_new(mounts,
                          json_pack("{s:s, s:s, s:b, s:{s:I, s:i}}", "Type", "tmpfs", "Target",
                                    "/tmp", "ReadOnly", 0, "TmpfsOptions", "SizeBytes",
                                    (json_int_t)spec->tmp_bytes, "Mode", 01777));
  json_array_append_new(mounts, bind_mount(spec->workspace, spec->root, false));
  json_array_append_new(mounts, bind_mount(spec->init_path, DOCKER_INIT_TARGET, true));
  /* Writable: init binds the agent's socket there (docs/security.md says why that is safe). */
  if (spec->agent_dir)
    json_array_append_new(mounts, bind_mount(spec->agent_dir, DOCKER_AGENT_TARGET, false));
  for (size_t i = 0; i < spec->n_allow_ro; i++)
    json_array_append_new(mounts,
                          bind_mount(spec->allow_ro[i].source, spec->allow_ro[i].path, true));
  const struct docker_paths *p = spec->paths;
  int r = 0;
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
  if (r < 0) {
    json_decref(mounts);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "container configuration");
  }

  json_t *ulimits = json_pack("[{s:s, s:i, s:i}]", "Name", "core", "Soft", 0, "Hard", 0);
  if (l->nofile)
    json_array_append_new(ulimits, json_pack("{s:s, s:I, s:I}", "Name", "nofile", "Soft",
                                             (json_int_t)l->nofile, "Hard", (json_int_t)l->nofile));
  if (l->fsize_bytes)
    json_array_append_new(ulimits, json_pack("{s:s, s:I, s:I}", "Name", "fsize", "Soft",
                                             (json_int_t)l->fsize_bytes, "Hard",
                                             (json_int_t)l->fsize_bytes));

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
  if (l->memory_bytes) {
    json_object_set_new(host, "Memory", json_integer((json_int_t)l->memory_bytes));
    /* No swap beyond the limit, where the host accounts swap at all. */
    if (f->swap_limit)
      json_object_set_new(host, "MemorySwap", json_integer((json_int_t)l->memory_bytes));
  }
  if (l->pids)
    json_object_set_new(host, "PidsLimit", json_integer((json_int_t)l->pids));
  if (l->cpus > 0)
    json_object_set_new(host, "NanoCpus", json_integer((json_int_t)(l->cpus * 1e9)));

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

int docker_network_mode(enum cordon_egress egress, const char *open_network, const char **out,
                        struct cordon_error **err) {
  switch (egress) {
  case CORDON_EGRESS_NONE:
  case CORDON_EGRESS_LOOPBACK: *out = "none"; return 0;
  case CORDON_EGRESS_OPEN: *out = open_network && *open_network ? open_network : "bridge"; return 0;
  default:
    return cordon_error_set(err, CORDON_ERR_UNSUPPORTED, 0,
                            "egress class %s is not implemented by the docker backend (use none, "
                            "loopback or open)",
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
