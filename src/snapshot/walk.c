/* The parallel tree walk (see walk.h).
 *
 * Jobs are nodes on one LIFO stack: a directory job lists and stats a directory and pushes its
 * subdirectories and the files the stat cache cannot vouch for; a file job reads, hashes and
 * stages one file. Nodes live in per-worker arenas (no locking, freed at once). Only the
 * calling thread reports progress, so callbacks need not be thread-safe. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/anchor.h"
#include "snapshot/walk.h"

#define READ_BUFFER ((size_t)1 << 20)
#define DENTS_BUFFER ((size_t)64 << 10)
#define ARENA_CHUNK ((size_t)2 << 20)
#define MAX_THREADS 64
#define HOLE_STEP ((uint64_t)64 << 20)

enum { JOB_DIR = 1, JOB_FILE = 2 };

struct arena_chunk {
  struct arena_chunk *next;
  size_t used, size;
  _Alignas(16) char data[];
};

struct arena {
  struct arena_chunk *head;
};

static void *arena_alloc(struct arena *a, size_t n) {
  n = (n + 15) & ~(size_t)15;
  struct arena_chunk *c = a->head;
  if (!c || c->size - c->used < n) {
    size_t size = n > ARENA_CHUNK / 4 ? n : ARENA_CHUNK - sizeof(*c);
    /* Populated up front: one call instead of a page fault per 4 KiB, which is what a walk of
     * tens of thousands of nodes would otherwise spend its time on in some VMs. */
    void *mem = mmap(NULL, sizeof(*c) + size, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (mem == MAP_FAILED)
      return NULL;
    struct arena_chunk *fresh = mem;
    fresh->used = 0;
    fresh->size = size;
    if (n > ARENA_CHUNK / 4 && c) {
      /* A big one-off: keep the current chunk in front for the small allocations. */
      fresh->next = c->next;
      c->next = fresh;
    } else {
      fresh->next = c;
      a->head = fresh;
    }
    c = fresh;
  }
  void *p = c->data + c->used;
  c->used += n;
  return p;
}

static void arena_free(struct arena *a) {
  struct arena_chunk *c = a->head;
  while (c) {
    struct arena_chunk *next = c->next;
    munmap(c, sizeof(*c) + c->size);
    c = next;
  }
  a->head = NULL;
}

struct worker {
  struct walk_tree *tree;
  unsigned index;
  struct arena arena;
  unsigned char *buf;
  char *dents;
  struct cas_hasher hasher;
  struct walk_node **scratch; /* children of the directory being listed */
  size_t scratch_cap;
  struct cordon_error *err;
};

struct walk_tree {
  struct cordon_cas *cas;
  struct cas_batch *batch;
  int rootfd;
  const struct walk_options *o;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  struct walk_node *stack;
  size_t outstanding;
  bool failed;
  bool noatime; /* O_NOATIME until refused once */
  struct walk_node *root;
  struct worker workers[MAX_THREADS];
  unsigned n_workers;
  uint64_t entries, files, bytes, hashed_files, hashed_bytes, files_done;
  uint64_t seen_bytes; /* sizes of the files listed so far (for the limit) */
  uint64_t read_bytes; /* bytes staged from files so far, holes included (for the limit) */
  double last_progress;
};

static void push_jobs(struct walk_tree *t, struct walk_node *first, struct walk_node *last,
                      size_t n) {
  if (n == 0)
    return;
  pthread_mutex_lock(&t->mu);
  last->next_job = t->stack;
  t->stack = first;
  t->outstanding += n;
  if (n == 1)
    pthread_cond_signal(&t->cv);
  else
    pthread_cond_broadcast(&t->cv);
  pthread_mutex_unlock(&t->mu);
}

static int changed_error(struct worker *w, const struct walk_node *n, int e) {
  if (e == ENOENT)
    return cordon_error_set(&w->err, CORDON_ERR_INVALID, 0,
                            "%s vanished while the snapshot was taken", n->path);
  if (e == ELOOP || e == ENOTDIR || e == EXDEV)
    return cordon_error_set(&w->err, CORDON_ERR_INVALID, 0,
                            "%s changed while the snapshot was taken (a directory on its path "
                            "became a symlink or a file); refusing to follow it",
                            *n->path ? n->path : ".");
  return cordon_error_set(&w->err, CORDON_ERR_SYSTEM, e, "%s", *n->path ? n->path : ".");
}

/* An interrupted walk stops: its staged blobs are removed with the batch. */
static int check_interrupt(struct worker *w) {
  if (!cordon_interrupted())
    return 0;
  return cordon_error_set(&w->err, CORDON_ERR_INTERRUPTED, 0, "interrupted");
}

static int over_limit(struct worker *w, uint64_t total) {
  return cordon_error_set(&w->err, CORDON_ERR_DENIED, 0,
                          "the tree's files hold at least %llu bytes, over the snapshot limit of "
                          "%llu bytes",
                          (unsigned long long)total, (unsigned long long)w->tree->o->limit_bytes);
}

/* Count bytes against the limit; *counter is one of the tree's totals. */
static int charge(struct worker *w, uint64_t *counter, uint64_t bytes) {
  uint64_t total = __atomic_add_fetch(counter, bytes, __ATOMIC_RELAXED);
  return total > w->tree->o->limit_bytes ? over_limit(w, total) : 0;
}

static bool excluded(const struct walk_options *o, const char *path) {
  for (size_t i = 0; o->exclude && o->exclude[i]; i++)
    if (!strcmp(o->exclude[i], path))
      return true;
  return false;
}

static bool skipped_dir(const struct walk_options *o, const struct stat *st) {
  for (size_t i = 0; i < o->n_skip; i++)
    if (o->skip[i].dev == st->st_dev && o->skip[i].ino == st->st_ino)
      return true;
  return false;
}

static int by_name(const void *a, const void *b) {
  const struct walk_node *x = *(struct walk_node *const *)a, *y = *(struct walk_node *const *)b;
  return strcmp(x->name, y->name);
}

/* An overlay marker of the mount's own namespace (o->marker_prefix + name): 1 present (its
 * value, up to cap bytes, in buf, *len its length), 0 absent, -1 unreadable (errno set). Only
 * that namespace counts: a sandbox sets xattrs of the other one freely through the merged
 * view, so they are content. */
static int marker_get(const struct walk_options *o, int fd, const char *name, char *buf, size_t cap,
                      size_t *len) {
  if (!o->marker_prefix)
    return 0;
  char full[64];
  snprintf(full, sizeof(full), "%s%s", o->marker_prefix, name);
  ssize_t n = fgetxattr(fd, full, buf, cap);
  if (n >= 0) {
    *len = (size_t)n;
    return 1;
  }
  if (errno == ENODATA || errno == ENOTSUP)
    return 0;
  return -1;
}

static int marker_error(struct worker *w, const struct walk_node *n, const char *name) {
  return cordon_error_set(&w->err, CORDON_ERR_INVALID, errno,
                          "upper layer entry %s: cannot read its overlay marker %s%s",
                          *n->path ? n->path : ".", w->tree->o->marker_prefix, name);
}

static struct walk_node *new_child(struct worker *w, const struct walk_node *parent,
                                   const char *name, size_t name_len) {
  struct walk_node *c = arena_alloc(&w->arena, sizeof(*c));
  size_t plen = parent->path_len ? parent->path_len + 1 + name_len : name_len;
  char *path = arena_alloc(&w->arena, plen + 1);
  if (!c || !path)
    return NULL;
  memset(c, 0, sizeof(*c));
  size_t o = 0;
  if (parent->path_len) {
    memcpy(path, parent->path, parent->path_len);
    path[parent->path_len] = '/';
    o = parent->path_len + 1;
  }
  memcpy(path + o, name, name_len);
  path[plen] = 0;
  c->path = path;
  c->path_len = plen;
  c->name = path + o;
  return c;
}

static int read_link(struct worker *w, int dirfd, struct walk_node *c, const struct stat *st) {
  size_t cap = st->st_size > 0 && st->st_size < PATH_MAX ? (size_t)st->st_size + 1 : PATH_MAX;
  _cleanup_free_ char *buf = malloc(cap);
  if (!buf)
    return cordon_error_set(&w->err, CORDON_ERR_SYSTEM, ENOMEM, "%s", c->path);
  ssize_t n = readlinkat(dirfd, c->name, buf, cap);
  if (n < 0)
    return changed_error(w, c, errno);
  if ((size_t)n >= cap) {
    if (cap >= PATH_MAX)
      return cordon_error_set(&w->err, CORDON_ERR_INVALID, ENAMETOOLONG, "symlink %s", c->path);
    return cordon_error_set(&w->err, CORDON_ERR_INVALID, 0,
                            "symlink %s changed while the snapshot was taken", c->path);
  }
  buf[n] = 0;
  if (n == 0)
    return cordon_error_set(&w->err, CORDON_ERR_INVALID, 0, "symlink %s has an empty target",
                            c->path);
  char *canon = NULL;
  if (snap_symlink_canonical(buf, c->path, w->tree->o->roots, &canon) < 0)
    return cordon_error_set(&w->err, CORDON_ERR_SYSTEM, ENOMEM, "%s", c->path);
  size_t len = strlen(canon);
  c->target = arena_alloc(&w->arena, len + 1);
  if (!c->target) {
    free(canon);
    return cordon_error_set(&w->err, CORDON_ERR_SYSTEM, ENOMEM, "%s", c->path);
  }
  memcpy(c->target, canon, len + 1);
  free(canon);
  return 0;
}

/* The cached files of the directory being listed, consumed in name order. */
struct cache_cursor {
  const struct statcache *c;
  size_t next, end;
};

static int compare_names(const char *a, size_t a_len, const char *b, size_t b_len) {
  int r = memcmp(a, b, a_len < b_len ? a_len : b_len);
  return r ? r : a_len < b_len ? -1 : a_len > b_len ? 1 : 0;
}

static int64_t cursor_find(struct cache_cursor *cur, const char *name, size_t len) {
  while (cur->next < cur->end) {
    const struct statcache_file *f = &cur->c->files[cur->next];
    int r = compare_names(statcache_name(cur->c, f), f->name_len, name, len);
    if (r > 0)
      return -1;
    cur->next++;
    if (r == 0)
      return (int64_t)cur->next - 1;
  }
  return -1;
}

/* Classify a child from its lstat. Returns 1 for a file job, 2 for a directory job, 0 when the
 * node is complete, -1 on error. */
static int classify(struct worker *w, int dirfd, struct walk_node *c, const struct stat *st,
                    struct cache_cursor *cur) {
  struct walk_tree *t = w->tree;
  c->mode = (uint16_t)(st->st_mode & 07777);
  switch (st->st_mode & S_IFMT) {
  case S_IFDIR: c->kind = SNAP_DIR; return 2;
  case S_IFREG: {
    c->kind = SNAP_FILE;
    c->cache_index =
        cur->c ? cursor_find(cur, c->name, c->path_len - (size_t)(c->name - c->path)) : -1;
    const struct statcache_file *f = c->cache_index >= 0 ? &cur->c->files[c->cache_index] : NULL;
    struct snap_stat now;
    snap_stat_from(&now, st);
    if (f && statcache_matches(f, &now)) {
      memcpy(c->digest, f->digest, CAS_DIGEST_LEN);
      c->size = now.size;
      c->st = now;
      c->cacheable = true;
      return 0;
    }
    return 1;
  }
  case S_IFLNK:
    c->kind = SNAP_SYMLINK;
    c->mode = 0777;
    return read_link(w, dirfd, c, st) < 0 ? -1 : 0;
  case S_IFIFO: c->kind = SNAP_FIFO; return 0;
  case S_IFSOCK: c->kind = SNAP_SOCKET; return 0;
  case S_IFCHR:
  case S_IFBLK:
    c->kind = S_ISCHR(st->st_mode) ? SNAP_CHAR : SNAP_BLOCK;
    c->major = major(st->st_rdev);
    c->minor = minor(st->st_rdev);
    if (t->o->overlay && c->kind == SNAP_CHAR && st->st_rdev == 0)
      c->whiteout = true;
    return 0;
  default:
    return cordon_error_set(&w->err, CORDON_ERR_INVALID, 0, "%s has an unknown file type", c->path);
  }
}

/* Live trees lose files while they are walked (a build's temp files): what is gone by the time
 * it is read was simply not there. */
static int vanish(struct walk_tree *t, struct walk_node *n) {
  n->vanished = true;
  __atomic_sub_fetch(&t->entries, 1, __ATOMIC_RELAXED);
  if (n->kind == SNAP_FILE)
    __atomic_sub_fetch(&t->files, 1, __ATOMIC_RELAXED);
  return 0;
}

/* lstat and classify one listed child: as classify, plus 3 when it is left out (gone since the
 * listing, or a directory never entered); files add to the directory's counts. */
static int list_child(struct worker *w, int dirfd, struct walk_node *c, struct cache_cursor *cur,
                      uint64_t *listed_bytes, uint64_t *bytes, uint64_t *files) {
  struct stat st;
  if (fstatat(dirfd, c->name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
    if (errno == ENOENT)
      return 3; /* removed since the listing: not part of this snapshot */
    return changed_error(w, c, errno);
  }
  if (S_ISDIR(st.st_mode) && skipped_dir(w->tree->o, &st))
    return 3;
  int r = classify(w, dirfd, c, &st, cur);
  if (r >= 0 && c->kind == SNAP_FILE) {
    (*files)++;
    *listed_bytes += (uint64_t)st.st_size;
    if (r == 0)
      *bytes += c->size;
  }
  return r;
}

static int process_dir(struct worker *w, struct walk_node *node) {
  struct walk_tree *t = w->tree;
  _cleanup_close_ int fd = anchor_open(t->rootfd, node->path, O_RDONLY | O_DIRECTORY, 0);
  if (fd < 0 && errno == ENOENT && node != t->root)
    return vanish(t, node);
  if (fd < 0)
    return changed_error(w, node, errno);
  struct stat st;
  if (fstat(fd, &st) < 0)
    return changed_error(w, node, errno);
  node->mode = (uint16_t)(st.st_mode & 07777);
  node->kind = SNAP_DIR;
  if (t->o->overlay) {
    char value[8];
    size_t len = 0;
    int m = marker_get(t->o, fd, "redirect", NULL, 0, &len);
    if (m < 0)
      return marker_error(w, node, "redirect");
    if (m > 0)
      return cordon_error_set(&w->err, CORDON_ERR_UNSUPPORTED, 0,
                              "upper layer directory %s is a redirect (overlayfs redirect_dir); "
                              "cannot snapshot it against the base",
                              *node->path ? node->path : ".");
    m = marker_get(t->o, fd, "opaque", value, sizeof(value), &len);
    if (m < 0 && errno != ERANGE)
      return marker_error(w, node, "opaque");
    node->opaque = m > 0 && len == 1 && value[0] == 'y';
  }
  size_t n = 0;
  for (;;) {
    ssize_t got = getdents64(fd, w->dents, DENTS_BUFFER);
    /* Removed since its open: a dead directory lists as ENOENT. rmdir needs it empty, so
     * nothing in it is lost: it was simply not there. */
    if (got < 0 && errno == ENOENT && node != t->root)
      return vanish(t, node);
    if (got < 0)
      return changed_error(w, node, errno);
    if (got == 0)
      break;
    for (ssize_t off = 0; off < got;) {
      struct dirent64 *de = (struct dirent64 *)(w->dents + off);
      off += de->d_reclen;
      const char *name = de->d_name;
      if (name[0] == '.' && (!name[1] || (name[1] == '.' && !name[2])))
        continue;
      struct walk_node *c = new_child(w, node, name, strlen(name));
      if (!c)
        return cordon_error_set(&w->err, CORDON_ERR_SYSTEM, ENOMEM, "walk");
      c->dtype = de->d_type;
      if (excluded(t->o, c->path))
        continue;
      if (n == w->scratch_cap) {
        size_t cap = w->scratch_cap ? w->scratch_cap * 2 : 256;
        struct walk_node **grown = realloc(w->scratch, cap * sizeof(*grown));
        if (!grown)
          return cordon_error_set(&w->err, CORDON_ERR_SYSTEM, ENOMEM, "walk");
        w->scratch = grown;
        w->scratch_cap = cap;
      }
      w->scratch[n++] = c;
    }
  }
  if (n > 1)
    qsort(w->scratch, n, sizeof(*w->scratch), by_name);
  node->children = arena_alloc(&w->arena, (n ? n : 1) * sizeof(*node->children));
  if (!node->children)
    return cordon_error_set(&w->err, CORDON_ERR_SYSTEM, ENOMEM, "walk");
  struct cache_cursor cur = {0};
  if (t->o->cache &&
      statcache_find_dir(t->o->cache, node->path, node->path_len, &cur.next, &cur.end)) {
    cur.c = t->o->cache;
    cur.end += cur.next;
  }
  struct walk_node *first = NULL, *last = NULL;
  size_t jobs = 0, kept = 0;
  uint64_t files = 0, bytes = 0, listed_bytes = 0;
  for (size_t i = 0; i < n; i++) {
    struct walk_node *c = w->scratch[i];
    int r;
    /* With no cache record to compare it with, a regular file's lstat would only be repeated
     * by the fstat of its read: one system call per file less on a first snapshot. */
    if (!cur.c && c->dtype == DT_REG) {
      c->kind = SNAP_FILE;
      c->cache_index = -1;
      c->unstated = true;
      files++;
      r = 1;
    } else if ((r = list_child(w, fd, c, &cur, &listed_bytes, &bytes, &files)) < 0) {
      return -1;
    } else if (r == 3) {
      continue;
    }
    node->children[kept++] = c;
    if (r > 0) {
      c->job = r == 1 ? JOB_FILE : JOB_DIR;
      c->next_job = NULL;
      if (last)
        last->next_job = c;
      else
        first = c;
      last = c;
      jobs++;
    }
  }
  node->n_children = (uint32_t)kept;
  /* Before any of these files is read: a tree over the limit fails before writing it. */
  if (charge(w, &t->seen_bytes, listed_bytes) < 0)
    return -1;
  __atomic_add_fetch(&t->entries, kept, __ATOMIC_RELAXED);
  __atomic_add_fetch(&t->files, files, __ATOMIC_RELAXED);
  __atomic_add_fetch(&t->bytes, bytes, __ATOMIC_RELAXED);
  push_jobs(t, first, last, jobs);
  return 0;
}

/* A file with fewer blocks than its size has holes. Only big ones are worth the lseeks. */
static bool is_sparse(const struct stat *st) {
  return (uint64_t)st->st_size > READ_BUFFER &&
         (uint64_t)st->st_blocks * 512 < (uint64_t)st->st_size;
}

/* Read, hash and stage a file, whole when it fits the buffer, else streamed. */
static int stage_dense(struct worker *w, struct walk_node *n, int fd, const struct stat *st,
                       uint64_t *size) {
  struct walk_tree *t = w->tree;
  /* Read the whole file when it fits the buffer. A read that returns exactly the size fstat
   * reported is taken as the end: a regular file only reads short at its end. */
  size_t want = (uint64_t)st->st_size < READ_BUFFER ? (size_t)st->st_size + 1 : READ_BUFFER;
  size_t filled = 0;
  for (;;) {
    ssize_t r = read(fd, w->buf + filled, want - filled);
    if (r < 0) {
      if (errno == EINTR)
        continue;
      return cordon_error_set(&w->err, CORDON_ERR_SYSTEM, errno, "read %s", n->path);
    }
    filled += (size_t)r;
    if (r == 0 || filled == want || filled == (size_t)st->st_size)
      break;
  }
  *size = filled;
  if (filled < READ_BUFFER && (filled < want || filled == (size_t)st->st_size)) {
    if (cas_batch_add_buffer(t->batch, w->buf, filled, n->digest, &w->err) < 0)
      return cordon_error_prefix(&w->err, "%s", n->path);
  } else {
    struct cas_stage stage;
    if (cas_stage_open(t->batch, &w->hasher, &stage, &w->err) < 0)
      return cordon_error_prefix(&w->err, "%s", n->path);
    if (cas_stage_write(&stage, w->buf, filled, &w->err) < 0) {
      cas_stage_abort(&stage);
      return cordon_error_prefix(&w->err, "%s", n->path);
    }
    for (;;) {
      if (check_interrupt(w) < 0) {
        cas_stage_abort(&stage);
        return -1;
      }
      ssize_t r = read(fd, w->buf, READ_BUFFER);
      if (r < 0 && errno == EINTR)
        continue;
      if (r < 0) {
        int e = errno;
        cas_stage_abort(&stage);
        return cordon_error_set(&w->err, CORDON_ERR_SYSTEM, e, "read %s", n->path);
      }
      if (r == 0)
        break;
      if (charge(w, &t->read_bytes, (uint64_t)r) < 0 ||
          cas_stage_write(&stage, w->buf, (size_t)r, &w->err) < 0) {
        cas_stage_abort(&stage);
        return cordon_error_prefix(&w->err, "%s", n->path);
      }
    }
    *size = stage.size;
    if (cas_stage_close(&stage, n->digest, &w->err) < 0)
      return cordon_error_prefix(&w->err, "%s", n->path);
  }
  return 0;
}

/* Hash and stage a sparse file by its regions: data is read, holes are hashed as zeros and
 * staged as holes, so a file that is mostly hole costs what it holds on disk, not its size. The
 * digest is the one its bytes give, dense or not. */
static int stage_sparse(struct worker *w, struct walk_node *n, int fd, const struct stat *st,
                        uint64_t *size) {
  struct walk_tree *t = w->tree;
  struct cas_stage stage;
  if (cas_stage_open(t->batch, &w->hasher, &stage, &w->err) < 0)
    return cordon_error_prefix(&w->err, "%s", n->path);
  uint64_t pos = 0, end = (uint64_t)st->st_size;
  while (pos < end) {
    if (check_interrupt(w) < 0)
      goto fail;
    off_t data = lseek(fd, (off_t)pos, SEEK_DATA);
    if (data < 0 && errno != ENXIO) {
      cordon_error_set(&w->err, CORDON_ERR_SYSTEM, errno, "read %s", n->path);
      goto fail;
    }
    uint64_t data_at = data < 0 || (uint64_t)data > end ? end : (uint64_t)data;
    if (data_at > pos) {
      /* In steps, so that an interrupt stops hashing a huge hole within a fraction of a
       * second. */
      uint64_t step = data_at - pos < HOLE_STEP ? data_at - pos : HOLE_STEP;
      if (charge(w, &t->read_bytes, step) < 0 || cas_stage_skip(&stage, step, &w->err) < 0)
        goto fail;
      pos += step;
      continue;
    }
    off_t hole = lseek(fd, (off_t)pos, SEEK_HOLE);
    uint64_t hole_at = hole <= (off_t)pos || (uint64_t)hole > end ? end : (uint64_t)hole;
    while (pos < hole_at) {
      size_t want = hole_at - pos < READ_BUFFER ? (size_t)(hole_at - pos) : READ_BUFFER;
      ssize_t got = pread(fd, w->buf, want, (off_t)pos);
      if (got < 0 && errno == EINTR)
        continue;
      if (got < 0) {
        cordon_error_set(&w->err, CORDON_ERR_SYSTEM, errno, "read %s", n->path);
        goto fail;
      }
      if (got == 0) { /* truncated while we read: its end is here */
        end = hole_at = pos;
        break;
      }
      if (charge(w, &t->read_bytes, (uint64_t)got) < 0 ||
          cas_stage_write(&stage, w->buf, (size_t)got, &w->err) < 0)
        goto fail;
      pos += (uint64_t)got;
    }
  }
  *size = stage.size;
  if (cas_stage_close(&stage, n->digest, &w->err) < 0)
    return cordon_error_prefix(&w->err, "%s", n->path);
  return 0;
fail:
  cas_stage_abort(&stage);
  if (w->err->kind == CORDON_ERR_INTERRUPTED)
    return -1;
  return cordon_error_prefix(&w->err, "%s", n->path);
}

static int process_file(struct worker *w, struct walk_node *n) {
  struct walk_tree *t = w->tree;
  /* O_NOATIME: a snapshot is not an access worth an inode write per file (relatime dirties
   * the inode on the first read after a write). Refused for files of other owners. */
  int flags = O_RDONLY | O_NOCTTY | O_NONBLOCK;
  _cleanup_close_ int fd = -1;
  if (__atomic_load_n(&t->noatime, __ATOMIC_RELAXED)) {
    fd = anchor_open(t->rootfd, n->path, flags | O_NOATIME, 0);
    if (fd < 0 && errno == EPERM)
      __atomic_store_n(&t->noatime, false, __ATOMIC_RELAXED);
  }
  if (fd < 0 && (errno == EPERM || !__atomic_load_n(&t->noatime, __ATOMIC_RELAXED)))
    fd = anchor_open(t->rootfd, n->path, flags, 0);
  if (fd < 0 && errno == ENOENT)
    return vanish(t, n);
  if (fd < 0)
    return changed_error(w, n, errno);
  struct stat st;
  if (fstat(fd, &st) < 0)
    return changed_error(w, n, errno);
  if (!S_ISREG(st.st_mode))
    return cordon_error_set(&w->err, CORDON_ERR_INVALID, 0,
                            "%s changed type while the snapshot was taken", n->path);
  n->mode = (uint16_t)(st.st_mode & 07777);
  /* Listed without a stat: its size counts against the limit now, still before its read. */
  if (n->unstated && charge(w, &t->seen_bytes, (uint64_t)st.st_size) < 0)
    return -1;
  /* An "xwhiteout" (overlayfs 6.7+): an empty file marked as a whiteout by an xattr. */
  if (t->o->overlay) {
    size_t len = 0;
    int m = marker_get(t->o, fd, "whiteout", NULL, 0, &len);
    if (m < 0)
      return marker_error(w, n, "whiteout");
    if (m > 0) {
      n->whiteout = true;
      return 0;
    }
    m = marker_get(t->o, fd, "metacopy", NULL, 0, &len);
    if (m < 0)
      return marker_error(w, n, "metacopy");
    if (m > 0)
      return cordon_error_set(&w->err, CORDON_ERR_UNSUPPORTED, 0,
                              "upper layer file %s is a metacopy (overlayfs metacopy=on); "
                              "its data lives in the lower layer",
                              n->path);
  }
  uint64_t size = 0;
  if (is_sparse(&st)) {
    if (stage_sparse(w, n, fd, &st, &size) < 0)
      return -1;
  } else if (stage_dense(w, n, fd, &st, &size) < 0) {
    return -1;
  }
  /* No second fstat: a write during the read moves mtime past the racy threshold, away from
   * the stat recorded here, so the next snapshot reads the file again. */
  bool steady = size == (uint64_t)st.st_size;
  snap_stat_from(&n->st, &st);
  n->size = size;
  n->mode = (uint16_t)(st.st_mode & 07777);
  /* A file written during the read, or too recently to trust its timestamps, is read again
   * next time. */
  n->cacheable = steady && !statcache_racy(&n->st, &t->o->threshold);
  __atomic_add_fetch(&t->hashed_files, 1, __ATOMIC_RELAXED);
  __atomic_add_fetch(&t->hashed_bytes, size, __ATOMIC_RELAXED);
  __atomic_add_fetch(&t->bytes, size, __ATOMIC_RELAXED);
  return 0;
}

static void maybe_progress(struct worker *w) {
  struct walk_tree *t = w->tree;
  const struct cordon_progress *p = t->o->progress;
  if (w->index != 0 || !p || !p->update)
    return;
  double now = fs_now();
  if (now - t->last_progress < 0.1)
    return;
  t->last_progress = now;
  uint64_t done = __atomic_load_n(&t->files_done, __ATOMIC_RELAXED);
  uint64_t seen = __atomic_load_n(&t->files, __ATOMIC_RELAXED);
  p->update(p->data, "snapshot", done, seen);
}

static void *worker_main(void *arg) {
  struct worker *w = arg;
  struct walk_tree *t = w->tree;
  for (;;) {
    pthread_mutex_lock(&t->mu);
    while (!t->stack && t->outstanding > 0 && !t->failed)
      pthread_cond_wait(&t->cv, &t->mu);
    if (t->failed || !t->stack) {
      pthread_mutex_unlock(&t->mu);
      break;
    }
    struct walk_node *job = t->stack;
    t->stack = job->next_job;
    pthread_mutex_unlock(&t->mu);
    int r;
    if (check_interrupt(w) < 0) {
      r = -1;
    } else if (job->job == JOB_DIR) {
      r = process_dir(w, job);
    } else {
      r = process_file(w, job);
      __atomic_add_fetch(&t->files_done, 1, __ATOMIC_RELAXED);
    }
    maybe_progress(w);
    pthread_mutex_lock(&t->mu);
    if (r < 0)
      t->failed = true;
    t->outstanding--;
    if (t->outstanding == 0 || t->failed)
      pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
  }
  return NULL;
}

/* Walk threads block often: on reads of files the page cache no longer holds, on its dirty
 * page throttling while they stage, on the filesystem's journal. With one thread per core a
 * core idles whenever its thread waits, so the walk runs cas_io_threads(): two per core (at
 * most 8), CORDON_THREADS exactly when set. */
int walk_run(struct cordon_cas *cas, struct cas_batch *batch, int rootfd,
             const struct walk_options *o, struct walk_tree **out, struct cordon_error **err) {
  struct walk_tree *t = calloc(1, sizeof(*t));
  if (!t)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "walk");
  t->cas = cas;
  t->batch = batch;
  t->rootfd = rootfd;
  t->o = o;
  t->noatime = true;
  pthread_mutex_init(&t->mu, NULL);
  pthread_cond_init(&t->cv, NULL);
  unsigned n = o->threads ? o->threads : cas_io_threads();
  if (n > MAX_THREADS)
    n = MAX_THREADS;
  t->n_workers = n;
  for (unsigned i = 0; i < n; i++) {
    struct worker *w = &t->workers[i];
    w->tree = t;
    w->index = i;
    w->buf = malloc(READ_BUFFER);
    w->dents = malloc(DENTS_BUFFER);
    if (!w->buf || !w->dents) {
      walk_free(t);
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "walk");
    }
  }
  t->root = arena_alloc(&t->workers[0].arena, sizeof(*t->root));
  if (!t->root) {
    walk_free(t);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "walk");
  }
  memset(t->root, 0, sizeof(*t->root));
  t->root->path = "";
  t->root->name = "";
  t->root->kind = SNAP_DIR;
  t->root->job = JOB_DIR;
  t->entries = 1;
  push_jobs(t, t->root, t->root, 1);
  pthread_t threads[MAX_THREADS];
  unsigned started = 0;
  for (unsigned i = 1; i < n; i++, started++)
    if (pthread_create(&threads[started], NULL, worker_main, &t->workers[i]) != 0)
      break;
  worker_main(&t->workers[0]);
  for (unsigned i = 0; i < started; i++)
    pthread_join(threads[i], NULL);
  if (t->failed) {
    for (unsigned i = 0; i < n; i++) {
      if (t->workers[i].err) {
        if (err && !*err)
          *err = steal_ptr(&t->workers[i].err);
        break;
      }
    }
    walk_free(t);
    return -1;
  }
  if (o->progress && o->progress->update)
    o->progress->update(o->progress->data, "snapshot", t->files_done, t->files_done);
  *out = t;
  return 0;
}

struct walk_node *walk_root(struct walk_tree *t) {
  return t->root;
}

void walk_get_counts(struct walk_tree *t, struct walk_counts *c) {
  c->entries = t->entries;
  c->files = t->files;
  c->bytes = t->bytes;
  c->hashed_files = t->hashed_files;
  c->hashed_bytes = t->hashed_bytes;
}

int walk_flatten(struct walk_tree *t, struct walk_node ***nodes, size_t *count) {
  size_t cap = t->entries ? t->entries : 1, n = 0;
  struct walk_node **out = malloc(cap * sizeof(*out));
  /* Explicit stack: trees may be deeper than the C stack allows. Each frame is a directory and
   * the index of its next child. */
  size_t scap = 64, depth = 0;
  struct frame {
    struct walk_node *dir;
    uint32_t next;
  } *stack = malloc(scap * sizeof(*stack));
  if (!out || !stack) {
    free(out);
    free(stack);
    return -1;
  }
  out[n++] = t->root;
  stack[depth++] = (struct frame){t->root, 0};
  while (depth > 0) {
    struct frame *f = &stack[depth - 1];
    if (f->next == f->dir->n_children) {
      depth--;
      continue;
    }
    struct walk_node *c = f->dir->children[f->next++];
    if (c->vanished)
      continue;
    if (n == cap) {
      cap *= 2;
      struct walk_node **grown = realloc(out, cap * sizeof(*out));
      if (!grown) {
        free(out);
        free(stack);
        return -1;
      }
      out = grown;
    }
    out[n++] = c;
    if (c->kind == SNAP_DIR && c->n_children > 0) {
      if (depth == scap) {
        scap *= 2;
        struct frame *grown = realloc(stack, scap * sizeof(*stack));
        if (!grown) {
          free(out);
          free(stack);
          return -1;
        }
        stack = grown;
      }
      stack[depth++] = (struct frame){c, 0};
    }
  }
  free(stack);
  *nodes = out;
  *count = n;
  return 0;
}

void walk_node_entry(const struct walk_node *n, struct snap_entry *e) {
  memset(e, 0, sizeof(*e));
  e->path = n->path;
  e->path_len = n->path_len;
  e->kind = n->kind;
  e->mode = n->mode;
  e->size = n->kind == SNAP_FILE ? n->size : 0;
  memcpy(e->digest, n->digest, CAS_DIGEST_LEN);
  e->target = n->target;
  e->major = n->major;
  e->minor = n->minor;
}

void walk_free(struct walk_tree *t) {
  if (!t)
    return;
  for (unsigned i = 0; i < t->n_workers; i++) {
    struct worker *w = &t->workers[i];
    arena_free(&w->arena);
    free(w->buf);
    free(w->dents);
    free(w->scratch);
    cas_hasher_free(&w->hasher);
    cordon_error_free(w->err);
  }
  pthread_mutex_destroy(&t->mu);
  pthread_cond_destroy(&t->cv);
  free(t);
}
