/* The stat cache (see statcache.h): layout, lookup, the racy rule, load and save. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "snapshot/statcache.h"
#include "store/cas.h"

#define HEADER_SIZE 48
#define CACHE_MAX ((size_t)1 << 31)

_Static_assert(sizeof(struct statcache_dir) == 16, "statcache_dir layout");
_Static_assert(sizeof(struct statcache_file) == 96, "statcache_file layout");

void snap_stat_from(struct snap_stat *out, const struct stat *st) {
  out->dev = (uint64_t)st->st_dev;
  out->ino = (uint64_t)st->st_ino;
  out->size = (uint64_t)st->st_size;
  out->mtime_sec = (int64_t)st->st_mtim.tv_sec;
  out->mtime_nsec = (uint32_t)st->st_mtim.tv_nsec;
  out->ctime_sec = (int64_t)st->st_ctim.tv_sec;
  out->ctime_nsec = (uint32_t)st->st_ctim.tv_nsec;
  out->mode = (uint32_t)st->st_mode;
}

static uint64_t get_u64(const unsigned char *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

int statcache_parse(unsigned char *data, size_t length, struct statcache *out) {
  memset(out, 0, sizeof(*out));
  out->fd = -1;
  if (length < HEADER_SIZE + CAS_DIGEST_LEN || memcmp(data, STATCACHE_MAGIC, 8) != 0)
    return -1;
  size_t body = length - CAS_DIGEST_LEN;
  uint64_t n_dirs = get_u64(data + 24), n_files = get_u64(data + 32), names = get_u64(data + 40);
  if (n_dirs > body / sizeof(struct statcache_dir) ||
      n_files > body / sizeof(struct statcache_file) || names > body ||
      HEADER_SIZE + n_dirs * sizeof(struct statcache_dir) +
              n_files * sizeof(struct statcache_file) + names !=
          body)
    return -1;
  unsigned char sum[CAS_DIGEST_LEN];
  if (cas_sha256(data, body, sum) < 0 || memcmp(sum, data + body, CAS_DIGEST_LEN) != 0)
    return -1;
  const struct statcache_dir *dirs = (const void *)(data + HEADER_SIZE);
  const struct statcache_file *files = (const void *)(dirs + n_dirs);
  const char *name_base = (const char *)(files + n_files);
  /* Bounds once, so lookups need no checks. Order is not checked: out of order only means
   * misses. */
  for (size_t i = 0; i < n_dirs; i++)
    if ((uint64_t)dirs[i].path_off + dirs[i].path_len > names ||
        (uint64_t)dirs[i].first + dirs[i].count > n_files)
      return -1;
  for (size_t i = 0; i < n_files; i++)
    if ((uint64_t)files[i].name_off + files[i].name_len > names || files[i].name_len == 0)
      return -1;
  out->storage = data;
  out->length = length;
  out->dirs = dirs;
  out->files = files;
  out->names = name_base;
  out->n_dirs = n_dirs;
  out->n_files = n_files;
  out->names_size = names;
  out->root_dev = get_u64(data + 8);
  out->root_ino = get_u64(data + 16);
  return 0;
}

void statcache_load(int dirfd, const char *name, struct statcache *out) {
  memset(out, 0, sizeof(*out));
  out->fd = -1;
  int fd = openat(dirfd, name, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  struct stat st;
  if (fd < 0)
    return;
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
      (uint64_t)st.st_size > CACHE_MAX) {
    close(fd);
    return;
  }
  /* A private mapping, populated at once: no copy, one fault-in for the whole file, and
   * in-memory edits that never reach the file by themselves. */
  size_t len = (size_t)st.st_size;
  void *map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_POPULATE, fd, 0);
  if (map == MAP_FAILED) {
    close(fd);
    return;
  }
  if (statcache_parse(map, len, out) < 0) {
    munmap(map, len);
    close(fd);
    memset(out, 0, sizeof(*out));
    out->fd = -1;
    return;
  }
  out->fd = fd;
}

void statcache_free(struct statcache *c) {
  if (c->storage)
    munmap(c->storage, c->length);
  if (c->fd >= 0)
    close(c->fd);
  memset(c, 0, sizeof(*c));
  c->fd = -1;
}

static void fill_record(struct statcache_file *f, const struct snap_stat *st,
                        const unsigned char digest[CAS_DIGEST_LEN], bool trusted) {
  f->dev = st->dev;
  f->ino = st->ino;
  f->size = st->size;
  f->mtime_sec = st->mtime_sec;
  f->ctime_sec = st->ctime_sec;
  f->mtime_nsec = st->mtime_nsec;
  f->ctime_nsec = st->ctime_nsec;
  f->mode = st->mode;
  f->flags = trusted ? STATCACHE_TRUSTED : 0;
  memcpy(f->digest, digest, CAS_DIGEST_LEN);
}

bool statcache_set(struct statcache *c, size_t index, const struct snap_stat *st,
                   const unsigned char digest[CAS_DIGEST_LEN], bool trusted) {
  struct statcache_file *f = (struct statcache_file *)&c->files[index];
  struct statcache_file fresh = *f;
  fill_record(&fresh, st, digest, trusted);
  if (!memcmp(&fresh, f, sizeof(fresh)))
    return false;
  *f = fresh;
  return true;
}

int statcache_write_back(struct statcache *c, const size_t *changed, size_t n_changed) {
  if (n_changed == 0)
    return 0;
  if (c->fd < 0)
    return -1;
  size_t body = c->length - CAS_DIGEST_LEN;
  if (cas_sha256(c->storage, body, c->storage + body) < 0)
    return -1;
  for (size_t i = 0; i < n_changed; i++) {
    const struct statcache_file *f = &c->files[changed[i]];
    off_t off = (off_t)((const unsigned char *)f - c->storage);
    if (pwrite(c->fd, f, sizeof(*f), off) != (ssize_t)sizeof(*f))
      return -1;
  }
  if (pwrite(c->fd, c->storage + body, CAS_DIGEST_LEN, (off_t)body) != CAS_DIGEST_LEN)
    return -1;
  return 0;
}

bool statcache_find_dir(const struct statcache *c, const char *path, size_t path_len, size_t *first,
                        size_t *count) {
  size_t lo = 0, hi = c->n_dirs;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const struct statcache_dir *d = &c->dirs[mid];
    int r = snap_path_compare(c->names + d->path_off, d->path_len, path, path_len);
    if (r == 0) {
      *first = d->first;
      *count = d->count;
      return true;
    }
    if (r < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return false;
}

bool statcache_matches(const struct statcache_file *f, const struct snap_stat *st) {
  return f->dev == st->dev && f->ino == st->ino && f->size == st->size &&
         f->mtime_sec == st->mtime_sec && f->mtime_nsec == st->mtime_nsec &&
         f->ctime_sec == st->ctime_sec && f->ctime_nsec == st->ctime_nsec && f->mode == st->mode &&
         (f->flags & STATCACHE_TRUSTED);
}

static bool not_before(int64_t sec, uint32_t nsec, const struct timespec *threshold) {
  return sec > threshold->tv_sec || (sec == threshold->tv_sec && nsec >= threshold->tv_nsec);
}

bool statcache_racy(const struct snap_stat *st, const struct timespec *threshold) {
  return not_before(st->mtime_sec, st->mtime_nsec, threshold) ||
         not_before(st->ctime_sec, st->ctime_nsec, threshold);
}

struct timespec statcache_threshold(void) {
  /* The coarse clock is the one the kernel stamps inodes with; the margin covers filesystems
   * whose timestamps are truncated to a coarser granularity (FAT: 2 s). */
  struct timespec now;
  clock_gettime(CLOCK_REALTIME_COARSE, &now);
  now.tv_sec -= STATCACHE_RACY_MARGIN;
  return now;
}

static void close_dir(struct statcache_writer *w) {
  if (!w->dir_open)
    return;
  struct statcache_dir *d = (struct statcache_dir *)(w->dirs.data + w->dirs.length - sizeof(*d));
  d->count = (uint32_t)(w->n_files - d->first);
  w->dir_open = false;
}

void statcache_writer_dir(struct statcache_writer *w, const char *path, size_t path_len) {
  close_dir(w);
  struct statcache_dir d = {(uint32_t)w->names.length, (uint32_t)path_len, (uint32_t)w->n_files, 0};
  snap_buf_append(&w->names, path, path_len);
  snap_buf_append(&w->dirs, &d, sizeof(d));
  if (!w->dirs.oom) {
    w->n_dirs++;
    w->dir_open = true;
  }
}

void statcache_writer_file(struct statcache_writer *w, const char *name, size_t name_len,
                           const struct snap_stat *st, const unsigned char digest[CAS_DIGEST_LEN],
                           bool trusted) {
  struct statcache_file f = {.name_off = (uint32_t)w->names.length, .name_len = (uint32_t)name_len};
  fill_record(&f, st, digest, trusted);
  snap_buf_append(&w->names, name, name_len);
  snap_buf_append(&w->files, &f, sizeof(f));
  w->n_files++;
}

void statcache_writer_free(struct statcache_writer *w) {
  snap_buf_free(&w->dirs);
  snap_buf_free(&w->files);
  snap_buf_free(&w->names);
  memset(w, 0, sizeof(*w));
}

int statcache_writer_finish(struct statcache_writer *w, uint64_t root_dev, uint64_t root_ino,
                            struct snap_buf *out) {
  close_dir(w);
  struct snap_buf b = {0};
  unsigned char header[HEADER_SIZE];
  uint64_t fields[5] = {root_dev, root_ino, w->n_dirs, w->n_files, w->names.length};
  memcpy(header, STATCACHE_MAGIC, 8);
  memcpy(header + 8, fields, sizeof(fields));
  bool oom = w->dirs.oom || w->files.oom || w->names.oom;
  if (!oom && snap_buf_reserve(&b, HEADER_SIZE + w->dirs.length + w->files.length +
                                       w->names.length + CAS_DIGEST_LEN) == 0) {
    snap_buf_append(&b, header, HEADER_SIZE);
    snap_buf_append(&b, w->dirs.data, w->dirs.length);
    snap_buf_append(&b, w->files.data, w->files.length);
    snap_buf_append(&b, w->names.data, w->names.length);
    unsigned char sum[CAS_DIGEST_LEN];
    if (cas_sha256(b.data, b.length, sum) == 0)
      snap_buf_append(&b, sum, CAS_DIGEST_LEN);
    else
      oom = true;
  }
  statcache_writer_free(w);
  if (oom || b.oom) {
    snap_buf_free(&b);
    return -1;
  }
  *out = b;
  return 0;
}

int statcache_stage(int dirfd, const char *name, const struct snap_buf *bytes, struct fs_temp *t,
                    struct cordon_error **err) {
  if (fs_temp_create(dirfd, name, 0600, t, err) < 0)
    return cordon_error_prefix(err, "stat cache");
  if (fs_write_all(t->fd, bytes->data, bytes->length) < 0) {
    int e = errno;
    fs_temp_discard(t);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "stat cache");
  }
  return 0;
}

int statcache_publish(struct fs_temp *t, const char *name, struct cordon_error **err) {
  /* A cache: atomic (a reader sees the old or the new one), not durable. */
  if (fs_temp_commit(t, name, FS_COMMIT_NO_SYNC, err) < 0)
    return cordon_error_prefix(err, "stat cache");
  return 0;
}
