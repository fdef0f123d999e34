/* The escape probe's attacks through paths (probe.c lists the verbs): read, list, write and
 * link what the sandbox must not reach, open a runtime binary for writing, make a device node,
 * move or swap a directory above a protected file, leave a set-id bit or file capabilities on
 * anything made (setid, with modes as its control), outgrow the file-size limit or fill a
 * tmpfs, and rewrite a state file or set an xattr for the host to read later. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <linux/openat2.h>
#include <linux/capability.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "probe.h"

int read_file(const char *path) {
  int fd = open(path, O_RDONLY | O_NONBLOCK);
  if (fd < 0)
    return BLOCK_ERRNO("read-file", path);
  char c;
  ssize_t n = read(fd, &c, 1);
  if (n < 0)
    return BLOCK_ERRNO("read-file", path);
  if (n == 0)
    return verdict(BLOCKED, "read-file", "%s is empty", path);
  return verdict(ESCAPED, "read-file", "read a byte of %s", path);
}

int list_dir(const char *path) {
  DIR *d = opendir(path);
  if (!d)
    return BLOCK_ERRNO("list-dir", path);
  struct dirent *de;
  while ((de = readdir(d)))
    if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
      verdict(ESCAPED, "list-dir", "%s holds %s", path, de->d_name);
      closedir(d);
      return ESCAPED;
    }
  closedir(d);
  return verdict(BLOCKED, "list-dir", "%s is empty", path);
}

int write_file(const char *path) {
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOCTTY, 0644);
  if (fd < 0)
    return BLOCK_ERRNO("write-file", path);
  if (write(fd, "cordon-escape\n", 14) != 14)
    return BLOCK_ERRNO("write-file", path);
  close(fd);
  return verdict(ESCAPED, "write-file", "wrote %s", path);
}

int link_out(const char *target, const char *name) {
  char sym[4096];
  snprintf(sym, sizeof(sym), "%s.sym", name);
  int made_symlink = symlink(target, sym) == 0;
  if (link(target, name) == 0)
    return verdict(ESCAPED, "link-out", "hard-linked %s to %s", name, target);
  /* The symlink is planted for the driver's later checks; making one is not an escape. */
  return verdict(BLOCKED, "link-out", "link %s: %s (symlink %s)", target, strerror(errno),
                 made_symlink ? "planted" : "refused");
}

int write_exe(const char *path) {
  int fd = open(path, O_WRONLY);
  if (fd < 0)
    return BLOCK_ERRNO("write-exe", path);
  close(fd);
  return verdict(ESCAPED, "write-exe", "opened %s for writing", path);
}

int do_mknod(const char *path) {
  if (mknod(path, S_IFCHR | 0666, makedev(1, 3)) == 0) {
    int fd = open(path, O_RDWR);
    unlink(path);
    return verdict(ESCAPED, "mknod", "made a device node%s", fd >= 0 ? " and opened it" : "");
  }
  return BLOCK_ERRNO("mknod", path);
}

/* mkdir -p for the directories of `file` (not the file itself). */
static void make_parents(const char *file) {
  char buf[4096];
  snprintf(buf, sizeof(buf), "%s", file);
  for (char *p = buf + 1; (p = strchr(p, '/')); p++) {
    *p = 0;
    mkdir(buf, 0755);
    *p = '/';
  }
}

static int plant(const char *file) {
  int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0644);
  if (fd < 0)
    return -1;
  ssize_t n = write(fd, "pwned\n", 6);
  close(fd);
  return n == 6 ? 0 : -1;
}

int replace_parent(const char *dir, const char *file) {
  char aside[4096];
  snprintf(aside, sizeof(aside), "%s.aside", dir);
  if (rename(dir, aside) < 0)
    return BLOCK_ERRNO("replace-parent", dir);
  make_parents(file);
  if (plant(file) < 0)
    return verdict(BLOCKED, "replace-parent", "moved %s aside, but cannot write %s: %s", dir, file,
                   strerror(errno));
  return verdict(ESCAPED, "replace-parent", "moved %s aside and wrote %s in its place", dir, file);
}

int exchange_parent(const char *dir, const char *file) {
  /* FILE lies under DIR: the same path under DIR.new */
  char fresh[4096], planted[4096];
  size_t n = strlen(dir);
  if (strncmp(file, dir, n) != 0 || file[n] != '/')
    return verdict(BROKEN, "exchange-parent", "%s is not under %s", file, dir);
  snprintf(fresh, sizeof(fresh), "%s.new", dir);
  snprintf(planted, sizeof(planted), "%s%s", fresh, file + n);
  mkdir(fresh, 0755);
  make_parents(planted);
  if (plant(planted) < 0)
    return verdict(BROKEN, "exchange-parent", "cannot write %s: %s", planted, strerror(errno));
  if (syscall(SYS_renameat2, AT_FDCWD, fresh, AT_FDCWD, dir, 2 /* RENAME_EXCHANGE */) < 0)
    return BLOCK_ERRNO("exchange-parent", dir);
  return verdict(ESCAPED, "exchange-parent", "swapped %s with %s", dir, fresh);
}

/* ---- setid: no set-id bit may survive on anything we make ----------------------------------- */

#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452
#endif
#ifndef SYS_openat2
#define SYS_openat2 437
#endif
#define X32_SYSCALL_BIT 0x40000000L

/* The set-id bits PATH has now (0 when it is gone or cannot be seen). */
static unsigned setid_bits(const char *path) {
  struct stat st;
  return lstat(path, &st) == 0 ? (unsigned)(st.st_mode & (S_ISUID | S_ISGID)) : 0;
}

struct setid_try {
  char what[64];
  char path[PATH_MAX];
  int result; /* what the call returned */
  int errnum;
};

/* A plain file at PATH (our own, 0755), to change the mode of. */
static int setid_fresh(const char *path) {
  unlink(path);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
  if (fd < 0)
    return -1;
  (void)!write(fd, "#!/bin/sh\n", 10);
  return fd;
}

/* chmod(path, mode) through the i386 entry point (int 0x80): the path must sit below 4 GiB, so
 * it is copied into our (non-PIE, static) data segment first. Made in a child, whose exit code
 * carries the answer: without ia32 emulation (ia32_emulation=0) int 0x80 is a SIGSEGV, and
 * gVisor (runsc 20221219 on Linux 6.18) answers a getpid that way but kills a chmod with
 * SIGSEGV. A child killed by a signal means no 32-bit entry point: -1 with ENOSYS. */
static long chmod_int80(const char *path, unsigned mode) {
#if defined(__x86_64__)
  static char low[PATH_MAX];
  snprintf(low, sizeof(low), "%s", path);
  if ((uintptr_t)low > 0xffffffffu) {
    errno = ENOSYS;
    return -1;
  }
  pid_t pid = fork();
  if (pid == 0) {
    long r;
    __asm__ volatile("int $0x80"
                     : "=a"(r)
                     : "a"(15L /* i386 chmod */), "b"((long)(uintptr_t)low), "c"((long)mode)
                     : "memory");
    _exit(r < 0 ? (int)(-r & 0xff) : 0);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status)) {
    errno = ENOSYS;
    return -1;
  }
  if (WEXITSTATUS(status)) {
    errno = WEXITSTATUS(status);
    return -1;
  }
  return 0;
#else
  (void)path;
  (void)mode;
  errno = ENOSYS;
  return -1;
#endif
}

int setid(const char *base) {
  struct setid_try tries[48];
  size_t n = 0;
  static const unsigned modes[] = {04755, 02755};
  for (size_t m = 0; m < 2; m++) {
    unsigned mode = modes[m];
    const char *tag = m ? "g" : "u";
#define TRY(name, call)                                              \
  do {                                                               \
    struct setid_try *t = &tries[n++];                               \
    snprintf(t->what, sizeof(t->what), "%s %04o", name, mode);       \
    snprintf(t->path, sizeof(t->path), "%s.%s-%s", base, name, tag); \
    errno = 0;                                                       \
    t->result = (int)(call);                                         \
    if (t->result >= 0)                                              \
      errno = 0;                                                     \
    t->errnum = errno;                                               \
  } while (0)
    int fd;
    /* change the mode of a file we just wrote */
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s.chmod-%s", base, tag);
    if ((fd = setid_fresh(path)) < 0)
      return verdict(BROKEN, "setid", "cannot create %s: %s", path, strerror(errno));
    close(fd);
    TRY("chmod", chmod(path, mode));
    snprintf(path, sizeof(path), "%s.fchmod-%s", base, tag);
    if ((fd = setid_fresh(path)) < 0)
      return verdict(BROKEN, "setid", "cannot create %s: %s", path, strerror(errno));
    TRY("fchmod", fchmod(fd, mode));
    close(fd);
    snprintf(path, sizeof(path), "%s.fchmodat-%s", base, tag);
    close(setid_fresh(path));
    TRY("fchmodat", fchmodat(AT_FDCWD, path, mode, 0));
    snprintf(path, sizeof(path), "%s.fchmodat2-%s", base, tag);
    close(setid_fresh(path));
    TRY("fchmodat2", syscall(SYS_fchmodat2, AT_FDCWD, path, mode, AT_SYMLINK_NOFOLLOW));
    snprintf(path, sizeof(path), "%s.int80-%s", base, tag);
    close(setid_fresh(path));
    TRY("int80", chmod_int80(path, mode));
    snprintf(path, sizeof(path), "%s.x32-%s", base, tag);
    close(setid_fresh(path));
    TRY("x32", syscall(SYS_chmod | X32_SYSCALL_BIT, path, mode));
    /* the mode given when creating */
    TRY("open", syscall(SYS_open, t->path, O_WRONLY | O_CREAT | O_CLOEXEC, mode));
    TRY("openat", syscall(SYS_openat, AT_FDCWD, t->path, O_WRONLY | O_CREAT | O_CLOEXEC, mode));
    TRY("openat-excl", openat(AT_FDCWD, t->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode));
    TRY("creat", syscall(SYS_creat, t->path, mode));
    struct open_how how = {.flags = O_WRONLY | O_CREAT | O_CLOEXEC, .mode = mode};
    TRY("openat2", syscall(SYS_openat2, AT_FDCWD, t->path, &how, sizeof(how)));
    TRY("mknod", mknod(t->path, S_IFREG | mode, 0));
    TRY("mknodat", mknodat(AT_FDCWD, t->path, S_IFREG | mode, 0));
    /* an unnamed file, made with the mode, then given a name */
    {
      char dir[PATH_MAX];
      snprintf(dir, sizeof(dir), "%s", base);
      char *slash = strrchr(dir, '/');
      if (slash && slash != dir)
        *slash = 0;
      else
        snprintf(dir, sizeof(dir), "%s", slash ? "/" : ".");
      int tmp = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, mode);
      int open_errno = errno;
      char proc[64];
      snprintf(proc, sizeof(proc), "/proc/self/fd/%d", tmp);
      TRY("tmpfile", tmp < 0 ? (errno = open_errno, -1)
                             : linkat(AT_FDCWD, proc, AT_FDCWD, t->path, AT_SYMLINK_FOLLOW));
      if (tmp >= 0)
        close(tmp);
    }
    /* a directory: chmod g+s (u+s) on it, by path and by fd */
    snprintf(path, sizeof(path), "%s.dir-chmod-%s", base, tag);
    rmdir(path);
    if (mkdir(path, 0755) < 0)
      return verdict(BROKEN, "setid", "cannot create %s: %s", path, strerror(errno));
    TRY("dir-chmod", chmod(path, mode));
    snprintf(path, sizeof(path), "%s.dir-fchmod-%s", base, tag);
    rmdir(path);
    mkdir(path, 0755);
    fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    TRY("dir-fchmod", fchmod(fd, mode));
    if (fd >= 0)
      close(fd);
#undef TRY
  }
  /* File capabilities are the other way to make a file that raises privileges: CAP_SETUID in
   * the permitted set of a file we wrote (security.capability, VFS_CAP_REVISION_2). */
  {
    struct vfs_cap_data caps = {.magic_etc = VFS_CAP_REVISION_2 | VFS_CAP_FLAGS_EFFECTIVE};
    caps.data[0].permitted = 1u << CAP_SETUID;
    struct setid_try *t = &tries[n++];
    snprintf(t->what, sizeof(t->what), "setxattr security.capability");
    snprintf(t->path, sizeof(t->path), "%s.fcaps", base);
    close(setid_fresh(t->path));
    errno = 0;
    t->result = setxattr(t->path, "security.capability", &caps, sizeof(caps), 0);
    t->errnum = t->result < 0 ? errno : 0;
    if (t->result == 0 || getxattr(t->path, "security.capability", NULL, 0) > 0)
      return verdict(ESCAPED, "setid", "set file capabilities on %s", t->path);
  }
  /* How they were refused: each distinct answer once, with its count. */
  char summary[512] = "";
  size_t used = 0;
  int seen[48];
  size_t n_seen = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned bits = setid_bits(tries[i].path);
    if (bits)
      return verdict(ESCAPED, "setid", "%s left %s with mode bits %04o (call returned %d)",
                     tries[i].what, tries[i].path, bits, tries[i].result);
    int e = tries[i].result < 0 ? tries[i].errnum : 0;
    bool known = false;
    for (size_t k = 0; k < n_seen; k++)
      known |= seen[k] == e;
    if (known)
      continue;
    seen[n_seen++] = e;
    size_t count = 0;
    for (size_t j = i; j < n; j++)
      count += (tries[j].result < 0 ? tries[j].errnum : 0) == e;
    if (used < sizeof(summary))
      used += (size_t)snprintf(summary + used, sizeof(summary) - used, "%s%zu %s", used ? ", " : "",
                               count, e ? strerror(e) : "bits dropped");
  }
  return verdict(BLOCKED, "setid", "no set-id bit after %zu tries (%s)", n, summary);
}

int modes(const char *base) {
  char path[PATH_MAX + 16], dir[PATH_MAX];
  snprintf(path, sizeof(path), "%s.modes-file", base);
  unlink(path);
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    return verdict(BLOCKED, "modes", "create %s 0600: %s", path, strerror(errno));
  if (fchmod(fd, 0700) < 0 || chmod(path, 0755) < 0)
    return verdict(BLOCKED, "modes", "chmod %s 0755: %s", path, strerror(errno));
  close(fd);
  snprintf(path, sizeof(path), "%s.modes-mknod", base);
  unlink(path);
  if (mknod(path, S_IFREG | 0644, 0) < 0)
    return verdict(BLOCKED, "modes", "mknod %s: %s", path, strerror(errno));
  snprintf(dir, sizeof(dir), "%s.modes-dir", base);
  rmdir(dir);
  if (mkdir(dir, 0755) < 0 || chmod(dir, 01777) < 0)
    return verdict(BLOCKED, "modes", "chmod %s 01777: %s", dir, strerror(errno));
  fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
  char proc[64];
  snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
  snprintf(path, sizeof(path), "%s/tmpfile", dir);
  if (fd < 0 || linkat(AT_FDCWD, proc, AT_FDCWD, path, AT_SYMLINK_FOLLOW) < 0)
    return verdict(BLOCKED, "modes", "O_TMPFILE then linkat %s: %s", path, strerror(errno));
  close(fd);
  struct stat st;
  if (stat(dir, &st) < 0 || (st.st_mode & 07777) != 01777)
    return verdict(BLOCKED, "modes", "%s is not 01777", dir);
  return verdict(ESCAPED, "modes", "ordinary modes work (0600, 0755, 0644, 01777, O_TMPFILE)");
}

/* Make PATH a sparse file of GIB GiB (one byte written at its end, then a truncate to the
 * size): the default RLIMIT_FSIZE must refuse both with EFBIG (SIGXFSZ ignored here, so the
 * verdict is printed rather than the probe killed). The file is removed either way. */
int big_file(const char *path, long gib) {
  signal(SIGXFSZ, SIG_IGN);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOCTTY, 0644);
  if (fd < 0)
    return verdict(BROKEN, "big-file", "open %s: %s", path, strerror(errno));
  off_t size = (off_t)gib << 30;
  bool wrote = pwrite(fd, "x", 1, size - 1) == 1;
  int write_errno = errno;
  bool truncated = ftruncate(fd, size) == 0;
  int truncate_errno = errno;
  close(fd);
  unlink(path);
  if (wrote || truncated)
    return verdict(ESCAPED, "big-file", "made %s %ld GiB (%s)", path, gib,
                   wrote ? "pwrite" : "ftruncate");
  return verdict(BLOCKED, "big-file", "%ld GiB: pwrite: %s, ftruncate: %s", gib,
                 strerror(write_errno), strerror(truncate_errno));
}

int fill_file(const char *path, long mib) {
  static char block[64 * 1024];
  memset(block, 'x', sizeof(block));
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOCTTY | O_CLOEXEC, 0600);
  if (fd < 0)
    return BLOCK_ERRNO("fill-file", path);
  long long want = (long long)mib << 20, done = 0;
  while (done < want) {
    ssize_t n = write(fd, block, sizeof(block));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      int e = n < 0 ? errno : ENOSPC;
      close(fd);
      return verdict(BLOCKED, "fill-file", "%s: stopped after %lld MiB: %s", path, done >> 20,
                     strerror(e));
    }
    done += n;
  }
  close(fd);
  return verdict(ESCAPED, "fill-file", "wrote %ld MiB to %s", mib, path);
}

int rewrite_file(const char *path, int n_pairs, char **pairs) {
  static char buf[1 << 20], next[1 << 20];
  int fd = open(path, O_RDONLY);
  if (fd < 0)
    return BLOCK_ERRNO("rewrite-file", path);
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n < 0)
    return BLOCK_ERRNO("rewrite-file", path);
  buf[n] = 0;
  int replaced = 0;
  for (int i = 0; i + 1 < n_pairs; i += 2) {
    char *at = strstr(buf, pairs[i]);
    if (!at)
      continue; /* a field this state does not have */
    snprintf(next, sizeof(next), "%.*s%s%s", (int)(at - buf), buf, pairs[i + 1],
             at + strlen(pairs[i]));
    memcpy(buf, next, strlen(next) + 1);
    replaced++;
  }
  if (!replaced)
    return verdict(BROKEN, "rewrite-file", "%s holds none of the strings to replace", path);
  fd = open(path, O_WRONLY | O_TRUNC);
  if (fd < 0)
    return BLOCK_ERRNO("rewrite-file", path);
  if (write(fd, buf, strlen(buf)) != (ssize_t)strlen(buf))
    return BLOCK_ERRNO("rewrite-file", path);
  close(fd);
  return verdict(ESCAPED, "rewrite-file", "rewrote %d fields of %s", replaced, path);
}

/* Set an extended attribute on PATH (not following a symlink): a tool for attacks on what is
 * read from a sandbox's tree afterwards (a forged overlay marker, finding 10). "ESCAPED" (0)
 * when the xattr was set. */
int set_xattr(const char *path, const char *name, const char *value) {
  if (lsetxattr(path, name, value, strlen(value), 0) == 0)
    return verdict(ESCAPED, "set-xattr", "%s on %s", name, path);
  return BLOCK_ERRNO("set-xattr", name);
}
