/* The holder's configuration as bytes: JSON in a memfd, for the spawner a caller with threads
 * execs afresh (holder.c). The fds stay at their numbers across the exec; only their numbers
 * travel here. */
#include <errno.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "backends/ns/config.h"
#include "base/cleanup.h"
#include "base/clone-run.h"
#include "base/fs.h"
#include "base/syscalls.h"
#include "crypto/digest.h"

/* ---- save ------------------------------------------------------------------------------------ */

static json_t *string_or_null(const char *s) {
  return s ? json_string(s) : json_null();
}

static json_t *strv_json(const char *const *v) {
  if (!v)
    return json_null();
  json_t *a = json_array();
  for (size_t i = 0; a && v[i]; i++)
    if (json_array_append_new(a, json_string(v[i])) < 0) {
      json_decref(a);
      return NULL;
    }
  return a;
}

static json_t *tree_json(const struct confine_tree *t) {
  return json_pack("{s:o, s:o, s:o, s:i, s:b, s:b}", "target", string_or_null(t->target), "source",
                   string_or_null(t->source), "link", string_or_null(t->link), "tree_fd",
                   t->tree_fd, "is_dir", t->is_dir, "writable", t->writable);
}

static json_t *trees_json(const struct confine_tree *t, size_t n) {
  json_t *a = json_array();
  for (size_t i = 0; a && i < n; i++)
    if (json_array_append_new(a, tree_json(&t[i])) < 0) {
      json_decref(a);
      return NULL;
    }
  return a;
}

static json_t *root_json(const struct confine_root_spec *r) {
  return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:b, s:I, s:o, s:o, s:b, s:o}",
                   "staging", string_or_null(r->staging), "trees", trees_json(r->trees, r->n_trees),
                   "workspace", tree_json(&r->workspace), "ro_paths", strv_json(r->ro_paths),
                   "hidden_dirs", strv_json(r->hidden_dirs), "hidden_files",
                   strv_json(r->hidden_files), "hidden_host_dirs", strv_json(r->hidden_host_dirs),
                   "passwd", string_or_null(r->passwd), "group", string_or_null(r->group),
                   "deny_user_namespaces", r->deny_user_namespaces, "tmp_bytes",
                   (json_int_t)r->tmp_bytes, "volumes", trees_json(r->volumes, r->n_volumes),
                   "home", tree_json(&r->home), "workspace_read_only", r->workspace_read_only,
                   "devices", trees_json(r->devices, r->n_devices));
}

static json_t *auth_json(const struct crypto_hmac *auth) {
  if (!auth)
    return json_null();
  size_t n = crypto_hmac_state_length();
  _cleanup_free_ uint8_t *state = malloc(n);
  _cleanup_free_ char *hex = malloc(2 * n + 1);
  if (!state || !hex)
    return NULL;
  crypto_hmac_state(auth, state);
  crypto_hex_encode(state, n, hex);
  json_t *j = json_string(hex);
  explicit_bzero(state, n);
  explicit_bzero(hex, 2 * n);
  return j;
}

int ns_holder_config_save(const struct ns_holder_config *cfg, int fd, struct cordon_error **err) {
  json_t *joins = json_array();
  for (int i = 0; joins && i < CONFINE_CG_MAX_DIRS; i++)
    if (json_array_append_new(joins, json_integer(cfg->cgroup_join_fds[i])) < 0) {
      json_decref(joins);
      joins = NULL;
    }
  _cleanup_(json_decrefp) json_t *j = json_pack(
      "{s:o, s:{s:I, s:I, s:b}, s:I, s:I, s:b, s:{s:I, s:I}, s:b, s:b, s:i, s:i, s:o, s:i, "
      "s:b, s:o, s:I, s:i, s:I, s:i}",
      "root", root_json(&cfg->root), "identity", "uid", (json_int_t)cfg->identity.uid, "gid",
      (json_int_t)cfg->identity.gid, "can_setgroups", cfg->identity.can_setgroups, "outer_uid",
      (json_int_t)cfg->outer_uid, "outer_gid", (json_int_t)cfg->outer_gid, "rootless",
      cfg->rootless, "rlimits", "nofile", (json_int_t)cfg->rlimits.nofile, "fsize",
      (json_int_t)cfg->rlimits.fsize, "new_network", cfg->new_network, "loopback", cfg->loopback,
      "listen_fd", cfg->listen_fd, "cgroup_fd", cfg->cgroup_fd, "cgroup_join_fds", joins,
      "memory_join_fd", cfg->memory_join_fd, "oom_shield", cfg->oom_shield, "auth",
      auth_json(cfg->auth), "client_uid", (json_int_t)cfg->client_uid, "socket_file_fd",
      cfg->socket_file_fd, "cpus_visible", (json_int_t)cfg->cpus_visible, "egress_fd",
      cfg->egress_fd);
  _cleanup_free_ char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
  if (!text)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "the sandbox's configuration");
  int r = fs_write_all(fd, text, strlen(text));
  explicit_bzero(text, strlen(text)); /* the session's key state */
  if (r < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno,
                            "cannot write the sandbox's configuration");
  return 0;
}

/* ---- load ------------------------------------------------------------------------------------ */

struct loader {
  bool bad;
};

static char *take_string(struct loader *l, json_t *v) {
  if (json_is_null(v))
    return NULL;
  const char *s = json_string_value(v);
  char *copy = s ? strdup(s) : NULL;
  if (!copy)
    l->bad = true;
  return copy;
}

/* An fd's number, or -1 for none. */
static int take_fd(struct loader *l, json_int_t v) {
  bool ok = v >= -1 && v <= INT32_MAX;
  l->bad |= !ok;
  return ok ? (int)v : -1;
}

static uint32_t take_id(struct loader *l, json_int_t v) {
  bool ok = v >= 0 && v <= UINT32_MAX;
  l->bad |= !ok;
  return ok ? (uint32_t)v : 0;
}

static const char *const *take_strv(struct loader *l, json_t *v) {
  if (json_is_null(v))
    return NULL;
  size_t n = json_array_size(v);
  char **out = json_is_array(v) ? calloc(n + 1, sizeof(*out)) : NULL;
  if (!out) {
    l->bad = true;
    return NULL;
  }
  /* Up to the first bad entry: the list stays NULL-terminated, with nothing beyond. */
  for (size_t i = 0; i < n && !l->bad; i++)
    if (!json_is_string(json_array_get(v, i)) || !(out[i] = take_string(l, json_array_get(v, i))))
      l->bad = true;
  return (const char *const *)out;
}

static void take_tree(struct loader *l, json_t *v, struct confine_tree *t) {
  json_t *target, *source, *link;
  json_int_t fd;
  int is_dir, writable;
  if (json_unpack(v, "{s:o, s:o, s:o, s:I, s:b, s:b !}", "target", &target, "source", &source,
                  "link", &link, "tree_fd", &fd, "is_dir", &is_dir, "writable", &writable) < 0) {
    l->bad = true;
    *t = (struct confine_tree){.tree_fd = -1};
    return;
  }
  *t = (struct confine_tree){.target = take_string(l, target),
                             .source = take_string(l, source),
                             .link = take_string(l, link),
                             .tree_fd = take_fd(l, fd),
                             .is_dir = is_dir,
                             .writable = writable};
}

static struct confine_tree *take_trees(struct loader *l, json_t *v, size_t *n) {
  *n = 0;
  size_t count = json_array_size(v);
  if (!json_is_array(v) || count == 0) {
    l->bad |= !json_is_array(v);
    return NULL;
  }
  struct confine_tree *t = calloc(count, sizeof(*t));
  if (!t) {
    l->bad = true;
    return NULL;
  }
  for (size_t i = 0; i < count; i++)
    take_tree(l, json_array_get(v, i), &t[i]);
  *n = count;
  return t;
}

static struct crypto_hmac *take_auth(struct loader *l, json_t *v) {
  if (json_is_null(v))
    return NULL;
  size_t n = crypto_hmac_state_length();
  const char *hex = json_string_value(v);
  _cleanup_free_ uint8_t *state = malloc(n);
  struct crypto_hmac *h = NULL;
  if (!hex || !state || strlen(hex) != 2 * n || crypto_hex_decode(hex, 2 * n, state, n) < 0 ||
      crypto_hmac_from_state(state, n, &h, NULL) < 0)
    l->bad = true;
  if (state)
    explicit_bzero(state, n);
  return h;
}

static void take_root(struct loader *l, json_t *v, struct confine_root_spec *r) {
  json_t *staging, *trees, *workspace, *ro, *hdirs, *hfiles, *hhost, *passwd, *group, *volumes,
      *home, *devices;
  int deny_userns, ws_ro;
  json_int_t tmp_bytes;
  if (json_unpack(v,
                  "{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:b, s:I, s:o, s:o, s:b, s:o !}",
                  "staging", &staging, "trees", &trees, "workspace", &workspace, "ro_paths", &ro,
                  "hidden_dirs", &hdirs, "hidden_files", &hfiles, "hidden_host_dirs", &hhost,
                  "passwd", &passwd, "group", &group, "deny_user_namespaces", &deny_userns,
                  "tmp_bytes", &tmp_bytes, "volumes", &volumes, "home", &home,
                  "workspace_read_only", &ws_ro, "devices", &devices) < 0 ||
      tmp_bytes < 0) {
    l->bad = true;
    return;
  }
  r->staging = take_string(l, staging);
  r->trees = take_trees(l, trees, &r->n_trees);
  take_tree(l, workspace, &r->workspace);
  r->ro_paths = take_strv(l, ro);
  r->hidden_dirs = take_strv(l, hdirs);
  r->hidden_files = take_strv(l, hfiles);
  r->hidden_host_dirs = take_strv(l, hhost);
  r->passwd = take_string(l, passwd);
  r->group = take_string(l, group);
  r->deny_user_namespaces = deny_userns;
  r->tmp_bytes = (uint64_t)tmp_bytes;
  r->volumes = take_trees(l, volumes, &r->n_volumes);
  take_tree(l, home, &r->home);
  r->workspace_read_only = ws_ro;
  r->devices = take_trees(l, devices, &r->n_devices);
}

static void free_strv(const char *const *v) {
  for (size_t i = 0; v && v[i]; i++)
    free((char *)v[i]);
  free((void *)v);
}

static void free_tree(struct confine_tree *t) {
  free((char *)t->target);
  free((char *)t->source);
  free((char *)t->link);
}

static void free_trees(struct confine_tree *t, size_t n) {
  for (size_t i = 0; t && i < n; i++)
    free_tree(&t[i]);
  free(t);
}

void ns_holder_config_free(struct ns_holder_config *cfg) {
  if (!cfg)
    return;
  struct confine_root_spec *r = &cfg->root;
  free((char *)r->staging);
  free_trees(r->trees, r->n_trees);
  free_tree(&r->workspace);
  free_strv(r->ro_paths);
  free_strv(r->hidden_dirs);
  free_strv(r->hidden_files);
  free_strv(r->hidden_host_dirs);
  free((char *)r->passwd);
  free((char *)r->group);
  free_trees(r->volumes, r->n_volumes);
  free_tree(&r->home);
  free_trees(r->devices, r->n_devices);
  crypto_hmac_free(cfg->auth);
  free(cfg);
}

static void ns_holder_config_freep(struct ns_holder_config **cfg) {
  ns_holder_config_free(*cfg);
}

int ns_holder_config_load(int fd, struct ns_holder_config **out, struct cordon_error **err) {
  *out = NULL;
  /* Whole, then parsed: json_loadfd reads one byte per system call. */
  _cleanup_free_ unsigned char *text = NULL;
  size_t length = 0;
  if (fs_read_fd(fd, 1 << 24, &text, &length, err) < 0)
    return cordon_error_prefix(err, "the sandbox's configuration");
  json_error_t jerr;
  _cleanup_(json_decrefp) json_t *j =
      json_loadb((const char *)text, length, JSON_REJECT_DUPLICATES, &jerr);
  explicit_bzero(text, length); /* the session's key state */
  _cleanup_(ns_holder_config_freep) struct ns_holder_config *cfg = calloc(1, sizeof(*cfg));
  if (!cfg)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "the sandbox's configuration");
  json_t *root, *joins, *auth;
  json_int_t uid, gid, outer_uid, outer_gid, nofile, fsize, listen_fd, cgroup_fd, memory_join_fd,
      client_uid, socket_file_fd, cpus, egress_fd;
  int can_setgroups, rootless, new_network, loopback, oom_shield;
  struct loader l = {0};
  if (!j ||
      json_unpack(j,
                  "{s:o, s:{s:I, s:I, s:b !}, s:I, s:I, s:b, s:{s:I, s:I !}, s:b, s:b, s:I, s:I, "
                  "s:o, s:I, s:b, s:o, s:I, s:I, s:I, s:I !}",
                  "root", &root, "identity", "uid", &uid, "gid", &gid, "can_setgroups",
                  &can_setgroups, "outer_uid", &outer_uid, "outer_gid", &outer_gid, "rootless",
                  &rootless, "rlimits", "nofile", &nofile, "fsize", &fsize, "new_network",
                  &new_network, "loopback", &loopback, "listen_fd", &listen_fd, "cgroup_fd",
                  &cgroup_fd, "cgroup_join_fds", &joins, "memory_join_fd", &memory_join_fd,
                  "oom_shield", &oom_shield, "auth", &auth, "client_uid", &client_uid,
                  "socket_file_fd", &socket_file_fd, "cpus_visible", &cpus, "egress_fd",
                  &egress_fd) < 0 ||
      json_array_size(joins) != CONFINE_CG_MAX_DIRS || nofile < 0 || fsize < 0 || cpus < 0 ||
      cpus > UINT32_MAX)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                            "the sandbox's configuration handed over is malformed");
  take_root(&l, root, &cfg->root);
  cfg->identity = (struct confine_identity){
      .uid = take_id(&l, uid), .gid = take_id(&l, gid), .can_setgroups = can_setgroups};
  cfg->outer_uid = take_id(&l, outer_uid);
  cfg->outer_gid = take_id(&l, outer_gid);
  cfg->rootless = rootless;
  cfg->rlimits = (struct confine_rlimits){.nofile = (uint64_t)nofile, .fsize = (uint64_t)fsize};
  cfg->new_network = new_network;
  cfg->loopback = loopback;
  cfg->listen_fd = take_fd(&l, listen_fd);
  cfg->cgroup_fd = take_fd(&l, cgroup_fd);
  for (int i = 0; i < CONFINE_CG_MAX_DIRS; i++) {
    json_t *v = json_array_get(joins, (size_t)i);
    l.bad |= !json_is_integer(v);
    cfg->cgroup_join_fds[i] = take_fd(&l, json_integer_value(v));
  }
  cfg->memory_join_fd = take_fd(&l, memory_join_fd);
  cfg->oom_shield = oom_shield;
  cfg->auth = take_auth(&l, auth);
  cfg->client_uid = take_id(&l, client_uid);
  cfg->socket_file_fd = take_fd(&l, socket_file_fd);
  cfg->cpus_visible = (unsigned)cpus;
  cfg->egress_fd = take_fd(&l, egress_fd);
  if (l.bad)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                            "the sandbox's configuration handed over is malformed");
  *out = steal_ptr(&cfg);
  return 0;
}

/* ---- its fds --------------------------------------------------------------------------------- */

static size_t add_fd(int *fds, size_t n, int fd) {
  if (fd >= 0 && fds)
    fds[n] = fd;
  return fd >= 0 ? n + 1 : n;
}

static size_t add_tree_fds(int *fds, size_t n, const struct confine_tree *t, size_t count) {
  for (size_t i = 0; t && i < count; i++)
    n = add_fd(fds, n, t[i].tree_fd);
  return n;
}

size_t ns_holder_config_fds(const struct ns_holder_config *cfg, int *fds) {
  const struct confine_root_spec *r = &cfg->root;
  size_t n = 0;
  n = add_tree_fds(fds, n, r->trees, r->n_trees);
  n = add_tree_fds(fds, n, &r->workspace, 1);
  n = add_tree_fds(fds, n, r->volumes, r->n_volumes);
  n = add_tree_fds(fds, n, &r->home, 1);
  n = add_tree_fds(fds, n, r->devices, r->n_devices);
  n = add_fd(fds, n, cfg->listen_fd);
  n = add_fd(fds, n, cfg->cgroup_fd);
  for (int i = 0; i < CONFINE_CG_MAX_DIRS; i++)
    n = add_fd(fds, n, cfg->cgroup_join_fds[i]);
  n = add_fd(fds, n, cfg->memory_join_fd);
  n = add_fd(fds, n, cfg->socket_file_fd);
  n = add_fd(fds, n, cfg->egress_fd);
  return n;
}

/* ---- across an exec ------------------------------------------------------------------------ */

#define CONFIG_EXEC_MAX_EXTRA 8

/* What the child execs: argv, and the fds it keeps. */
struct exec_plan {
  char *const *argv;
  const int *fds;
  size_t count;
};

/* The child, between its clone and its exec, sharing our memory (CLONE_VM | CLONE_VFORK) or a
 * fork's copy of it: async-signal-safe calls only, and nothing of ours written but errno.
 * Every fd but the listed ones closes at the exec (its own fd table); the listed ones stay at
 * their numbers. Not instrumented by ASan: it runs on a stack of its own and its _exit would
 * look like a jump off an unknown stack. */
__attribute__((no_sanitize_address)) static int exec_fresh(void *arg) {
  const struct exec_plan *plan = arg;
  bool ready = sys_close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) == 0;
  for (size_t i = 0; ready && i < plan->count; i++)
    ready = fcntl(plan->fds[i], F_SETFD, 0) == 0;
  if (ready) {
    extern char **environ;
    execve("/proc/self/exe", plan->argv, environ);
  }
  _exit(NS_CONFIG_EXEC_FAILED);
}

pid_t ns_holder_config_exec(const struct ns_holder_config *cfg, const char *flag, const int *extra,
                            size_t n_extra, struct cordon_error **err) {
  if (n_extra > CONFIG_EXEC_MAX_EXTRA)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, EINVAL, "too many fds to hand over");
  _cleanup_close_ int memfd = memfd_create("cordon-holder-config", MFD_CLOEXEC);
  if (memfd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "memfd_create");
  if (ns_holder_config_save(cfg, memfd, err) < 0)
    return -1;
  if (lseek(memfd, 0, SEEK_SET) < 0) /* the new image reads it from its offset, shared */
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "lseek");
  /* Built before the clone: the child allocates nothing. */
  _cleanup_free_ int *fds = calloc(ns_holder_config_fds(cfg, NULL) + n_extra + 1, sizeof(*fds));
  if (!fds)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "the sandbox's configuration");
  char numbers[16 * (CONFIG_EXEC_MAX_EXTRA + 1)];
  size_t used = 0;
  for (size_t i = 0; i < n_extra; i++)
    used += (size_t)snprintf(numbers + used, sizeof(numbers) - used, "%d,", extra[i]);
  snprintf(numbers + used, sizeof(numbers) - used, "%d", memfd);
  size_t n = ns_holder_config_fds(cfg, fds);
  for (size_t i = 0; i < n_extra; i++)
    fds[n++] = extra[i];
  fds[n++] = memfd;
  char *argv[] = {"cordon-holder-spawner", (char *)flag, numbers, NULL};
  struct exec_plan plan = {.argv = argv, .fds = fds, .count = n};
  /* A vfork: no page tables copied and no copy-on-write faults afterwards (a threaded caller
   * such as the server holds many pages). */
  pid_t pid = sys_vfork_run(exec_fresh, &plan);
  if (pid < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot start the sandbox spawner");
  return pid;
}

/* fd is open above stdio, of the given S_IF* type. */
static bool fd_of_type(int fd, mode_t type) {
  struct stat st;
  return fd >= 3 && fstat(fd, &st) == 0 && (st.st_mode & S_IFMT) == type;
}

int ns_holder_config_from_argv(char **argv, int *extra, size_t n_extra,
                               struct ns_holder_config **cfg, struct cordon_error **err) {
  const char *p = argv[2];
  int memfd = -1;
  bool sound = n_extra <= CONFIG_EXEC_MAX_EXTRA;
  for (size_t i = 0; sound && i <= n_extra; i++) {
    char *end;
    errno = 0;
    long v = strtol(p, &end, 10);
    sound =
        errno == 0 && end != p && v >= 3 && v <= INT32_MAX && *end == (i == n_extra ? '\0' : ',');
    if (!sound)
      break;
    if (i < n_extra)
      extra[i] = (int)v;
    else
      memfd = (int)v;
    p = end + 1;
  }
  for (size_t i = 0; sound && i < n_extra; i++)
    sound = fd_of_type(extra[i], S_IFIFO);
  if (!sound || !fd_of_type(memfd, S_IFREG))
    return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                            "%s is cordon's own: it is not meant to be run by hand", argv[1]);
  int r = ns_holder_config_load(memfd, cfg, err);
  close(memfd);
  return r;
}
