/* Filesystem helpers: atomic writes, bounded reads, anchored opens and safe removal. All fds
 * are O_CLOEXEC; walks inside a tree are anchored at a directory fd. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/anchor.h"
#include "base/cleanup.h"
#include "base/fs.h"

double fs_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int fs_random_bytes(void *buf, size_t length) {
  size_t got = 0;
  while (got < length) {
    ssize_t n = getrandom((char *)buf + got, length - got, 0);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return -1;
    got += (size_t)n;
  }
  return 0;
}

int fs_random_hex(size_t nbytes, char **out, struct cordon_error **err) {
  unsigned char raw[64];
  if (nbytes > sizeof(raw))
    return cordon_error_set(err, CORDON_ERR_SYSTEM, EINVAL, "random id too long");
  if (fs_random_bytes(raw, nbytes) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "getrandom");
  char *hex = malloc(nbytes * 2 + 1);
  if (!hex)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "random id");
  for (size_t i = 0; i < nbytes; i++)
    snprintf(hex + 2 * i, 3, "%02x", raw[i]);
  *out = hex;
  return 0;
}

int fs_pread_all(int fd, void *buf, size_t length, uint64_t offset) {
  size_t got = 0;
  while (got < length) {
    ssize_t n = pread(fd, (char *)buf + got, length - got, (off_t)(offset + got));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return -1;
    got += (size_t)n;
  }
  return 0;
}

int fs_write_all(int fd, const void *data, size_t length) {
  const unsigned char *p = data;
  while (length > 0) {
    ssize_t n = write(fd, p, length);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    p += n;
    length -= (size_t)n;
  }
  return 0;
}

int fs_write_atomic_at(int dirfd, const char *name, const void *data, size_t length, mode_t mode,
                       struct cordon_error **err) {
  return fs_write_replace_at(dirfd, name, data, length, mode, true, err);
}

int fs_temp_create(int dirfd, const char *target, mode_t mode, struct fs_temp *t,
                   struct cordon_error **err) {
  *t = (struct fs_temp)FS_TEMP_INIT;
  unsigned char raw[8];
  if (fs_random_bytes(raw, sizeof(raw)) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "getrandom");
  char suffix[2 * sizeof(raw) + 1];
  for (size_t i = 0; i < sizeof(raw); i++)
    snprintf(suffix + 2 * i, 3, "%02x", raw[i]);
  /* A long target name must not make the temp name too long. */
  int n = snprintf(t->name, sizeof(t->name), ".%s.tmp-%s", target, suffix);
  if (n < 0 || (size_t)n >= sizeof(t->name))
    snprintf(t->name, sizeof(t->name), ".cordon.tmp-%s", suffix);
  t->fd =
      openat(dirfd, t->name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode & 07777);
  if (t->fd < 0) {
    t->name[0] = 0;
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot create a temporary file for %s",
                            target);
  }
  t->dirfd = dirfd;
  if (fchmod(t->fd, mode & 07777) < 0) {
    int e = errno;
    fs_temp_discard(t);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "cannot create %s", target);
  }
  return 0;
}

void fs_temp_discard(struct fs_temp *t) {
  if (t->fd >= 0)
    close(t->fd);
  t->fd = -1;
  if (t->name[0] && t->dirfd >= 0)
    unlinkat(t->dirfd, t->name, 0);
  t->name[0] = 0;
}

int fs_temp_commit(struct fs_temp *t, const char *target, unsigned flags,
                   struct cordon_error **err) {
  bool durable = !(flags & FS_COMMIT_NO_SYNC);
  int saved = 0, written = 1;
  if (durable && fsync(t->fd) < 0)
    saved = errno;
  if (close(t->fd) < 0 && !saved)
    saved = errno;
  t->fd = -1;
  if (!saved && (flags & FS_COMMIT_NO_REPLACE)) {
    /* linkat never replaces: when two writers race, the first one's file stays. */
    if (linkat(t->dirfd, t->name, t->dirfd, target, 0) < 0) {
      if (errno == EEXIST)
        written = 0;
      else
        saved = errno;
    }
  } else if (!saved && renameat(t->dirfd, t->name, t->dirfd, target) == 0) {
    t->name[0] = 0; /* renamed: nothing left to remove */
  } else if (!saved) {
    saved = errno;
  }
  int dirfd = t->dirfd;
  fs_temp_discard(t);
  if (saved)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, saved, "cannot write %s", target);
  /* The name is in place; a failed directory sync only weakens durability, which the caller
   * cannot repair, so it is not an error. */
  if (durable && written)
    fsync(dirfd);
  return written;
}

int fs_write_replace_at(int dirfd, const char *name, const void *data, size_t length, mode_t mode,
                        bool durable, struct cordon_error **err) {
  _cleanup_fs_temp_ struct fs_temp t = FS_TEMP_INIT;
  if (fs_temp_create(dirfd, name, mode, &t, err) < 0)
    return -1;
  if (fs_write_all(t.fd, data, length) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot write %s", name);
  if (fs_temp_commit(&t, name, durable ? 0 : FS_COMMIT_NO_SYNC, err) < 0)
    return -1;
  return 0;
}

int fs_write_atomic(const char *path, const void *data, size_t length, mode_t mode,
                    struct cordon_error **err) {
  _cleanup_free_ char *dir = NULL, *base = NULL;
  fs_split_path(path, &dir, &base);
  if (!dir || !base)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "%s", path);
  _cleanup_close_ int dirfd =
      open(*dir ? dir : (path[0] == '/' ? "/" : "."), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirfd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot open directory of %s", path);
  if (fs_write_atomic_at(dirfd, base, data, length, mode, err) < 0)
    return cordon_error_prefix(err, "%s", dir);
  return 0;
}

int fs_read_fd(int fd, size_t max, unsigned char **data, size_t *length,
               struct cordon_error **err) {
  size_t cap = 4096, len = 0;
  struct stat st;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    if ((uint64_t)st.st_size > max)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, E2BIG, "file larger than %zu bytes", max);
    cap = (size_t)st.st_size + 1;
  }
  _cleanup_free_ unsigned char *buf = malloc(cap);
  if (!buf)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "read");
  for (;;) {
    if (len + 1 >= cap) {
      if (cap > max + 1)
        return cordon_error_set(err, CORDON_ERR_SYSTEM, E2BIG, "file larger than %zu bytes", max);
      size_t ncap = cap * 2;
      unsigned char *grown = realloc(buf, ncap);
      if (!grown)
        return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "read");
      buf = grown;
      cap = ncap;
    }
    ssize_t n = read(fd, buf + len, cap - len - 1);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "read");
    }
    if (n == 0)
      break;
    len += (size_t)n;
    if (len > max)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, E2BIG, "file larger than %zu bytes", max);
  }
  buf[len] = 0;
  *data = steal_ptr(&buf);
  *length = len;
  return 0;
}

int fs_read_file(const char *path, size_t max, unsigned char **data, size_t *length,
                 struct cordon_error **err) {
  _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    return cordon_error_set(err, errno == ENOENT ? CORDON_ERR_NOT_FOUND : CORDON_ERR_SYSTEM, errno,
                            "%s", path);
  if (fs_read_fd(fd, max, data, length, err) < 0)
    return cordon_error_prefix(err, "%s", path);
  return 0;
}

int fs_mkdir_p(const char *path, mode_t mode, struct cordon_error **err) {
  _cleanup_free_ char *copy = strdup(path);
  if (!copy)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "%s", path);
  for (char *p = copy + 1; *p; p++) {
    if (*p != '/')
      continue;
    *p = 0;
    if (mkdir(copy, mode) < 0 && errno != EEXIST)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot create directory %s", copy);
    *p = '/';
  }
  if (mkdir(copy, mode) < 0 && errno != EEXIST)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot create directory %s", copy);
  return 0;
}

void fs_split_path(const char *path, char **dir, char **base) {
  const char *slash = strrchr(path, '/');
  if (!slash) {
    *dir = strdup("");
    *base = strdup(path);
  } else if (slash == path) {
    *dir = strdup("/");
    *base = strdup(slash + 1);
  } else {
    *dir = strndup(path, (size_t)(slash - path));
    *base = strdup(slash + 1);
  }
}

int fs_normalize_relative(const char *path, char **out, struct cordon_error **err) {
  if (!path)
    path = "";
  if (path[0] == '/')
    return cordon_error_set(err, CORDON_ERR_DENIED, 0, "path %s is absolute", path);
  size_t len = strlen(path);
  if (len >= PATH_MAX)
    return cordon_error_set(err, CORDON_ERR_DENIED, ENAMETOOLONG, "path too long");
  char *res = malloc(len + 1);
  if (!res)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "%s", path);
  size_t o = 0;
  const char *p = path;
  while (*p) {
    const char *end = strchrnul(p, '/');
    size_t n = (size_t)(end - p);
    if (n == 2 && p[0] == '.' && p[1] == '.') {
      free(res);
      return cordon_error_set(err, CORDON_ERR_DENIED, 0, "path %s leaves the workspace (..)", path);
    }
    if (n > 0 && !(n == 1 && p[0] == '.')) {
      if (o > 0)
        res[o++] = '/';
      memcpy(res + o, p, n);
      o += n;
    }
    p = *end ? end + 1 : end;
  }
  res[o] = 0;
  *out = res;
  return 0;
}

int fs_open_beneath(int rootfd, const char *relpath, int flags, mode_t mode, const char *label,
                    struct cordon_error **err) {
  _cleanup_free_ char *norm = NULL;
  if (fs_normalize_relative(relpath, &norm, err) < 0)
    return -1;
  int fd = anchor_open_beneath(rootfd, norm, flags, mode);
  if (fd < 0) {
    int e = errno;
    if (e == EXDEV || e == ELOOP)
      return cordon_error_set(err, CORDON_ERR_DENIED, 0,
                              "path %s resolves outside %s (symlink or ..)", relpath, label);
    return cordon_error_set(err, e == ENOENT ? CORDON_ERR_NOT_FOUND : CORDON_ERR_SYSTEM, e,
                            "%s in %s", relpath, label);
  }
  return fd;
}

int fs_mkdirs_beneath(int rootfd, const char *relpath, const char *label,
                      struct cordon_error **err) {
  _cleanup_free_ char *norm = NULL;
  if (fs_normalize_relative(relpath, &norm, err) < 0)
    return -1;
  int dirfd = fcntl(rootfd, F_DUPFD_CLOEXEC, 3);
  if (dirfd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "%s", label);
  char *save = NULL;
  for (char *comp = strtok_r(norm, "/", &save); comp; comp = strtok_r(NULL, "/", &save)) {
    if (mkdirat(dirfd, comp, 0755) < 0 && errno != EEXIST) {
      int e = errno;
      close(dirfd);
      return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "cannot create %s in %s", relpath, label);
    }
    int fd = openat(dirfd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int e = errno;
    close(dirfd);
    if (fd < 0) {
      if (e == ELOOP || e == ENOTDIR)
        return cordon_error_set(err, CORDON_ERR_DENIED, 0,
                                "path %s in %s crosses a symlink or a non-directory", relpath,
                                label);
      return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "%s in %s", relpath, label);
    }
    dirfd = fd;
  }
  return dirfd;
}

static int remove_contents(int dirfd, struct cordon_error **err) {
  int fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
  if (fd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "dup");
  _cleanup_closedir_ DIR *d = fdopendir(fd);
  if (!d) {
    close(fd);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "fdopendir");
  }
  struct dirent *de;
  while ((errno = 0, de = readdir(d))) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
      continue;
    if (fs_remove_tree_at(dirfd, de->d_name, err) < 0)
      return -1;
  }
  if (errno)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "readdir");
  return 0;
}

static int chown_tree_at(int dirfd, uid_t uid, gid_t gid, int depth);

/* One entry of fs_chown_tree's walk: its type and whether something is mounted on it, without
 * following it (one statx: d_type may be DT_UNKNOWN, and says nothing of mounts). */
static int chown_entry(int dirfd, const char *name, uid_t uid, gid_t gid, int depth) {
  struct statx stx;
  if (statx(dirfd, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, STATX_TYPE, &stx) < 0)
    return -1;
  if ((stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) &&
      (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT)) {
    errno = EXDEV; /* another file system's (or a bind mount's) owner is not ours to change */
    return -1;
  }
  if (!S_ISDIR(stx.stx_mode))
    return fchownat(dirfd, name, uid, gid, AT_SYMLINK_NOFOLLOW);
  _cleanup_close_ int sub = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  return sub < 0 ? -1 : chown_tree_at(sub, uid, gid, depth + 1);
}

static int chown_tree_at(int dirfd, uid_t uid, gid_t gid, int depth) {
  if (depth > FS_CHOWN_TREE_MAX_DEPTH) {
    errno = ELOOP;
    return -1;
  }
  if (fchown(dirfd, uid, gid) < 0)
    return -1;
  int fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
  if (fd < 0)
    return -1;
  _cleanup_closedir_ DIR *d = fdopendir(fd);
  if (!d) {
    close(fd);
    return -1;
  }
  struct dirent *de;
  while ((errno = 0, de = readdir(d))) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
      continue;
    if (chown_entry(dirfd, de->d_name, uid, gid, depth) < 0)
      return -1;
  }
  return errno ? -1 : 0;
}

int fs_chown_tree(int dirfd, uid_t uid, gid_t gid) {
  return chown_tree_at(dirfd, uid, gid, 0);
}

int fs_remove_tree_at(int dirfd, const char *name, struct cordon_error **err) {
  if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT)
    return 0;
  if (errno != EISDIR && errno != EPERM)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot remove %s", name);
  _cleanup_close_ int sub = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (sub < 0) {
    if (errno == ENOENT)
      return 0;
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot open %s", name);
  }
  /* A read-only directory must become writable before its entries can go. */
  struct stat st;
  if (fstat(sub, &st) == 0 && (st.st_mode & 0700) != 0700)
    fchmod(sub, st.st_mode | 0700);
  if (remove_contents(sub, err) < 0)
    return cordon_error_prefix(err, "%s", name);
  if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot remove %s", name);
  return 0;
}

int fs_remove_tree(const char *path, struct cordon_error **err) {
  _cleanup_free_ char *dir = NULL, *base = NULL;
  fs_split_path(path, &dir, &base);
  if (!dir || !base)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "%s", path);
  _cleanup_close_ int dirfd =
      open(*dir ? dir : (path[0] == '/' ? "/" : "."), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirfd < 0)
    return errno == ENOENT ? 0 : cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "%s", path);
  if (fs_remove_tree_at(dirfd, base, err) < 0)
    return cordon_error_prefix(err, "%s", dir);
  return 0;
}

void fs_boot_id(char *out, size_t size) {
  if (size == 0)
    return;
  out[0] = 0;
  int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return;
  ssize_t n = read(fd, out, size - 1);
  close(fd);
  out[n > 0 ? n : 0] = 0;
  out[strcspn(out, "\n")] = 0;
}

bool fs_dir_has_entries(const char *path) {
  DIR *d = opendir(path);
  if (!d)
    return errno != ENOENT;
  bool used = false;
  for (struct dirent *e; !used && (e = readdir(d));)
    used = strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
  closedir(d);
  return used;
}

void fs_close_reset(int *fd) {
  if (*fd >= 0)
    close(*fd);
  *fd = -1;
}

int fs_set_nonblocking(int fd) {
  int flags = fcntl(fd, F_GETFL);
  return flags < 0 ? -1 : fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}
