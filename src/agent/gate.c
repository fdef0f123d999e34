/* The accuracy gate's effects (gate.h): looking at protected paths through an fd anchored at
 * the project (never following a symlink), snapshotting directories, and diffing what changed.
 * The baseline's file form lives in gate-format.c. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cordon/snapshot.h>

#include "agent/gate.h"
#include "base/anchor.h"
#include "base/cleanup.h"
#include "base/fs.h"
#include "snapshot/manifest.h"
#include "store/hash.h"

/* The read buffer of hash_fd. */
#define HASH_BUFFER (1 << 16)

static void gate_path_clear(struct agent_gate_path *p) {
  free(p->path);
  free(p->target);
  p->path = p->target = NULL;
}

void agent_gate_baseline_free(struct agent_gate_baseline *baseline) {
  if (!baseline)
    return;
  for (size_t i = 0; i < baseline->count; i++)
    gate_path_clear(&baseline->paths[i]);
  free(baseline->paths);
  free(baseline);
}

void agent_gate_report_free(struct agent_gate_report *report) {
  if (!report)
    return;
  for (size_t i = 0; i < report->count; i++)
    free(report->changes[i].path);
  free(report->changes);
  free(report);
}

const char *agent_gate_change_kind_name(enum agent_gate_change_kind kind) {
  switch (kind) {
  case AGENT_GATE_CHANGED: return "changed";
  case AGENT_GATE_ADDED: return "added";
  case AGENT_GATE_REMOVED: return "removed";
  }
  return "changed";
}

static int hash_fd(int fd, char out[65], struct cordon_error **err, const char *label) {
  struct cas_hasher h = {0};
  if (cas_hasher_init(&h) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "hashing %s", label);
  /* On the heap, not a static __thread array: the loader zeroes every thread-local byte at
   * every process start, `cordon run` included. */
  _cleanup_free_ char *buf = malloc(HASH_BUFFER);
  if (!buf) {
    cas_hasher_free(&h);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "hashing %s", label);
  }
  for (;;) {
    ssize_t n = read(fd, buf, HASH_BUFFER);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      int e = errno;
      cas_hasher_free(&h);
      return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "reading %s", label);
    }
    if (n == 0)
      break;
    cas_hasher_update(&h, buf, (size_t)n);
  }
  unsigned char digest[CAS_DIGEST_LEN];
  cas_hasher_final(&h, digest);
  cas_hasher_free(&h);
  cas_hex(digest, out);
  return 0;
}

/* A directory by its snapshot id. The walk reads every file (no stat cache): the agent could
 * have written a file and restored its timestamps. */
static int look_directory(struct cordon_cas *cas, int dirfd, const char *label, char id[65],
                          struct cordon_error **err) {
  char proc_path[64];
  snprintf(proc_path, sizeof(proc_path), "/proc/self/fd/%d", dirfd);
  struct cordon_snapshot_options options = {.no_stat_cache = true,
                                            .max_bytes = CORDON_SNAPSHOT_UNLIMITED};
  if (cordon_snapshot_take(cas, proc_path, &options, id, NULL, err) < 0)
    return cordon_error_prefix(err, "protected path %s", label);
  return 0;
}

/* Does a directory on the way to path (not path itself) exist as a symlink? Tells "absent"
 * from "reached through a symlink" when the anchored open fails with ENOENT or ENOTDIR. */
static bool passes_symlink(int rootfd, const char *path) {
  _cleanup_free_ char *prefix = strdup(path);
  for (char *slash = prefix ? strchr(prefix, '/') : NULL; slash; slash = strchr(slash + 1, '/')) {
    *slash = 0;
    struct stat st;
    if (fstatat(rootfd, prefix, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
      return true;
    *slash = '/';
  }
  return false;
}

/* What one protected path holds now. */
static int look(struct cordon_cas *cas, int rootfd, const char *path, struct agent_gate_path *out,
                struct cordon_error **err) {
  const char *label = *path ? path : ".";
  memset(out, 0, sizeof(*out));
  if (!(out->path = strdup(path)))
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "gate");
  _cleanup_close_ int parent = -1;
  const char *name = ".";
  struct stat st;
  if (*path) {
    parent = anchor_open_parent(rootfd, path, &name);
    if (parent < 0 && (errno == ENOENT || errno == ENOTDIR) && passes_symlink(rootfd, path))
      errno = ELOOP;
    if (parent < 0 && (errno == ENOENT || errno == ENOTDIR)) {
      out->kind = AGENT_GATE_ABSENT;
      return 0;
    }
    if (parent < 0)
      return cordon_error_set(err, errno == ELOOP ? CORDON_ERR_DENIED : CORDON_ERR_SYSTEM, errno,
                              "protected path %s: its directory %s", label,
                              errno == ELOOP ? "passes through a symlink" : "cannot be opened");
  }
  int at = *path ? parent : rootfd;
  if (fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
    if (errno == ENOENT || errno == ENOTDIR) {
      out->kind = AGENT_GATE_ABSENT;
      return 0;
    }
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "protected path %s", label);
  }
  out->mode = st.st_mode & 07777;
  if (S_ISLNK(st.st_mode)) {
    out->kind = AGENT_GATE_SYMLINK;
    char target[4096];
    ssize_t n = readlinkat(at, name, target, sizeof(target) - 1);
    if (n < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "protected path %s", label);
    target[n] = 0;
    out->mode = 0;
    if (!(out->target = strdup(target)))
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "gate");
    return 0;
  }
  if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
    out->kind = AGENT_GATE_SPECIAL;
    out->special = S_ISFIFO(st.st_mode)   ? 'p'
                   : S_ISSOCK(st.st_mode) ? 's'
                   : S_ISCHR(st.st_mode)  ? 'c'
                                          : 'b';
    out->mode = 0;
    return 0;
  }
  int flags = S_ISDIR(st.st_mode) ? O_RDONLY | O_DIRECTORY : O_RDONLY | O_NONBLOCK;
  _cleanup_close_ int fd = openat(at, name, flags | O_NOFOLLOW | O_CLOEXEC);
  struct stat now;
  if (fd < 0 || fstat(fd, &now) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "protected path %s", label);
  if ((now.st_mode & S_IFMT) != (st.st_mode & S_IFMT))
    return cordon_error_set(err, CORDON_ERR_DENIED, 0, "protected path %s changed while read",
                            label);
  if (S_ISDIR(now.st_mode)) {
    out->kind = AGENT_GATE_DIRECTORY;
    out->mode = 0; /* the snapshot's root entry carries it */
    return look_directory(cas, fd, label, out->id, err);
  }
  out->kind = AGENT_GATE_FILE;
  return hash_fd(fd, out->id, err, label);
}

static int compare_paths(const void *a, const void *b) {
  const struct agent_gate_path *x = a, *y = b;
  return snap_path_compare(x->path, strlen(x->path), y->path, strlen(y->path));
}

static int open_project(const char *project_dir, struct cordon_error **err) {
  int fd = open(project_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "project %s", project_dir);
  return fd;
}

int agent_gate_record(struct cordon_cas *cas, const char *project_dir, const char *const *paths,
                      struct agent_gate_baseline **out, struct cordon_error **err) {
  *out = NULL;
  _cleanup_close_ int rootfd = open_project(project_dir, err);
  if (rootfd < 0)
    return -1;
  struct agent_gate_baseline *b = calloc(1, sizeof(*b));
  size_t n = 0;
  while (paths && paths[n])
    n++;
  if (!b || !(b->paths = calloc(n ? n : 1, sizeof(*b->paths)))) {
    free(b);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "gate");
  }
  for (size_t i = 0; i < n; i++) {
    _cleanup_free_ char *normal = NULL;
    if (fs_normalize_relative(paths[i], &normal, err) < 0) {
      agent_gate_baseline_free(b);
      return cordon_error_prefix(err, "protected path %s", paths[i]);
    }
    bool seen = false;
    for (size_t j = 0; j < b->count && !seen; j++)
      seen = !strcmp(b->paths[j].path, normal);
    if (seen)
      continue;
    if (look(cas, rootfd, normal, &b->paths[b->count], err) < 0) {
      b->count++;
      agent_gate_baseline_free(b);
      return -1;
    }
    b->count++;
  }
  qsort(b->paths, b->count, sizeof(*b->paths), compare_paths);
  *out = b;
  return 0;
}

static int report_add(struct agent_gate_report *r, enum agent_gate_change_kind kind,
                      const char *prefix, const char *path, struct cordon_error **err) {
  struct agent_gate_change *grown = realloc(r->changes, (r->count + 1) * sizeof(*grown));
  if (!grown)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "gate");
  r->changes = grown;
  char *joined = NULL;
  int n = !*prefix ? asprintf(&joined, "%s", *path ? path : ".")
          : !*path ? asprintf(&joined, "%s", prefix)
                   : asprintf(&joined, "%s/%s", prefix, path);
  if (n < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "gate");
  r->changes[r->count++] = (struct agent_gate_change){kind, joined};
  return 0;
}

static bool entries_equal(const struct cordon_snapshot_entry *a,
                          const struct cordon_snapshot_entry *b) {
  if (a->kind != b->kind || a->mode != b->mode || strcmp(a->digest, b->digest) ||
      a->major != b->major || a->minor != b->minor)
    return false;
  return (!a->target && !b->target) || (a->target && b->target && !strcmp(a->target, b->target));
}

/* Name every entry that differs between two snapshots of the same protected directory. */
static int diff_directory(struct cordon_cas *cas, const char *prefix, const char *old_id,
                          const char *new_id, struct agent_gate_report *r,
                          struct cordon_error **err) {
  struct cordon_snapshot_entry *a = NULL, *b = NULL;
  size_t na = 0, nb = 0;
  int rc = -1;
  if (cordon_snapshot_entries(cas, old_id, &a, &na, err) < 0 ||
      cordon_snapshot_entries(cas, new_id, &b, &nb, err) < 0)
    goto out;
  size_t i = 0, j = 0;
  while (i < na || j < nb) {
    int c = i == na   ? 1
            : j == nb ? -1
                      : snap_path_compare(a[i].path, a[i].path_length, b[j].path, b[j].path_length);
    if (c < 0 && report_add(r, AGENT_GATE_REMOVED, prefix, a[i].path, err) < 0)
      goto out;
    if (c > 0 && report_add(r, AGENT_GATE_ADDED, prefix, b[j].path, err) < 0)
      goto out;
    if (c == 0 && !entries_equal(&a[i], &b[j]) &&
        report_add(r, AGENT_GATE_CHANGED, prefix, a[i].path, err) < 0)
      goto out;
    i += c <= 0;
    j += c >= 0;
  }
  rc = 0;
out:
  cordon_snapshot_entries_free(a, na);
  cordon_snapshot_entries_free(b, nb);
  return rc;
}

static bool same_path_state(const struct agent_gate_path *a, const struct agent_gate_path *b) {
  if (a->kind != b->kind || a->mode != b->mode || strcmp(a->id, b->id) || a->special != b->special)
    return false;
  return (!a->target && !b->target) || (a->target && b->target && !strcmp(a->target, b->target));
}

static int compare_one(struct cordon_cas *cas, const struct agent_gate_path *before,
                       const struct agent_gate_path *now, struct agent_gate_report *r,
                       struct cordon_error **err) {
  if (same_path_state(before, now))
    return 0;
  if (before->kind == AGENT_GATE_ABSENT)
    return report_add(r, AGENT_GATE_ADDED, "", before->path, err);
  if (now->kind == AGENT_GATE_ABSENT)
    return report_add(r, AGENT_GATE_REMOVED, "", before->path, err);
  if (before->kind == AGENT_GATE_DIRECTORY && now->kind == AGENT_GATE_DIRECTORY)
    return diff_directory(cas, before->path, before->id, now->id, r, err);
  return report_add(r, AGENT_GATE_CHANGED, "", before->path, err);
}

int agent_gate_compare(struct cordon_cas *cas, const char *project_dir,
                       const struct agent_gate_baseline *baseline, struct agent_gate_report **out,
                       struct cordon_error **err) {
  *out = NULL;
  _cleanup_close_ int rootfd = open_project(project_dir, err);
  if (rootfd < 0)
    return -1;
  struct agent_gate_report *r = calloc(1, sizeof(*r));
  if (!r)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "gate");
  for (size_t i = 0; i < baseline->count; i++) {
    struct agent_gate_path now;
    int rc = look(cas, rootfd, baseline->paths[i].path, &now, err);
    if (rc == 0)
      rc = compare_one(cas, &baseline->paths[i], &now, r, err);
    /* The comparison's own snapshot keeps its ref: forgetting it could drop the ref of
     * another baseline that recorded the same tree. `snapshot forget` releases it. */
    gate_path_clear(&now);
    if (rc < 0) {
      agent_gate_report_free(r);
      return -1;
    }
  }
  *out = r;
  return 0;
}
