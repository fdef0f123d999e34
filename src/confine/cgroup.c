/* cgroups of a sandbox (see cgroup.h). The pure path arithmetic is in policy.c. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "confine/cgroup.h"
#include "confine/policy.h"

static const char *const v1_names[CONFINE_CG_V1_COUNT] = {"memory", "pids", "cpu"};

void confine_cgroups_clear(struct confine_cgroups *cg) {
  free(cg->v2);
  cg->v2 = NULL;
  for (int i = 0; i < CONFINE_CG_V1_COUNT; i++) {
    free(cg->v1[i]);
    cg->v1[i] = NULL;
  }
}

static int write_file(const char *dir, const char *name, const char *value) {
  _cleanup_free_ char *path = NULL;
  if (asprintf(&path, "%s/%s", dir, name) < 0) {
    errno = ENOMEM;
    return -1;
  }
  _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  size_t len = strlen(value);
  ssize_t n = write(fd, value, len);
  if (n != (ssize_t)len) {
    if (n >= 0)
      errno = EIO;
    return -1;
  }
  return 0;
}

static char *read_small(const char *dir, const char *name) {
  _cleanup_free_ char *path = NULL;
  if (asprintf(&path, "%s/%s", dir, name) < 0)
    return NULL;
  unsigned char *data = NULL;
  size_t len = 0;
  if (fs_read_file(path, 1 << 16, &data, &len, NULL) < 0)
    return NULL;
  return (char *)data;
}

static bool file_exists(const char *dir, const char *name) {
  _cleanup_free_ char *path = NULL;
  if (asprintf(&path, "%s/%s", dir, name) < 0)
    return false;
  return access(path, F_OK) == 0;
}

/* The parent (our own cgroup) and the new cgroup's directory on one hierarchy. */
/* Our own cgroups and the mount table: what hierarchy_dirs() places a sandbox's cgroups by. */
static int read_own_tables(unsigned char **proc_cgroup, unsigned char **mountinfo,
                           struct cordon_error **err) {
  size_t len;
  return fs_read_file("/proc/self/cgroup", 1 << 16, proc_cgroup, &len, err) < 0 ||
                 fs_read_file("/proc/self/mountinfo", 1 << 22, mountinfo, &len, err) < 0
             ? -1
             : 0;
}

/* Whether a v2 cgroup directory is ours to make children in and hand controllers to: owned by
 * us, and holding no process itself (the kernel enables a controller for the children only of
 * a cgroup with no processes of its own). */
static bool v2_delegated_to_us(const char *dir) {
  struct stat st;
  _cleanup_free_ char *procs = read_small(dir, "cgroup.procs");
  return stat(dir, &st) == 0 && st.st_uid == geteuid() && procs && !procs[0] &&
         access(dir, W_OK) == 0;
}

/* The v2 parent of a sandbox's cgroup. The operator's CORDON_CGROUP_ROOT when set (a delegated
 * subtree); else our own cgroup, except that a caller who is not root and sits in a leaf (a
 * cgroup with processes, where no controller can be handed down) takes the nearest ancestor
 * delegated to it (systemd's user@.service with Delegate=yes, or one an administrator made):
 * the user's own delegated slice. NULL on ENOMEM. */
static char *v2_parent_dir(const char *mp, const char *root, const char *own) {
  const char *operator_root = getenv("CORDON_CGROUP_ROOT");
  if (operator_root && *operator_root) {
    /* Beneath the v2 mount, normalised: anything else names no v2 cgroup (no hierarchy). */
    size_t n = strlen(mp);
    if (strncmp(operator_root, mp, n) || operator_root[n] != '/' || strstr(operator_root, "/.") ||
        strstr(operator_root, "//"))
      return NULL;
    return strdup(operator_root);
  }
  char *dir = confine_cgroup_dir(mp, root, own, NULL);
  if (!dir || geteuid() == 0 || v2_delegated_to_us(dir))
    return dir;
  size_t floor = strlen(mp);
  _cleanup_free_ char *up = strdup(dir);
  for (char *slash = up ? strrchr(up, '/') : NULL; slash && (size_t)(slash - up) > floor;
       slash = strrchr(up, '/')) {
    *slash = 0;
    if (v2_delegated_to_us(up)) {
      free(dir);
      return steal_ptr(&up);
    }
  }
  return dir;
}

static int hierarchy_dirs(const char *proc_cgroup, const char *mountinfo, const char *controller,
                          const char *name, char **parent, char **dir) {
  _cleanup_free_ char *mp = NULL, *root = NULL, *own = NULL;
  if (confine_cgroup_find_mount(mountinfo, controller, &mp, &root) < 0 ||
      confine_cgroup_own_path(proc_cgroup, controller, &own) < 0)
    return -1;
  if (!controller) {
    *parent = v2_parent_dir(mp, root, own);
    if (*parent && asprintf(dir, "%s/%s", *parent, name) < 0)
      *dir = NULL;
    if (!*parent || !*dir) {
      free(*parent);
      *parent = NULL;
      return -1;
    }
    return 0;
  }
  *parent = confine_cgroup_dir(mp, root, own, NULL);
  *dir = confine_cgroup_dir(mp, root, own, name);
  if (!*parent || !*dir) {
    free(*parent);
    free(*dir);
    *parent = *dir = NULL;
    return -1;
  }
  return 0;
}

struct limit_plan {
  const char *controller;
  bool wanted;
  const char *what; /* for messages */
};

static int set_v2_limits(const char *dir, const struct cordon_limits *l, uint64_t pids_extra,
                         int which, struct cordon_error **err) {
  char buf[64];
  switch (which) {
  case CONFINE_CG_MEMORY:
    snprintf(buf, sizeof(buf), "%" PRIu64, l->memory_bytes);
    if (write_file(dir, "memory.max", buf) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "%s/memory.max", dir);
    if (file_exists(dir, "memory.swap.max") && write_file(dir, "memory.swap.max", "0") < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "%s/memory.swap.max", dir);
    return 0;
  case CONFINE_CG_PIDS:
    snprintf(buf, sizeof(buf), "%" PRIu64, l->pids + pids_extra);
    if (write_file(dir, "pids.max", buf) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "%s/pids.max", dir);
    return 0;
  default:
    snprintf(buf, sizeof(buf), "%" PRIu64 " %u", confine_cpu_quota_us(l->cpus),
             CONFINE_CPU_PERIOD_US);
    if (write_file(dir, "cpu.max", buf) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "%s/cpu.max", dir);
    return 0;
  }
}

static int set_v1_limits(const char *dir, const struct cordon_limits *l, uint64_t pids_extra,
                         int which, struct cordon_error **err) {
  char buf[64];
  switch (which) {
  case CONFINE_CG_MEMORY:
    snprintf(buf, sizeof(buf), "%" PRIu64, l->memory_bytes);
    if (write_file(dir, "memory.limit_in_bytes", buf) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "%s/memory.limit_in_bytes", dir);
    /* memory+swap too, or the limit leaks into swap */
    if (file_exists(dir, "memory.memsw.limit_in_bytes") &&
        write_file(dir, "memory.memsw.limit_in_bytes", buf) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "%s/memory.memsw.limit_in_bytes", dir);
    return 0;
  case CONFINE_CG_PIDS:
    snprintf(buf, sizeof(buf), "%" PRIu64, l->pids + pids_extra);
    if (write_file(dir, "pids.max", buf) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "%s/pids.max", dir);
    return 0;
  default:
    snprintf(buf, sizeof(buf), "%u", CONFINE_CPU_PERIOD_US);
    if (write_file(dir, "cpu.cfs_period_us", buf) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "%s/cpu.cfs_period_us", dir);
    snprintf(buf, sizeof(buf), "%" PRIu64, confine_cpu_quota_us(l->cpus));
    if (write_file(dir, "cpu.cfs_quota_us", buf) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "%s/cpu.cfs_quota_us", dir);
    return 0;
  }
}

/* Whether the v2 parent hands `controller` to its children, enabling it when it can. */
static bool v2_offers(const char *parent, const char *controller) {
  _cleanup_free_ char *enabled = read_small(parent, "cgroup.subtree_control");
  if (enabled && confine_cgroup_list_has(enabled, controller))
    return true;
  _cleanup_free_ char *available = read_small(parent, "cgroup.controllers");
  if (!available || !confine_cgroup_list_has(available, controller))
    return false;
  char buf[32];
  snprintf(buf, sizeof(buf), "+%s", controller);
  return write_file(parent, "cgroup.subtree_control", buf) == 0;
}

/* How a user who is not root gets limits: one line, appended to the refusal. */
static const char *delegation_hint(void) {
  if (geteuid() == 0)
    return "";
  return "; to allow limits without root, delegate a cgroup v2 subtree with the controllers "
         "enabled to this user (systemd-run --user -p Delegate=yes, or as root: mkdir, chown, "
         "+memory +pids +cpu in its parent's cgroup.subtree_control) and name it in "
         "CORDON_CGROUP_ROOT";
}

int confine_cgroups_create(const char *name, const struct cordon_limits *l, uint64_t pids_extra,
                           uid_t delegate_uid, gid_t delegate_gid, struct confine_cgroups *out,
                           struct cordon_error **err) {
  memset(out, 0, sizeof(*out));
  _cleanup_free_ unsigned char *proc_cgroup = NULL, *mountinfo = NULL;
  if (read_own_tables(&proc_cgroup, &mountinfo, err) < 0)
    return -1;
  const bool wanted[CONFINE_CG_V1_COUNT] = {l->memory_bytes > 0, l->pids > 0, l->cpus > 0};
  static const char *const what[CONFINE_CG_V1_COUNT] = {"memory limit", "pids limit", "cpu limit"};

  _cleanup_free_ char *v2_parent = NULL, *v2_dir = NULL;
  int v2_errno = ENOENT;
  if (hierarchy_dirs((char *)proc_cgroup, (char *)mountinfo, NULL, name, &v2_parent, &v2_dir) ==
      0) {
    if (mkdir(v2_dir, 0755) == 0)
      out->v2 = steal_ptr(&v2_dir);
    else
      v2_errno = errno;
  }
  for (int i = 0; i < CONFINE_CG_V1_COUNT; i++) {
    if (!wanted[i])
      continue;
    if (out->v2 && v2_offers(v2_parent, v1_names[i])) {
      if (set_v2_limits(out->v2, l, pids_extra, i, err) < 0)
        goto fail;
      continue;
    }
    char v2_reason[160];
    if (!v2_parent)
      snprintf(v2_reason, sizeof(v2_reason), "there is no cgroup v2 hierarchy");
    else if (!out->v2)
      snprintf(v2_reason, sizeof(v2_reason), "cgroup v2 %s cannot be created (%s)", name,
               strerror(v2_errno));
    else
      snprintf(v2_reason, sizeof(v2_reason), "cgroup v2 does not offer the %s controller here",
               v1_names[i]);
    _cleanup_free_ char *parent = NULL, *dir = NULL;
    if (hierarchy_dirs((char *)proc_cgroup, (char *)mountinfo, v1_names[i], name, &parent, &dir) <
        0) {
      cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0,
                       "%s cannot be enforced: %s and there is no v1 %s hierarchy%s", what[i],
                       v2_reason, v1_names[i], delegation_hint());
      goto fail;
    }
    if (mkdir(dir, 0755) < 0) {
      cordon_error_set(err, CORDON_ERR_UNAVAILABLE, errno,
                       "%s cannot be enforced: %s and the v1 cgroup %s cannot be created%s",
                       what[i], v2_reason, dir, delegation_hint());
      goto fail;
    }
    out->v1[i] = steal_ptr(&dir);
    if (set_v1_limits(out->v1[i], l, pids_extra, i, err) < 0)
      goto fail;
  }
  if (out->v2 && delegate_uid != geteuid()) {
    static const char *const delegated[] = {"cgroup.procs", "cgroup.threads",
                                            "cgroup.subtree_control"};
    if (chown(out->v2, delegate_uid, delegate_gid) < 0) {
      cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot delegate cgroup %s", out->v2);
      goto fail;
    }
    for (size_t i = 0; i < ARRAY_SIZE(delegated); i++) {
      _cleanup_free_ char *path = NULL;
      if (asprintf(&path, "%s/%s", out->v2, delegated[i]) < 0 ||
          (chown(path, delegate_uid, delegate_gid) < 0 && errno != ENOENT)) {
        cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot delegate cgroup %s", out->v2);
        goto fail;
      }
    }
  }
  return 0;
fail:
  confine_cgroups_remove(out, NULL);
  confine_cgroups_clear(out);
  return -1;
}

int confine_cgroups_open_v1_procs(const struct confine_cgroups *cg, int fds[CONFINE_CG_MAX_DIRS],
                                  int *memory_fd, struct cordon_error **err) {
  const char *dirs[CONFINE_CG_MAX_DIRS] = {NULL, cg->v1[0], cg->v1[1], cg->v1[2]};
  int n = 0;
  for (int i = 0; i < CONFINE_CG_MAX_DIRS; i++)
    fds[i] = -1;
  if (memory_fd)
    *memory_fd = -1;
  for (int i = 0; i < CONFINE_CG_MAX_DIRS; i++) {
    if (!dirs[i])
      continue;
    bool apart = memory_fd && i == 1 + CONFINE_CG_MEMORY;
    _cleanup_free_ char *path = NULL;
    if (asprintf(&path, "%s/cgroup.procs", dirs[i]) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "cgroup");
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
      int e = errno;
      for (int k = 0; k < n; k++) {
        close(fds[k]);
        fds[k] = -1;
      }
      if (memory_fd && *memory_fd >= 0) {
        close(*memory_fd);
        *memory_fd = -1;
      }
      return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "cannot open %s", path);
    }
    if (apart)
      *memory_fd = fd;
    else
      fds[n++] = fd;
  }
  return 0;
}

int confine_cgroups_join_fds(const int fds[CONFINE_CG_MAX_DIRS], pid_t pid) {
  char buf[24];
  int len = snprintf(buf, sizeof(buf), "%d", (int)pid);
  for (int i = 0; i < CONFINE_CG_MAX_DIRS; i++) {
    if (fds[i] < 0)
      continue;
    ssize_t n;
    do
      n = write(fds[i], buf, (size_t)len);
    while (n < 0 && errno == EINTR);
    if (n < 0)
      return -errno;
  }
  return 0;
}

static bool populated(int events_fd) {
  char buf[256];
  ssize_t n = pread(events_fd, buf, sizeof(buf) - 1, 0);
  if (n <= 0)
    return false;
  buf[n] = 0;
  const char *p = strstr(buf, "populated ");
  return p && p[strlen("populated ")] == '1';
}

/* Flat-keyed cgroup files (memory.events, memory.oom_control) hold a few dozen short lines;
 * the bound only guards against reading something that is not one. */
#define CGROUP_KEYED_MAX (1 << 16)

int confine_cgroup_read_key(const char *dir, const char *file, const char *key, uint64_t *value) {
  _cleanup_free_ char *path = NULL;
  if (asprintf(&path, "%s/%s", dir, file) < 0)
    return -1;
  _cleanup_free_ unsigned char *text = NULL;
  size_t length = 0;
  if (fs_read_file(path, CGROUP_KEYED_MAX, &text, &length, NULL) < 0)
    return -1;
  size_t klen = strlen(key);
  for (const char *line = (const char *)text; line && *line;
       line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
    if (strncmp(line, key, klen) == 0 && line[klen] == ' ') {
      *value = strtoull(line + klen + 1, NULL, 10);
      return 0;
    }
  return -1;
}

uint64_t confine_cgroups_oom_kills(const struct confine_cgroups *cg) {
  uint64_t kills = 0;
  if (cg->v1[CONFINE_CG_MEMORY])
    confine_cgroup_read_key(cg->v1[CONFINE_CG_MEMORY], "memory.oom_control", "oom_kill", &kills);
  else if (cg->v2)
    confine_cgroup_read_key(cg->v2, "memory.events", "oom_kill", &kills);
  return kills;
}

bool confine_cgroup_populated(int dirfd) {
  _cleanup_close_ int efd = openat(dirfd, "cgroup.events", O_RDONLY | O_CLOEXEC);
  return efd < 0 || populated(efd);
}

void confine_cgroup_kill_fd(int dirfd, double seconds) {
  int kfd = openat(dirfd, "cgroup.kill", O_WRONLY | O_CLOEXEC);
  if (kfd >= 0) {
    (void)!write(kfd, "1", 1);
    close(kfd);
  }
  _cleanup_close_ int efd = openat(dirfd, "cgroup.events", O_RDONLY | O_CLOEXEC);
  if (efd < 0)
    return;
  double until = fs_now() + seconds;
  while (populated(efd) && fs_now() < until) {
    struct pollfd pfd = {.fd = efd, .events = POLLPRI};
    poll(&pfd, 1, 10);
  }
}

static void kill_v1(const char *dir) {
  _cleanup_free_ char *procs = read_small(dir, "cgroup.procs");
  for (char *p = procs; p && *p;) {
    char *end = NULL;
    long pid = strtol(p, &end, 10);
    if (end == p)
      break;
    if (pid > 0)
      kill((pid_t)pid, SIGKILL);
    p = end;
  }
}

void confine_cgroups_kill(const struct confine_cgroups *cg) {
  if (cg->v2) {
    _cleanup_close_ int fd = open(cg->v2, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0)
      confine_cgroup_kill_fd(fd, 1.0);
  }
  for (int i = 0; i < CONFINE_CG_V1_COUNT; i++)
    if (cg->v1[i])
      kill_v1(cg->v1[i]);
}

/* rmdir, retrying while exiting processes keep it busy. */
static int remove_dir(const char *dir, bool v2, struct cordon_error **err) {
  /* Leaves first (the holder makes one per exec under the v2 cgroup). */
  if (v2) {
    _cleanup_closedir_ DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d))) {
      if (de->d_type != DT_DIR || de->d_name[0] == '.')
        continue;
      _cleanup_free_ char *sub = NULL;
      if (asprintf(&sub, "%s/%s", dir, de->d_name) >= 0)
        remove_dir(sub, true, NULL);
    }
  }
  for (int attempt = 0; attempt < 200; attempt++) {
    if (rmdir(dir) == 0 || errno == ENOENT)
      return 0;
    if (errno != EBUSY)
      break;
    if (v2) {
      _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (fd >= 0)
        confine_cgroup_kill_fd(fd, 0.05);
    } else {
      kill_v1(dir);
      poll(NULL, 0, 5);
    }
  }
  return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot remove cgroup %s", dir);
}

int confine_cgroups_remove(const struct confine_cgroups *cg, struct cordon_error **err) {
  int r = 0;
  if (cg->v2 && remove_dir(cg->v2, true, err) < 0)
    r = -1;
  for (int i = 0; i < CONFINE_CG_V1_COUNT; i++)
    if (cg->v1[i] && remove_dir(cg->v1[i], false, r < 0 ? NULL : err) < 0)
      r = -1;
  return r;
}

/* ---- owners and the sweep ------------------------------------------------------------------ */

#define OWNER_XATTR "user.cordon.owner"

void confine_cgroups_set_owner(const struct confine_cgroups *cg, const char *owner) {
  const char *dirs[CONFINE_CG_MAX_DIRS] = {cg->v2, cg->v1[0], cg->v1[1], cg->v1[2]};
  for (int i = 0; i < CONFINE_CG_MAX_DIRS; i++)
    if (dirs[i])
      (void)setxattr(dirs[i], OWNER_XATTR, owner, strlen(owner), 0);
}

/* No process in dir: v2 says so in cgroup.events (descendants included); a v1 cgroup of ours
 * has no children, and an empty cgroup.procs. */
static bool holds_no_process(const char *dir, bool v2) {
  _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0)
    return false;
  if (v2)
    return !confine_cgroup_populated(dfd);
  _cleanup_close_ int procs = openat(dfd, "cgroup.procs", O_RDONLY | O_CLOEXEC);
  char c;
  return procs >= 0 && read(procs, &c, 1) == 0;
}

static int orphan_add(struct confine_cgroup_orphan **found, size_t *count, const char *dir,
                      const char *owner) {
  struct confine_cgroup_orphan *grown = realloc(*found, (*count + 1) * sizeof(*grown));
  if (!grown)
    return -1;
  *found = grown;
  struct confine_cgroup_orphan *o = &grown[*count];
  *o = (struct confine_cgroup_orphan){.dir = strdup(dir), .owner = strdup(owner)};
  if (!o->dir || !o->owner) {
    free(o->dir);
    free(o->owner);
    return -1;
  }
  (*count)++;
  return 0;
}

/* The sweep of one parent directory. */
static int sweep_parent(const char *parent, bool v2, const char *prefix, bool dry_run,
                        struct confine_cgroup_orphan **found, size_t *count) {
  _cleanup_closedir_ DIR *d = opendir(parent);
  if (!d)
    return 0;
  struct dirent *de;
  while ((de = readdir(d))) {
    if (de->d_type != DT_DIR || strncmp(de->d_name, prefix, strlen(prefix)) != 0)
      continue;
    _cleanup_free_ char *dir = NULL;
    if (asprintf(&dir, "%s/%s", parent, de->d_name) < 0)
      return -1;
    char owner[4096];
    ssize_t n = getxattr(dir, OWNER_XATTR, owner, sizeof(owner) - 1);
    if (n <= 0 || owner[0] != '/')
      continue; /* not labelled: not ours to judge */
    owner[n] = 0;
    struct stat st;
    if (lstat(owner, &st) == 0 || errno != ENOENT || !holds_no_process(dir, v2))
      continue;
    if (orphan_add(found, count, dir, owner) < 0)
      return -1;
    struct cordon_error *e = NULL;
    if (!dry_run && remove_dir(dir, v2, &e) < 0) {
      (*found)[*count - 1].error = strdup(e && e->message ? e->message : "cannot remove it");
      cordon_error_free(e);
    }
  }
  return 0;
}

int confine_cgroups_sweep(const char *prefix, bool dry_run, struct confine_cgroup_orphan **found,
                          size_t *count, struct cordon_error **err) {
  *found = NULL;
  *count = 0;
  _cleanup_free_ unsigned char *proc_cgroup = NULL, *mountinfo = NULL;
  if (read_own_tables(&proc_cgroup, &mountinfo, err) < 0)
    return -1;
  for (int i = -1; i < CONFINE_CG_V1_COUNT; i++) {
    _cleanup_free_ char *parent = NULL, *dir = NULL;
    if (hierarchy_dirs((char *)proc_cgroup, (char *)mountinfo, i < 0 ? NULL : v1_names[i], prefix,
                       &parent, &dir) < 0)
      continue;
    if (sweep_parent(parent, i < 0, prefix, dry_run, found, count) < 0) {
      confine_cgroup_orphans_free(*found, *count);
      *found = NULL;
      *count = 0;
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "cgroup sweep");
    }
  }
  return 0;
}

void confine_cgroup_orphans_free(struct confine_cgroup_orphan *found, size_t count) {
  for (size_t i = 0; found && i < count; i++) {
    free(found[i].dir);
    free(found[i].owner);
    free(found[i].error);
  }
  free(found);
}

int confine_cgroup_move_to_parent(const char *dir, pid_t pid) {
  _cleanup_free_ char *parent = strdup(dir);
  char *slash = parent ? strrchr(parent, '/') : NULL;
  if (!slash || slash == parent) {
    errno = parent ? EINVAL : ENOMEM;
    return -1;
  }
  *slash = 0;
  char buf[32];
  snprintf(buf, sizeof(buf), "%d", (int)pid);
  return write_file(parent, "cgroup.procs", buf);
}
