/* A session's in-process data (struct ns_impl, impl.h) and what it persists: the state file's
 * backend_state, written by create and resume (start.c) and read back by attach (ns.c), and
 * checked as untrusted on the way in. Below both: it calls neither. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cordon/session.h>

#include "backends/ns/impl.h"
#include "base/cleanup.h"
#include "crypto/digest.h"
#include "protocol/rundir.h"

#define STATE_VERSION 1

void ns_impl_free(struct ns_impl *impl) {
  if (!impl)
    return;
  ns_pending_free(impl->pending);
  ns_oneshot_release(impl->ended);
  crypto_hmac_free(impl->auth);
  free(impl->socket_recorded);
  if (impl->ready_fd >= 0)
    close(impl->ready_fd);
  confine_cgroups_clear(&impl->cgroups);
  free(impl->from_snapshot);
  free(impl->dead);
  free(impl);
}

struct ns_impl *ns_impl_new(void) {
  struct ns_impl *impl = calloc(1, sizeof(*impl));
  if (impl)
    impl->run_fd = impl->ready_fd = -1;
  return impl;
}

void ns_pending_free(struct ns_pending *p) {
  if (!p)
    return;
  ns_plan_clear(&p->plan);
  ns_resolved_clear(&p->resolved);
  if (p->workspace_fd >= 0)
    close(p->workspace_fd);
  if (p->cgroup_fd >= 0)
    close(p->cgroup_fd);
  for (int i = 0; i < CONFINE_CG_MAX_DIRS; i++)
    if (p->join_fds[i] >= 0)
      close(p->join_fds[i]);
  if (p->memory_join_fd >= 0)
    close(p->memory_join_fd);
  if (p->home_fd >= 0)
    close(p->home_fd);
  if (p->egress_fd >= 0)
    close(p->egress_fd); /* the egress daemon sees its hang-up, if pid 1 never took it */
  free(p);
}

/* A number from a /proc/sys file, or -1. */
long ns_read_sysctl(const char *path) {
  char buf[32];
  _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  if (n <= 0)
    return -1;
  buf[n] = 0;
  return strtol(buf, NULL, 10);
}

/* ---- state ------------------------------------------------------------------------------- */

static const char *const cgroup_keys[CONFINE_CG_MAX_DIRS] = {"cgroup_v2", "cgroup_memory",
                                                             "cgroup_pids", "cgroup_cpu"};

static char **cgroup_slot(struct confine_cgroups *cg, int i) {
  return i == 0 ? &cg->v2 : &cg->v1[i - 1];
}

/* Where the session's socket is: recomputed from the session's identity (protocol/rundir.h),
 * never read from its state. */
int ns_socket_path(const struct cordon_session *s, char **out, struct cordon_error **err) {
  return rundir_path(cordon_context_state_dir(s->ctx), s->id, SOCKET_NAME, out, err);
}

bool ns_cgroup_dir_ok(const char *dir, const char *session_id) {
  static const char root[] = "/sys/fs/cgroup/";
  if (strncmp(dir, root, sizeof(root) - 1) != 0)
    return false;
  /* Normal form only: no empty, "." or ".." component, no trailing slash. */
  for (const char *c = dir + sizeof(root) - 1;;) {
    const char *end = strchrnul(c, '/');
    size_t n = (size_t)(end - c);
    if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
      return false;
    if (!*end)
      break;
    c = end + 1;
  }
  /* The leaf is this session's own name, as ns_start makes it. */
  const char *leaf = strrchr(dir, '/') + 1;
  return strncmp(leaf, CGROUP_PREFIX, strlen(CGROUP_PREFIX)) == 0 &&
         strcmp(leaf + strlen(CGROUP_PREFIX), session_id) == 0;
}

/* At run time, beyond the name: a cgroup that carries cordon's owner label must name this
 * session's directory (cgroup file systems without user xattrs carry none). */
static bool cgroup_dir_owned(const char *dir, const char *state_dir) {
  char owner[PATH_MAX];
  ssize_t n = getxattr(dir, "user.cordon.owner", owner, sizeof(owner) - 1);
  if (n < 0)
    return errno == ENODATA || errno == ENOTSUP || errno == ENOENT;
  owner[n] = 0;
  return strcmp(owner, state_dir) == 0;
}

int ns_save_state(struct cordon_session *s, struct ns_impl *impl, struct cordon_error **err) {
  json_t *o = json_pack("{s:i, s:I, s:I, s:b}", "version", STATE_VERSION, "holder_pid",
                        (json_int_t)impl->holder_pid, "holder_start",
                        (json_int_t)impl->holder_start, "owned_workspace", impl->owned_workspace);
  if (!o)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "session state");
  /* For the reader's information: clients recompute it and refuse a state that differs. */
  if (!impl->one_shot) {
    _cleanup_free_ char *sock = NULL;
    if (ns_socket_path(s, &sock, err) < 0) {
      json_decref(o);
      return -1;
    }
    json_object_set_new(o, "socket", json_string(sock));
  }
  /* Also what keeps the snapshot from `cas gc` while the session lives. */
  if (impl->from_snapshot)
    json_object_set_new(o, "from_snapshot", json_string(impl->from_snapshot));
  if (impl->one_shot) {
    json_object_set_new(o, "one_shot", json_true());
    json_object_set_new(o, "owner_pid", json_integer(impl->owner_pid));
    json_object_set_new(o, "owner_start", json_integer((json_int_t)impl->owner_start));
    json_object_set_new(o, "owner_boot", json_string(impl->owner_boot));
  }
  if (impl->overlay) {
    json_object_set_new(o, "overlay", json_true());
    json_object_set_new(o, "outer_uid", json_integer(impl->outer_uid));
    json_object_set_new(o, "outer_gid", json_integer(impl->outer_gid));
  }
  for (int i = 0; i < CONFINE_CG_MAX_DIRS; i++) {
    char *dir = *cgroup_slot(&impl->cgroups, i);
    if (dir)
      json_object_set_new(o, cgroup_keys[i], json_string(dir));
  }
  free(s->backend_state);
  s->backend_state = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(o);
  return s->backend_state ? 0 : cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "state");
}

int ns_load_state(struct cordon_session *s, struct ns_impl *impl, struct cordon_error **err) {
  if (!s->backend_state)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "session has no ns state");
  json_error_t jerr;
  json_t *o = json_loads(s->backend_state, 0, &jerr);
  if (!json_is_object(o)) {
    json_decref(o);
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "ns state is not a JSON object: %s",
                            jerr.text);
  }
  json_t *pid = json_object_get(o, "holder_pid"), *start = json_object_get(o, "holder_start");
  int r = 0;
  /* A one-shot session has no holder (pid 0): its sandbox lived and died with its command. Nor
   * has a session whose creator was killed right after the early state (ns_start): its holder,
   * if it was cloned at all, is found through the cgroup. */
  impl->one_shot = json_is_true(json_object_get(o, "one_shot"));
  if (json_integer_value(json_object_get(o, "version")) != STATE_VERSION || !json_is_integer(pid) ||
      !json_is_integer(start) || json_integer_value(pid) < 0 || json_integer_value(pid) > INT_MAX) {
    r = cordon_error_set(err, CORDON_ERR_INVALID, 0, "ns state lacks a valid holder pid");
  } else {
    impl->holder_pid = (pid_t)json_integer_value(pid);
    impl->holder_start = (unsigned long long)json_integer_value(start);
    json_int_t owner = json_integer_value(json_object_get(o, "owner_pid"));
    impl->owner_pid = owner > 0 && owner <= INT_MAX ? (pid_t)owner : 0;
    impl->owner_start = (unsigned long long)json_integer_value(json_object_get(o, "owner_start"));
    const char *boot = json_string_value(json_object_get(o, "owner_boot"));
    snprintf(impl->owner_boot, sizeof(impl->owner_boot), "%s", boot ? boot : "");
    impl->owned_workspace = json_is_true(json_object_get(o, "owned_workspace"));
    const char *from = json_string_value(json_object_get(o, "from_snapshot"));
    if (from && !(impl->from_snapshot = strdup(from)))
      r = cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "state");
    impl->overlay = json_is_true(json_object_get(o, "overlay"));
    json_int_t ou = json_integer_value(json_object_get(o, "outer_uid"));
    json_int_t og = json_integer_value(json_object_get(o, "outer_gid"));
    if (impl->overlay && (!from || ou <= 0 || og <= 0 || ou >= 0xffffffffLL || og >= 0xffffffffLL))
      r = cordon_error_set(err, CORDON_ERR_INVALID, 0, "ns state: overlay without its owner");
    impl->outer_uid = (uid_t)ou;
    impl->outer_gid = (gid_t)og;
    const char *sock = json_string_value(json_object_get(o, "socket"));
    if (sock && !(impl->socket_recorded = strdup(sock)))
      r = cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "state");
    for (int i = 0; i < CONFINE_CG_MAX_DIRS && r == 0; i++) {
      json_t *v = json_object_get(o, cgroup_keys[i]);
      const char *dir = json_string_value(v);
      /* The state is untrusted (it sits in the project tree): only this session's own cgroups
       * are ever killed or removed, never a cgroup the state merely names. */
      if ((v && !dir) || (dir && (!ns_cgroup_dir_ok(dir, s->id) ||
                                  (s->state_dir && !cgroup_dir_owned(dir, s->state_dir)))))
        r = cordon_error_set(err, CORDON_ERR_INVALID, 0,
                             "ns state of session %s names a cgroup that is not its own (%s): "
                             "refusing to act on it",
                             s->id, dir ? dir : "not a string");
      else if (dir && !(*cgroup_slot(&impl->cgroups, i) = strdup(dir)))
        r = cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "state");
    }
  }
  json_decref(o);
  return r;
}
