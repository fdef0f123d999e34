/* Restore: build a snapshot's tree beside the target, verifying every blob as it is copied,
 * then rename it into place. Nothing half-restored is ever visible under the target's name, and
 * a failure removes the temporary tree.
 *
 * Directories are created first (private, 0700), then files, symlinks and special files on all
 * cores, then directory modes from the deepest up (so a read-only directory is filled before
 * it becomes read-only). Every create is anchored below the temporary root with O_EXCL and
 * O_NOFOLLOW; the manifest parser already refused anything below a symlink or a file. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cordon/snapshot.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/anchor.h"
#include "snapshot/internal.h"

#define COPY_BUFFER ((size_t)1 << 20)
#define CHUNK 32
#define MAX_THREADS 64
#define HOLE_STEP ((uint64_t)64 << 20)

struct restore {
  struct cordon_cas *cas;
  int umask;       /* the process's umask, -1 when unknown */
  bool dirs_exact; /* directories may be created with their final modes (dir_mode_exact) */
  const struct cordon_restore_options *o;
  const struct snap_manifest *m;
  int rootfd;
  size_t *work; /* indexes of the non-directory entries */
  size_t n_work;
  size_t next;
  bool failed;
  uint64_t done_bytes, total_bytes;
  double last_progress;
  pthread_mutex_t mu;
  struct cordon_error *err;
  struct snap_manifest ref; /* options->link_from_id, when linking */
  int ref_fd;               /* options->link_from_dir, or -1 */
};

struct restore_worker {
  struct restore *r;
  unsigned index;
  unsigned char *buf;
  struct cas_hasher hasher;
  int parent_fd;
  const char *parent_path; /* the entry whose parent parent_fd is */
  size_t parent_len;
  struct cordon_error *err;
};

static size_t parent_len(const struct snap_entry *e) {
  const char *slash = memrchr(e->path, '/', e->path_len);
  return slash ? (size_t)(slash - e->path) : 0;
}

/* The parent directory of e, reusing the last one when consecutive entries share it. */
static int worker_parent(struct restore_worker *w, const struct snap_entry *e, const char **name) {
  size_t pl = parent_len(e);
  *name = pl ? e->path + pl + 1 : e->path;
  if (w->parent_fd >= 0 && w->parent_len == pl && memcmp(w->parent_path, e->path, pl) == 0)
    return w->parent_fd;
  if (w->parent_fd >= 0)
    close(w->parent_fd);
  const char *ignored;
  w->parent_fd = anchor_open_parent(w->r->rootfd, e->path, &ignored);
  if (w->parent_fd < 0)
    return cordon_error_set(&w->err, CORDON_ERR_SYSTEM, errno, "restore %s", e->path);
  w->parent_path = e->path;
  w->parent_len = pl;
  return w->parent_fd;
}

/* The umask without changing it (umask(2) would, for every thread): /proc/self/status. */
static int current_umask(void) {
  FILE *f = fopen("/proc/self/status", "re");
  if (!f)
    return -1;
  char line[256];
  int mask = -1;
  while (fgets(line, sizeof(line), f)) {
    unsigned v;
    if (sscanf(line, "Umask: %o", &v) == 1) {
      mask = (int)(v & 0777);
      break;
    }
  }
  fclose(f);
  return mask;
}

static void add_progress(struct restore_worker *w, uint64_t bytes) {
  struct restore *r = w->r;
  __atomic_add_fetch(&r->done_bytes, bytes, __ATOMIC_RELAXED);
  const struct cordon_progress *p = r->o->progress;
  if (w->index != 0 || !p || !p->update)
    return;
  double now = fs_now();
  if (now - r->last_progress < 0.1)
    return;
  r->last_progress = now;
  p->update(p->data, "restore", __atomic_load_n(&r->done_bytes, __ATOMIC_RELAXED), r->total_bytes);
}

static int restore_blob(struct restore_worker *w, int pfd, const char *name,
                        const struct snap_entry *e, const struct cas_blob *in);
static unsigned restored_mode(const struct restore *r, unsigned mode);

/* The same file in the reference tree (same path, digest and mode), hard-linked: 1 when done,
 * 0 to copy instead. The reference is an immutable tree that holds its manifest exactly, so
 * the path names that file and no component of it is a symlink. */
static int link_from_ref(struct restore_worker *w, int pfd, const char *name,
                         const struct snap_entry *e, unsigned mode) {
  struct restore *r = w->r;
  size_t lo = 0, hi = r->ref.count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const struct snap_entry *x = &r->ref.entries[mid];
    int c = snap_path_compare(x->path, x->path_len, e->path, e->path_len);
    if (c == 0) {
      if (x->kind != SNAP_FILE || memcmp(x->digest, e->digest, CAS_DIGEST_LEN) ||
          x->size != e->size || (x->mode & ~(unsigned)(S_ISUID | S_ISGID)) != mode)
        return 0;
      if (linkat(r->ref_fd, e->path, pfd, name, 0) < 0)
        return 0; /* EXDEV, EMLINK, gone: copy */
      add_progress(w, e->size);
      return 1;
    }
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return 0;
}

static int restore_file(struct restore_worker *w, int pfd, const char *name,
                        const struct snap_entry *e) {
  struct restore *r = w->r;
  unsigned mode = e->mode & ~(unsigned)(S_ISUID | S_ISGID);
  if (r->ref_fd >= 0 && !(e->mode & (S_ISUID | S_ISGID)) && link_from_ref(w, pfd, name, e, mode))
    return 0;
  struct cas_blob in;
  if (cas_blob_open(r->cas, e->digest, &in, &w->err) < 0)
    return cordon_error_prefix(&w->err, "restore %s", e->path);
  int result = restore_blob(w, pfd, name, e, &in);
  cas_blob_close(&in);
  return result;
}

static int restore_blob(struct restore_worker *w, int pfd, const char *name,
                        const struct snap_entry *e, const struct cas_blob *in) {
  struct restore *r = w->r;
  unsigned mode = restored_mode(r, e->mode);
  /* Created with its final mode when the umask leaves it intact (the tree is private until
   * the final rename), which saves an fchmod per file. */
  bool exact = r->umask >= 0 && !(mode & 07000) && !(mode & (unsigned)r->umask);
  _cleanup_close_ int out =
      openat(pfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, exact ? mode : 0600);
  if (out < 0)
    return cordon_error_set(&w->err, CORDON_ERR_SYSTEM, errno, "restore %s", e->path);
  if (cas_hasher_init(&w->hasher) < 0)
    return cordon_error_set(&w->err, CORDON_ERR_SYSTEM, ENOMEM, "restore %s", e->path);
  uint64_t size = 0, unreported = 0;
  /* Stop at the blob's size rather than reading on to end of file: one read per small file
   * instead of two. What was copied is what is verified, whatever the blob's true length. */
  bool trailing_hole = false;
  while (size < in->size) {
    if (cordon_interrupted())
      return cordon_error_set(&w->err, CORDON_ERR_INTERRUPTED, 0, "interrupted");
    /* A hole of a sparse blob stays a hole: hashed as zeros, skipped over in the copy. */
    bool hole = false;
    uint64_t region_end = in->size;
    if (in->size > COPY_BUFFER)
      cas_blob_region(in, size, &hole, &region_end);
    if (hole) {
      if (region_end - size > HOLE_STEP) /* in steps, for interrupts */
        region_end = size + HOLE_STEP;
      cas_hasher_update_zeros(&w->hasher, region_end - size);
      if (lseek(out, (off_t)region_end, SEEK_SET) < 0)
        return cordon_error_set(&w->err, CORDON_ERR_SYSTEM, errno, "restore %s", e->path);
      unreported += region_end - size;
      size = region_end;
      trailing_hole = true;
      continue;
    }
    trailing_hole = false;
    size_t want = region_end - size < COPY_BUFFER ? (size_t)(region_end - size) : COPY_BUFFER;
    ssize_t n = cas_blob_read(in, w->buf, want, size);
    if (n < 0)
      return cordon_error_set(&w->err, CORDON_ERR_SYSTEM, errno, "restore %s: read blob", e->path);
    if (n == 0)
      break;
    cas_hasher_update(&w->hasher, w->buf, (size_t)n);
    if (fs_write_all(out, w->buf, (size_t)n) < 0)
      return cordon_error_set(&w->err, CORDON_ERR_SYSTEM, errno, "restore %s", e->path);
    size += (uint64_t)n;
    unreported += (uint64_t)n;
    if (unreported >= ((uint64_t)8 << 20)) { /* big blobs report as they go */
      add_progress(w, unreported);
      unreported = 0;
    }
  }
  if (trailing_hole && ftruncate(out, (off_t)size) < 0)
    return cordon_error_set(&w->err, CORDON_ERR_SYSTEM, errno, "restore %s", e->path);
  unsigned char actual[CAS_DIGEST_LEN];
  cas_hasher_final(&w->hasher, actual);
  if (memcmp(actual, e->digest, CAS_DIGEST_LEN) != 0) {
    cas_integrity_error(&w->err, e->digest, actual);
    return cordon_error_prefix(&w->err, "restore %s", e->path);
  }
  if (size != e->size)
    return cordon_error_set(&w->err, CORDON_ERR_INTEGRITY, 0,
                            "restore %s: the manifest says %llu bytes, the blob has %llu", e->path,
                            (unsigned long long)e->size, (unsigned long long)size);
  if (!exact && fchmod(out, mode) < 0)
    return cordon_error_set(&w->err, CORDON_ERR_SYSTEM, errno, "restore %s", e->path);
  add_progress(w, unreported);
  return 0;
}

static int restore_entry(struct restore_worker *w, const struct snap_entry *e) {
  const char *name = NULL;
  int pfd = worker_parent(w, e, &name);
  if (pfd < 0)
    return -1;
  switch (e->kind) {
  case SNAP_FILE: return restore_file(w, pfd, name, e);
  case SNAP_SYMLINK:
    if (symlinkat(e->target, pfd, name) < 0)
      return cordon_error_set(&w->err, CORDON_ERR_SYSTEM, errno, "restore symlink %s", e->path);
    return 0;
  case SNAP_FIFO:
  case SNAP_SOCKET:
  case SNAP_CHAR:
  case SNAP_BLOCK: {
    mode_t type = e->kind == SNAP_FIFO     ? S_IFIFO
                  : e->kind == SNAP_SOCKET ? S_IFSOCK
                  : e->kind == SNAP_CHAR   ? S_IFCHR
                                           : S_IFBLK;
    dev_t dev = (e->kind == SNAP_CHAR || e->kind == SNAP_BLOCK) ? makedev(e->major, e->minor) : 0;
    if (mknodat(pfd, name, type | 0600, dev) < 0)
      return cordon_error_set(&w->err, CORDON_ERR_SYSTEM, errno, "restore %s", e->path);
    /* We just made it in our private tree, so following the name is safe here. */
    if (fchmodat(pfd, name, e->mode & ~(unsigned)(S_ISUID | S_ISGID), 0) < 0)
      return cordon_error_set(&w->err, CORDON_ERR_SYSTEM, errno, "restore %s", e->path);
    return 0;
  }
  default:
    return cordon_error_set(&w->err, CORDON_ERR_INVALID, 0, "restore %s: unexpected kind", e->path);
  }
}

static void *restore_worker_main(void *arg) {
  struct restore_worker *w = arg;
  struct restore *r = w->r;
  for (;;) {
    if (__atomic_load_n(&r->failed, __ATOMIC_RELAXED))
      break;
    size_t start = __atomic_fetch_add(&r->next, CHUNK, __ATOMIC_RELAXED);
    if (start >= r->n_work)
      break;
    size_t end = start + CHUNK < r->n_work ? start + CHUNK : r->n_work;
    for (size_t i = start; i < end; i++) {
      if (restore_entry(w, &r->m->entries[r->work[i]]) < 0) {
        pthread_mutex_lock(&r->mu);
        __atomic_store_n(&r->failed, true, __ATOMIC_RELAXED);
        if (!r->err)
          r->err = steal_ptr(&w->err);
        pthread_mutex_unlock(&r->mu);
        break;
      }
    }
  }
  return NULL;
}

static int run_workers(struct restore *r, unsigned n, struct cordon_error **err) {
  if (n > MAX_THREADS)
    n = MAX_THREADS;
  if (n > r->n_work / CHUNK + 1)
    n = (unsigned)(r->n_work / CHUNK + 1);
  struct restore_worker workers[MAX_THREADS];
  memset(workers, 0, sizeof(workers));
  int rc = 0;
  for (unsigned i = 0; i < n; i++) {
    workers[i].r = r;
    workers[i].index = i;
    workers[i].parent_fd = -1;
    workers[i].buf = malloc(COPY_BUFFER);
    if (!workers[i].buf)
      rc = -1;
  }
  pthread_t threads[MAX_THREADS];
  unsigned started = 0;
  if (rc == 0) {
    for (unsigned i = 1; i < n; i++, started++)
      if (pthread_create(&threads[started], NULL, restore_worker_main, &workers[i]) != 0)
        break;
    restore_worker_main(&workers[0]);
    for (unsigned i = 0; i < started; i++)
      pthread_join(threads[i], NULL);
  }
  for (unsigned i = 0; i < n; i++) {
    free(workers[i].buf);
    cas_hasher_free(&workers[i].hasher);
    if (workers[i].parent_fd >= 0)
      close(workers[i].parent_fd);
    cordon_error_free(workers[i].err);
  }
  if (rc < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "restore");
  if (r->failed) {
    if (err && !*err)
      *err = steal_ptr(&r->err);
    return -1;
  }
  return 0;
}

/* A directory can be made with its final mode at once when that mode lets us fill it (owner
 * rwx), has no special bits, survives the umask, and nothing is inherited from above (a
 * set-group-ID root): the temporary root is private, so what lies below it need not be. */
static bool dir_mode_exact(const struct restore *r, unsigned mode) {
  return r->dirs_exact && (mode & 0700) == 0700 && !(mode & 07000) && !(mode & (unsigned)r->umask);
}

static int make_dirs(struct restore *r, struct cordon_error **err) {
  struct stat st;
  r->dirs_exact = r->umask >= 0 && fstat(r->rootfd, &st) == 0 && !(st.st_mode & S_ISGID);
  for (size_t i = 1; i < r->m->count; i++) {
    const struct snap_entry *e = &r->m->entries[i];
    if (e->kind != SNAP_DIR)
      continue;
    const char *name = NULL;
    _cleanup_close_ int pfd = anchor_open_parent(r->rootfd, e->path, &name);
    if (pfd < 0 || mkdirat(pfd, name, dir_mode_exact(r, e->mode) ? e->mode : 0700) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "restore directory %s", e->path);
  }
  return 0;
}

/* The mode a restored entry gets: the recorded one, without set-user-ID and set-group-ID unless
 * the caller asked to keep them (directories as files: a set-group-ID directory hands its group
 * to everything made below it). */
static unsigned restored_mode(const struct restore *r, unsigned mode) {
  return r->o->keep_setid ? mode : mode & ~(unsigned)(S_ISUID | S_ISGID);
}

static int set_dir_modes(struct restore *r, struct cordon_error **err) {
  for (size_t i = r->m->count; i-- > 1;) {
    const struct snap_entry *e = &r->m->entries[i];
    if (e->kind != SNAP_DIR || dir_mode_exact(r, e->mode))
      continue;
    _cleanup_close_ int fd = anchor_open(r->rootfd, e->path, O_RDONLY | O_DIRECTORY, 0);
    if (fd < 0 || fchmod(fd, restored_mode(r, e->mode)) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "restore directory %s", e->path);
  }
  if (fchmod(r->rootfd, restored_mode(r, r->m->entries[0].mode)) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "restore: root directory");
  return 0;
}

/* 1 when dirfd/name is an empty directory, 0 when absent, -1 (with err) otherwise. */
static int target_state(int dirfd, const char *name, const char *dir, struct cordon_error **err) {
  struct stat st;
  if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
    if (errno == ENOENT)
      return 0;
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "restore target %s", dir);
  }
  if (!S_ISDIR(st.st_mode))
    return cordon_error_set(err, CORDON_ERR_USAGE, EEXIST,
                            "restore target %s exists and is not a directory", dir);
  int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "restore target %s", dir);
  DIR *d = fdopendir(fd);
  if (!d) {
    close(fd);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "restore target %s", dir);
  }
  struct dirent *de;
  bool empty = true;
  while ((de = readdir(d)))
    if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
      empty = false;
  closedir(d);
  if (!empty)
    return cordon_error_set(err, CORDON_ERR_USAGE, ENOTEMPTY, "restore target %s", dir);
  return 1;
}

int cordon_snapshot_restore(struct cordon_cas *cas, const char *id_hex, const char *dir,
                            const struct cordon_restore_options *options,
                            struct cordon_error **err) {
  static const struct cordon_restore_options defaults;
  const struct cordon_restore_options *o = options ? options : &defaults;
  unsigned char id[CAS_DIGEST_LEN];
  if (snap_parse_id(id_hex, id, err) < 0)
    return -1;
  if (!dir || !*dir)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "restore: no target directory");
  struct snap_manifest m;
  if (snap_load_manifest(cas, id, &m, err) < 0)
    return -1;
  struct restore r = {
      .cas = cas, .o = o, .m = &m, .rootfd = -1, .umask = current_umask(), .ref_fd = -1};
  pthread_mutex_init(&r.mu, NULL);
  /* A reference tree to link from: best effort, it only saves copies. */
  unsigned char ref_id[CAS_DIGEST_LEN];
  if (o->link_from_dir && o->link_from_id) {
    struct cordon_error *ignored = NULL;
    if (snap_parse_id(o->link_from_id, ref_id, &ignored) == 0 &&
        snap_load_manifest(cas, ref_id, &r.ref, &ignored) == 0)
      r.ref_fd = open(o->link_from_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    cordon_error_free(ignored);
  }
  _cleanup_free_ char *parent = NULL, *base = NULL, *tmp = NULL, *suffix = NULL;
  int parentfd = -1, rc = -1;
  bool made = false;
  /* Trailing slashes name the same directory. */
  _cleanup_free_ char *target = strdup(dir);
  if (!target) {
    cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "restore");
    goto out;
  }
  for (size_t n = strlen(target); n > 1 && target[n - 1] == '/'; n--)
    target[n - 1] = 0;
  fs_split_path(target, &parent, &base);
  if (!parent || !base) {
    cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "restore");
    goto out;
  }
  if (!*base || !strcmp(base, ".") || !strcmp(base, "..")) {
    cordon_error_set(err, CORDON_ERR_USAGE, 0,
                     "restore target %s must name a new (or empty) directory", dir);
    goto out;
  }
  for (size_t i = 0; i < m.count; i++) {
    if ((m.entries[i].kind == SNAP_CHAR || m.entries[i].kind == SNAP_BLOCK) && !o->allow_devices) {
      cordon_error_set(err, CORDON_ERR_DENIED, 0,
                       "snapshot %s holds device node %s; refusing to create device nodes", id_hex,
                       m.entries[i].path);
      goto out;
    }
    if (m.entries[i].kind == SNAP_FILE)
      r.total_bytes += m.entries[i].size;
  }
  parentfd = open(*parent ? parent : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (parentfd < 0) {
    cordon_error_set(err, errno == ENOENT ? CORDON_ERR_NOT_FOUND : CORDON_ERR_SYSTEM, errno,
                     "restore: parent directory of %s", dir);
    goto out;
  }
  int state = target_state(parentfd, base, dir, err);
  if (state < 0)
    goto out;
  if (fs_random_hex(6, &suffix, err) < 0 || asprintf(&tmp, ".cordon-restore-%s", suffix) < 0)
    goto out;
  if (mkdirat(parentfd, tmp, 0700) < 0) {
    cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "restore: cannot create a directory beside %s",
                     dir);
    goto out;
  }
  made = true;
  r.rootfd = openat(parentfd, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (r.rootfd < 0) {
    cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "restore %s", dir);
    goto out;
  }
  r.work = malloc((m.count ? m.count : 1) * sizeof(*r.work));
  if (!r.work) {
    cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "restore");
    goto out;
  }
  for (size_t i = 1; i < m.count; i++)
    if (m.entries[i].kind != SNAP_DIR)
      r.work[r.n_work++] = i;
  if (make_dirs(&r, err) < 0 ||
      run_workers(&r, o->threads ? o->threads : cas_default_threads(), err) < 0 ||
      set_dir_modes(&r, err) < 0)
    goto out;
  int renamed = state == 1 ? renameat(parentfd, tmp, parentfd, base)
                           : renameat2(parentfd, tmp, parentfd, base, RENAME_NOREPLACE);
  if (renamed < 0) {
    cordon_error_set(err,
                     errno == EEXIST || errno == ENOTEMPTY ? CORDON_ERR_USAGE : CORDON_ERR_SYSTEM,
                     errno, "restore: cannot move the restored tree to %s", dir);
    goto out;
  }
  made = false;
  if (o->progress && o->progress->update)
    o->progress->update(o->progress->data, "restore", r.total_bytes, r.total_bytes);
  rc = 0;
out:
  if (made) {
    struct cordon_error *ignored = NULL;
    fs_remove_tree_at(parentfd, tmp, &ignored);
    cordon_error_free(ignored);
  }
  if (r.rootfd >= 0)
    close(r.rootfd);
  if (r.ref_fd >= 0)
    close(r.ref_fd);
  snap_manifest_free(&r.ref);
  if (parentfd >= 0)
    close(parentfd);
  free(r.work);
  cordon_error_free(r.err);
  pthread_mutex_destroy(&r.mu);
  snap_manifest_free(&m);
  return rc;
}
