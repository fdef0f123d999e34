/* Removing a directory tree after this process has gone (see remove-detached.h).
 *
 * On a file system mounted with `discard` (ext4 here), each freed block is trimmed before
 * rmdir or unlink returns: about a millisecond per directory, several for a one-shot session's
 * three (its own, the workspace, the home), which a `cordon run` would otherwise pay between
 * the command's end and its own exit. The tree is moved out of sight by one rename, and a
 * process that shares our memory (no copy, no exec) removes it while we exit. It makes only
 * raw system calls on its own stack: it runs beside our exit, whose allocator and stdio it
 * must not touch. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/detached.h"
#include "base/fs.h"
#include "base/remove-detached.h"

/* The remover's stack and how deep it goes: deeper trees are left to `cordon gc`. */
#define REMOVER_STACK_SIZE (512 * 1024)
#define REMOVER_MAX_DEPTH 96
#define REMOVER_DIRENT_BUF 2048

struct remover {
  int dirfd; /* the trash directory */
  char name[64];
};

#define raw detached_raw

DETACHED_CODE static int remove_entry(int dirfd, const char *name, int depth);

/* Every entry of the open directory fd, until a pass finds none. */
DETACHED_CODE static int remove_contents(int fd, int depth) {
  char buf[REMOVER_DIRENT_BUF];
  for (;;) {
    long n = raw(SYS_getdents64, fd, (long)buf, sizeof(buf), 0);
    if (n < 0)
      return -1;
    if (n == 0)
      return 0;
    for (long off = 0; off < n;) {
      /* struct linux_dirent64: d_reclen (little-endian) at 16, d_name at 19 */
      unsigned reclen = (unsigned char)buf[off + 16] | (unsigned)(unsigned char)buf[off + 17] << 8;
      const char *entry = buf + off + 19;
      off += reclen;
      if (entry[0] == '.' && (!entry[1] || (entry[1] == '.' && !entry[2])))
        continue;
      if (remove_entry(fd, entry, depth + 1) < 0)
        return -1;
    }
  }
}

DETACHED_CODE static int remove_entry(int dirfd, const char *name, int depth) {
  if (raw(SYS_unlinkat, dirfd, (long)name, 0, 0) == 0)
    return 0;
  if (depth > REMOVER_MAX_DEPTH)
    return -1;
  long fd = raw(SYS_openat, dirfd, (long)name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
  if (fd < 0)
    return -1;
  /* A read-only directory must become writable before its entries can go. */
  struct stat st;
  if (raw(SYS_fstat, fd, (long)&st, 0, 0) == 0 && (st.st_mode & 0700) != 0700)
    raw(SYS_fchmod, fd, (long)(st.st_mode | 0700), 0, 0);
  int r = remove_contents((int)fd, depth);
  raw(SYS_close, fd, 0, 0, 0);
  if (r == 0 && raw(SYS_unlinkat, dirfd, (long)name, AT_REMOVEDIR, 0) < 0)
    r = -1;
  return r;
}

DETACHED_CODE static int remover_main(void *arg) {
  const struct remover *rm = arg;
  /* Out of the caller's session (its process group it has left already, see below: setsid
   * fails for a group leader, and either is enough). No fd but the trash directory: nobody
   * waits on our output. What a removal cut short leaves is `cordon gc`'s. */
  raw(SYS_setsid, 0, 0, 0, 0);
  /* Background work, behind the caller's next command: the lowest priority of the ordinary
   * policy (never a real-time one inherited from the caller), which still makes progress on
   * a busy host. Its time goes mostly to waiting for the disk anyway. */
  struct sched_param normal = {0};
  raw(SYS_sched_setscheduler, 0, SCHED_OTHER, (long)&normal, 0);
  raw(SYS_setpriority, PRIO_PROCESS, 0, 19, 0);
  if (rm->dirfd > 0)
    raw(SYS_close_range, 0, (long)rm->dirfd - 1, 0, 0);
  raw(SYS_close_range, (long)rm->dirfd + 1, ~0U, 0, 0);
  remove_entry(rm->dirfd, rm->name, 0);
  raw(SYS_exit, 0, 0, 0, 0);
  return 0;
}

int fs_remove_tree_detached(const char *path, const char *trash, struct cordon_error **err) {
  _cleanup_free_ char *dir = NULL, *base = NULL;
  fs_split_path(path, &dir, &base);
  if (!dir || !*dir || !base || !*base || strlen(base) >= sizeof(((struct remover *)0)->name))
    return fs_remove_tree(path, err);
  if (mkdir(trash, 0700) < 0 && errno != EEXIST)
    return fs_remove_tree(path, err);
  _cleanup_close_ int trash_fd = open(trash, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  _cleanup_close_ int parent_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (trash_fd < 0 || parent_fd < 0)
    return fs_remove_tree(path, err);
  if (renameat(parent_fd, base, trash_fd, base) < 0)
    return errno == ENOENT ? 0 : fs_remove_tree(path, err);
  /* Out of sight now: whatever happens next, the path is free and `cordon gc` empties the
   * trash. Only SIGKILL stops the remover (it keeps every signal blocked). */
  struct detached child;
  struct remover *rm = detached_map(&child, sizeof(*rm), REMOVER_STACK_SIZE);
  pid_t pid = -1;
  if (rm) {
    rm->dirfd = trash_fd;
    snprintf(rm->name, sizeof(rm->name), "%s", base);
    pid = detached_start(&child, remover_main, rm);
  }
  if (pid < 0)
    return fs_remove_tree_at(trash_fd, base, err) < 0 ? cordon_error_prefix(err, "%s", trash) : 0;
  return 0;
}
