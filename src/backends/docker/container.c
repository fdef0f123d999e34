/* The session's container as the exec paths and the session see it: its record in the
 * engine, whether it still runs after an exec ended without a status, the working directory
 * of a request inside it, its memory cgroup's OOM-kill counter, and the creator identity its
 * label carries (container.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/docker/container.h"
#include "backends/docker/engine.h"
#include "base/cleanup.h"
#include "base/fs.h"
#include "base/proc.h"
#include "confine/cgroup.h"

/* How long the engine's record may keep saying "running" after it refused an exec because the
 * container is not (it records the container's end asynchronously). */
#define CONTAINER_END_SETTLE 5.0

/* /proc/PID/cgroup: a line per hierarchy, a few hundred bytes; the bound is only a guard. */
#define PROC_CGROUP_MAX (1 << 16)

/* The engine's record of the session's container: *status 200 with *info, or 404. */
int docker_inspect_container(struct docker_session *d, long *status, json_t **info,
                             struct cordon_error **err) {
  _cleanup_free_ char *path = NULL;
  if (asprintf(&path, "/containers/%s/json", d->container) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "container");
  return docker_engine_request(d->engine, "GET", path, NULL, status, info, err);
}

/* After a stream that ended without the wrapper's trailer: did the container die? (known_dead:
 * the engine already refused an exec because the container is not running) */
int docker_container_gone_error(struct cordon_session *s, struct docker_session *d, bool known_dead,
                                struct cordon_error **err) {
  long status = 0;
  _cleanup_json_ json_t *info = NULL;
  struct cordon_error *ignored = NULL;
  /* The engine records the container's end after the exec's: give it a moment to catch up. */
  double until = fs_now() + (known_dead ? CONTAINER_END_SETTLE : 0.0);
  for (;;) {
    json_decref(info);
    info = NULL;
    if (docker_inspect_container(d, &status, &info, &ignored) < 0) {
      cordon_error_free(ignored);
      return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0,
                              "session %s: the Docker engine went away while the command ran",
                              s->id);
    }
    if (status == 404 || !json_is_true(json_object_get(json_object_get(info, "State"), "Running")))
      break;
    if (fs_now() >= until)
      return 0;
    usleep(20000);
  }
  if (status == 404)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, 0,
                            "session %s: its container %.12s was removed while the command ran "
                            "(outside cordon)",
                            s->id, d->container);
  json_t *state = json_object_get(info, "State");
  return cordon_error_set(
      err, CORDON_ERR_SYSTEM, 0,
      "session %s: its container %.12s stopped while the command ran (exit code %lld%s; killed "
      "or stopped outside cordon?); the session cannot run commands any more: destroy it",
      s->id, d->container, (long long)json_integer_value(json_object_get(state, "ExitCode")),
      json_is_true(json_object_get(state, "OOMKilled")) ? ", out of memory" : "");
}

/* The working directory inside the container. */
int docker_container_cwd(struct cordon_session *s, const char *cwd, char **out,
                         struct cordon_error **err) {
  if (cwd && cwd[0] == '/') {
    *out = strdup(cwd); /* outside the workspace: a path of the container's own filesystem */
  } else if (!cwd || !*cwd) {
    *out = strdup(s->root);
  } else {
    /* Inside the workspace: it must be a directory there, reached without leaving it. */
    _cleanup_close_ int root = open(s->workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root < 0)
      return cordon_error_set(err, CORDON_ERR_NOT_FOUND, errno, "workspace %s", s->workspace);
    _cleanup_close_ int dir =
        fs_open_beneath(root, cwd, O_PATH | O_DIRECTORY, 0, "the workspace", err);
    if (dir < 0)
      return cordon_error_prefix(err, "working directory");
    size_t n = strlen(s->root);
    while (n > 1 && s->root[n - 1] == '/')
      n--;
    if (asprintf(out, "%.*s/%s", (int)n, s->root, cwd) < 0)
      *out = NULL;
  }
  return *out ? 0 : cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "working directory");
}

/* "BOOTID:PID:STARTTIME" of a process, so that gc can tell whether it still runs; NULL when it
 * does not. */
char *docker_creator_identity(pid_t pid) {
  char boot[64];
  fs_boot_id(boot, sizeof(boot));
  unsigned long long start = proc_start_time(pid);
  char *out = NULL;
  if (!start || asprintf(&out, "%s:%d:%llu", boot, (int)pid, start) < 0)
    return NULL;
  return out;
}

int64_t docker_container_oom_kills(const struct docker_session *d) {
  if (d->agent_pid <= 0 || !d->container)
    return -1;
  char path[64];
  snprintf(path, sizeof(path), "/proc/%ld/cgroup", d->agent_pid);
  _cleanup_free_ unsigned char *text = NULL;
  size_t length = 0;
  if (fs_read_file(path, PROC_CGROUP_MAX, &text, &length, NULL) < 0)
    return -1;
  char *buf = (char *)text;
  /* Lines "ID:CONTROLLERS:PATH": v1's memory hierarchy wins over v2's unified line. */
  const char *v1 = NULL, *v2 = NULL;
  for (char *line = buf; line && *line;) {
    char *next = strchr(line, '\n');
    if (next)
      *next++ = 0;
    char *c = strchr(line, ':');
    char *p = c ? strchr(c + 1, ':') : NULL;
    if (p) {
      *p = 0;
      const char *controllers = c + 1;
      if (!*controllers)
        v2 = p + 1;
      for (const char *m = strstr(controllers, "memory"); m; m = strstr(m + 1, "memory"))
        if ((m == controllers || m[-1] == ',') && (m[6] == 0 || m[6] == ','))
          v1 = p + 1;
    }
    line = next;
  }
  const char *cgroup = v1 ? v1 : v2;
  /* The pid may have been reused since the session was made: it must be this container's. */
  if (!cgroup || !strstr(cgroup, d->container) || strstr(cgroup, ".."))
    return -1;
  _cleanup_free_ char *dir = NULL;
  if (asprintf(&dir, v1 ? "/sys/fs/cgroup/memory%s" : "/sys/fs/cgroup%s", cgroup) < 0)
    return -1;
  uint64_t kills = 0;
  if (confine_cgroup_read_key(dir, v1 ? "memory.oom_control" : "memory.events", "oom_kill",
                              &kills) < 0)
    return -1;
  return (int64_t)kills;
}
