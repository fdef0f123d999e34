/* Anchored opens (see anchor.h): openat2 where it works, a component walk where it does not. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/anchor.h"
#include "base/syscalls.h"

/* Unknown (-1), then 0 or 1; atomic: the snapshot walk's threads share it. */
static int have_openat2 = -1;

/* One O_NOFOLLOW component at a time: no symlink is ever followed, ".." is refused (EXDEV). */
static int open_by_components(int rootfd, const char *path, int flags, mode_t mode) {
  int dirfd = fcntl(rootfd, F_DUPFD_CLOEXEC, 3);
  if (dirfd < 0)
    return -1;
  const char *p = path;
  for (;;) {
    const char *slash = strchr(p, '/');
    size_t n = slash ? (size_t)(slash - p) : strlen(p);
    if (n > NAME_MAX) {
      close(dirfd);
      errno = ENAMETOOLONG;
      return -1;
    }
    char comp[NAME_MAX + 1];
    memcpy(comp, p, n);
    comp[n] = 0;
    if (n == 2 && comp[0] == '.' && comp[1] == '.') {
      close(dirfd);
      errno = EXDEV;
      return -1;
    }
    if (!*comp) /* "a//b" or a trailing slash: the same directory, as openat2 reads it */
      comp[0] = '.', comp[1] = 0;
    int fd;
    if (slash)
      fd = openat(dirfd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    else
      fd = openat(dirfd, comp, flags | O_NOFOLLOW | O_CLOEXEC, mode);
    int saved = errno;
    /* A symlink met as a directory (or with O_DIRECTORY) is ENOTDIR here, ELOOP to openat2's
     * RESOLVE_NO_SYMLINKS: say ELOOP, as it does, so that callers name the symlink either way. */
    struct stat st;
    if (fd < 0 && saved == ENOTDIR && fstatat(dirfd, comp, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISLNK(st.st_mode))
      saved = ELOOP;
    close(dirfd);
    if (fd < 0) {
      errno = saved;
      return -1;
    }
    if (!slash)
      return fd;
    dirfd = fd;
    p = slash + 1;
  }
}

/* openat2 with resolve flags; -2 when openat2 cannot be used (an old kernel, a seccomp filter
 * that refuses it, a path too long), so the caller walks components instead. */
static int try_openat2(int rootfd, const char *path, int flags, mode_t mode, uint64_t resolve) {
  if (__atomic_load_n(&have_openat2, __ATOMIC_RELAXED) == 0 || strlen(path) >= PATH_MAX)
    return -2;
  struct open_how how = {
      .flags = (uint64_t)(flags | O_CLOEXEC),
      .mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0,
      .resolve = resolve | RESOLVE_NO_MAGICLINKS,
  };
  for (int attempt = 0; attempt < 8; attempt++) {
    int fd = sys_openat2(rootfd, path, &how);
    if (fd >= 0) {
      __atomic_store_n(&have_openat2, 1, __ATOMIC_RELAXED);
      return fd;
    }
    if (errno == EPERM && (flags & O_NOATIME))
      return -1; /* a file we do not own: the caller opens it again without O_NOATIME */
    if (errno == ENOSYS || errno == EPERM) {
      /* ENOSYS: an old kernel; EPERM: a seccomp filter that refuses openat2. */
      __atomic_store_n(&have_openat2, 0, __ATOMIC_RELAXED);
      return -2;
    }
    if (errno != EAGAIN) /* EAGAIN: a concurrent rename, try again */
      return -1;
  }
  return -2;
}

int anchor_open(int rootfd, const char *path, int flags, mode_t mode) {
  if (!*path)
    return openat(rootfd, ".", flags | O_CLOEXEC, mode);
  int fd =
      try_openat2(rootfd, path, flags | O_NOFOLLOW, mode, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS);
  return fd != -2 ? fd : open_by_components(rootfd, path, flags, mode);
}

int anchor_open_beneath(int rootfd, const char *path, int flags, mode_t mode) {
  if (!*path)
    return openat(rootfd, ".", flags | O_CLOEXEC, mode);
  if (path[0] == '/') {
    errno = EXDEV;
    return -1;
  }
  int fd = try_openat2(rootfd, path, flags, mode, RESOLVE_BENEATH);
  return fd != -2 ? fd : open_by_components(rootfd, path, flags, mode);
}

int anchor_open_parent(int rootfd, const char *path, const char **name) {
  const char *slash = strrchr(path, '/');
  if (!slash) {
    *name = path;
    return openat(rootfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  }
  *name = slash + 1;
  size_t n = (size_t)(slash - path);
  char *dir = malloc(n + 1);
  if (!dir) {
    errno = ENOMEM;
    return -1;
  }
  memcpy(dir, path, n);
  dir[n] = 0;
  int fd = anchor_open(rootfd, dir, O_RDONLY | O_DIRECTORY, 0);
  int saved = errno;
  free(dir);
  errno = saved;
  return fd;
}
