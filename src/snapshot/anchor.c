/* Anchored, symlink-free opens for the tree walk and for restore. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "snapshot/anchor.h"

static int have_openat2 = -1; /* unknown, then 0 or 1 (atomic: walk threads share it) */

static int open_by_components(int rootfd, const char *path, int flags, unsigned mode) {
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
    int fd;
    if (slash)
      fd = openat(dirfd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    else
      fd = openat(dirfd, comp, flags | O_NOFOLLOW | O_CLOEXEC, mode);
    int saved = errno;
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

int anchor_open(int rootfd, const char *path, int flags, unsigned mode) {
  if (!*path)
    return openat(rootfd, ".", flags | O_CLOEXEC, mode);
  if (__atomic_load_n(&have_openat2, __ATOMIC_RELAXED) != 0 && strlen(path) < PATH_MAX) {
    struct open_how how = {
        .flags = (uint64_t)(flags | O_NOFOLLOW | O_CLOEXEC),
        .mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
    };
    for (int attempt = 0; attempt < 8; attempt++) {
      int fd = (int)syscall(SYS_openat2, rootfd, path, &how, sizeof(how));
      if (fd >= 0) {
        __atomic_store_n(&have_openat2, 1, __ATOMIC_RELAXED);
        return fd;
      }
      if (errno == EPERM && (flags & O_NOATIME))
        return -1; /* a file we do not own: the caller opens it again without O_NOATIME */
      if (errno == ENOSYS || errno == EPERM) {
        /* ENOSYS: an old kernel; EPERM: a seccomp filter that refuses openat2. */
        __atomic_store_n(&have_openat2, 0, __ATOMIC_RELAXED);
        break;
      }
      if (errno != EAGAIN) /* EAGAIN: a concurrent rename, try again */
        return -1;
    }
  }
  return open_by_components(rootfd, path, flags, mode);
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
