/* Mount setup (see mount.h). Runs in the holder, in its new user + mount + pid namespaces,
 * before anything untrusted exists; every host tree is taken as a detached clone first, so the
 * staging mount cannot hide a source and no later path lookup can be redirected. */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/anchor.h"
#include "base/cleanup.h"
#include "base/fs.h"
#include "base/strv.h"
#include "base/syscalls.h"
#include "confine/devices.h"
#include "confine/mount.h"
#include "confine/policy.h"

#define LABEL "the sandbox root"

/* confine_tree_prepare of path at dirfd; flags (open_tree's) AT_EMPTY_PATH clones dirfd
 * itself, a directory a volume opened and checked beforehand. source names it in errors. */
static int tree_clone_at(int dirfd, const char *path, unsigned flags, const char *source,
                         uint64_t attr_set, int userns_fd, struct cordon_error **err) {
  int fd = sys_open_tree(dirfd, path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | flags);
  if (fd < 0)
    return cordon_error_set(err, errno == ENOENT ? CORDON_ERR_NOT_FOUND : CORDON_ERR_SYSTEM, errno,
                            "cannot clone the mount of %s", source);
  struct confine_mount_attr attr = {.attr_set = attr_set};
  if (userns_fd >= 0) {
    attr.attr_set |= MOUNT_ATTR_IDMAP;
    attr.userns_fd = (uint64_t)userns_fd;
  }
  if (sys_mount_setattr(fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr) < 0) {
    int e = errno;
    close(fd);
    if (userns_fd >= 0 && (e == EINVAL || e == EOPNOTSUPP || e == EPERM))
      return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, e,
                              "cannot make an id-mapped mount of %s (its file system may not "
                              "support idmapped mounts)",
                              source);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "cannot set the mount flags of %s", source);
  }
  return fd;
}

int confine_tree_prepare(const char *source, uint64_t attr_set, int userns_fd,
                         struct cordon_error **err) {
  return tree_clone_at(AT_FDCWD, source, 0, source, attr_set, userns_fd, err);
}

int confine_overlay_prepare(const char *lower_dir, int lower_userns_fd, const char *upper_dir,
                            const char *work_dir, struct cordon_error **err) {
  _cleanup_close_ int lower = confine_tree_prepare(
      lower_dir, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, lower_userns_fd, err);
  if (lower < 0)
    return -1;
  _cleanup_close_ int upper = open(upper_dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  _cleanup_close_ int work = open(work_dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (upper < 0 || work < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "overlay layer %s",
                            upper < 0 ? upper_dir : work_dir);
  _cleanup_close_ int fs = sys_fsopen("overlay", FSOPEN_CLOEXEC);
  /* Only ENODEV says the kernel lacks overlayfs (or ENOSYS, the new mount API); anything else,
   * out of descriptors for one, is a plain failure, not a missing mechanism. */
  if (fs < 0 && (errno == ENODEV || errno == ENOSYS))
    return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, errno, "the kernel has no overlayfs");
  if (fs < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot open an overlay file system");
  const char *step = "lowerdir+";
  if (sys_fsconfig(fs, FSCONFIG_SET_FD, "lowerdir+", NULL, lower) < 0 ||
      (step = "upperdir", sys_fsconfig(fs, FSCONFIG_SET_FD, "upperdir", NULL, upper) < 0) ||
      (step = "workdir", sys_fsconfig(fs, FSCONFIG_SET_FD, "workdir", NULL, work) < 0) ||
      (step = "create", sys_fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)) {
    int e = errno;
    return cordon_error_set(err, e == EINVAL ? CORDON_ERR_UNAVAILABLE : CORDON_ERR_SYSTEM, e,
                            "overlayfs over %s (%s): layers by fd need Linux 6.13", lower_dir,
                            step);
  }
  int mnt = sys_fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
  if (mnt < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot mount the overlay of %s",
                            lower_dir);
  return mnt;
}

int confine_volume_prepare(const char *source, bool writable, int userns_fd,
                           struct cordon_error **err) {
  _cleanup_close_ int slash = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  _cleanup_close_ int dir =
      slash < 0 || source[0] != '/' ? -1 : anchor_open(slash, source + 1, O_PATH | O_DIRECTORY, 0);
  if (dir < 0)
    return cordon_error_set(err, errno == ENOENT ? CORDON_ERR_NOT_FOUND : CORDON_ERR_DENIED, errno,
                            "volume source %s cannot be opened without following a symlink",
                            source);
  /* Nothing renamed into its place since it was checked: the fd names that very path. */
  char link[64], real[4096];
  snprintf(link, sizeof(link), "/proc/self/fd/%d", dir);
  ssize_t n = readlink(link, real, sizeof(real) - 1);
  if (n < 0 || (real[n] = 0, strcmp(real, source) != 0))
    return cordon_error_set(err, CORDON_ERR_DENIED, 0, "volume source %s moved", source);
  /* Cloned from that fd, not by its path again, which could be swapped for a symlink now. */
  uint64_t attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (writable ? 0 : MOUNT_ATTR_RDONLY);
  int fd = tree_clone_at(dir, "", AT_EMPTY_PATH, source, attr_set, userns_fd, err);
  return fd < 0 ? cordon_error_prefix(err, "volume") : fd;
}

int confine_root_prepare_trees(struct confine_root_spec *spec, struct cordon_error **err) {
  const uint64_t ro = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
  for (size_t i = 0; i < spec->n_trees; i++) {
    struct confine_tree *t = &spec->trees[i];
    if (t->link || t->tree_fd >= 0)
      continue;
    t->tree_fd = confine_tree_prepare(t->source, ro, -1, err);
    if (t->tree_fd < 0)
      return -1;
  }
  if (spec->workspace.tree_fd < 0) {
    spec->workspace.tree_fd =
        confine_tree_prepare(spec->workspace.source, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, -1, err);
    if (spec->workspace.tree_fd < 0)
      return cordon_error_prefix(err, "workspace");
  }
  for (size_t i = 0; i < spec->n_volumes; i++) {
    struct confine_tree *v = &spec->volumes[i];
    if (v->tree_fd < 0 &&
        (v->tree_fd = confine_volume_prepare(v->source, v->writable, -1, err)) < 0)
      return -1;
  }
  for (size_t i = 0; i < spec->n_devices; i++) {
    struct confine_tree *d = &spec->devices[i];
    if (d->tree_fd < 0 && (d->tree_fd = confine_device_prepare(d->source, err)) < 0)
      return -1;
  }
  if (spec->home.target && spec->home.tree_fd < 0) {
    spec->home.tree_fd =
        confine_tree_prepare(spec->home.source, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, -1, err);
    if (spec->home.tree_fd < 0)
      return cordon_error_prefix(err, "home");
  }
  return 0;
}

/* Create the mount point `target` (absolute, inside the new root) and return an fd of its
 * parent directory with *base pointing at the last component. */
static int make_mountpoint(int rootfd, const char *target, bool is_dir, const char **base,
                           struct cordon_error **err) {
  const char *rel = target;
  while (*rel == '/')
    rel++;
  const char *slash = strrchr(rel, '/');
  _cleanup_free_ char *dir = slash ? strndup(rel, (size_t)(slash - rel)) : strdup("");
  if (!dir)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "%s", target);
  *base = slash ? slash + 1 : rel;
  int dfd = fs_mkdirs_beneath(rootfd, dir, LABEL, err);
  if (dfd < 0)
    return -1;
  int r;
  if (is_dir) {
    r = mkdirat(dfd, *base, 0755);
    if (r < 0 && errno == EEXIST)
      r = 0;
  } else {
    r = openat(dfd, *base, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0444);
    if (r >= 0)
      r = close(r);
  }
  if (r < 0) {
    int e = errno;
    close(dfd);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "cannot create mount point %s", target);
  }
  return dfd;
}

static int attach_tree(int rootfd, const struct confine_tree *t, int tree_fd,
                       struct cordon_error **err) {
  const char *base = NULL;
  _cleanup_close_ int dfd = make_mountpoint(rootfd, t->target, t->is_dir, &base, err);
  if (dfd < 0)
    return -1;
  if (sys_move_mount(tree_fd, "", dfd, base, MOVE_MOUNT_F_EMPTY_PATH) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot mount %s at %s",
                            t->source ? t->source : "a tree", t->target);
  return 0;
}

static int make_symlink(int rootfd, const struct confine_tree *t, struct cordon_error **err) {
  const char *rel = t->target;
  while (*rel == '/')
    rel++;
  const char *slash = strrchr(rel, '/');
  _cleanup_free_ char *dir = slash ? strndup(rel, (size_t)(slash - rel)) : strdup("");
  if (!dir)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "%s", t->target);
  _cleanup_close_ int dfd = fs_mkdirs_beneath(rootfd, dir, LABEL, err);
  if (dfd < 0)
    return -1;
  if (symlinkat(t->link, dfd, slash ? slash + 1 : rel) < 0 && errno != EEXIST)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot create symlink %s", t->target);
  return 0;
}

static int mount_fs_at(int dirfd, const char *name, const char *fstype, unsigned long flags,
                       const char *data, struct cordon_error **err) {
  char path[64];
  /* mount(2) takes a path: reach the directory through its fd, never by a name that could be
   * looked up differently. */
  _cleanup_close_ int fd = openat(dirfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot open mount point /%s", name);
  snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
  if (mount(fstype, path, fstype, flags, data) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot mount %s on /%s", fstype, name);
  return 0;
}

static int set_attr_at(int dirfd, const char *name, uint64_t set, bool recursive,
                       struct cordon_error **err) {
  struct confine_mount_attr attr = {.attr_set = set};
  unsigned flags =
      (recursive ? AT_RECURSIVE : 0) | AT_SYMLINK_NOFOLLOW | (*name ? 0 : AT_EMPTY_PATH);
  if (sys_mount_setattr(dirfd, name, flags, &attr) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot set mount flags of /%s", name);
  return 0;
}

/* Cover dirfd/name with a recursive clone of itself: read-only, or with the flags it has (a
 * clone keeps nosuid, nodev and the id mapping of its source). */
static int bind_self(int dirfd, const char *name, bool read_only, struct cordon_error **err) {
  _cleanup_close_ int tree = sys_open_tree(dirfd, name,
                                           OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE |
                                               (*name ? 0 : AT_EMPTY_PATH));
  if (tree < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot clone %s", name);
  if (read_only && set_attr_at(tree, "", MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                               true, err) < 0)
    return -1;
  if (sys_move_mount(tree, "", dirfd, name,
                     MOVE_MOUNT_F_EMPTY_PATH | (*name ? 0 : MOVE_MOUNT_T_EMPTY_PATH)) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot cover %s%s", name,
                            read_only ? " read-only" : " with itself");
  return 0;
}

static int bind_self_readonly(int dirfd, const char *name, struct cordon_error **err) {
  return bind_self(dirfd, name, true, err);
}

/* The options of a /tmp or /dev/shm tmpfs: capped, or tmpfs would take half the host's memory.
 * Its pages are charged to the memory cgroup of whoever writes them. */
static int tmpfs_options(char *buf, size_t size, uint64_t bytes, struct cordon_error **err) {
  if (!bytes)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "no size for the sandbox's /tmp");
  snprintf(buf, size, "mode=1777,size=%llu", (unsigned long long)bytes);
  return 0;
}

/* A granted device node at its target beneath /dev (parents made in the /dev tmpfs). */
static int bind_device(int dev, const struct confine_tree *d, struct cordon_error **err) {
  const char *rel = d->target + strlen("/dev/");
  const char *slash = strrchr(rel, '/');
  _cleanup_free_ char *dir = slash ? strndup(rel, (size_t)(slash - rel)) : strdup("");
  if (!dir)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "%s", d->target);
  _cleanup_close_ int parent = fs_mkdirs_beneath(dev, dir, "the sandbox's /dev", err);
  if (parent < 0)
    return -1;
  const char *base = slash ? slash + 1 : rel;
  int fd = openat(parent, base, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0444);
  if (fd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot create %s", d->target);
  close(fd);
  if (sys_move_mount(d->tree_fd, "", parent, base, MOVE_MOUNT_F_EMPTY_PATH) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot mount device %s at %s",
                            d->source, d->target);
  return 0;
}

static int setup_dev(int rootfd, const struct confine_root_spec *spec, struct cordon_error **err) {
  uint64_t tmp_bytes = spec->tmp_bytes;
  static const char *const nodes[] = {"null", "zero", "full", "random", "urandom"};
  static const char *const links[][2] = {
      {"fd", "/proc/self/fd"},
      {"stdin", "/proc/self/fd/0"},
      {"stdout", "/proc/self/fd/1"},
      {"stderr", "/proc/self/fd/2"},
  };
  if (mkdirat(rootfd, "dev", 0755) < 0 && errno != EEXIST)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot create /dev");
  if (mount_fs_at(rootfd, "dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k", err) < 0)
    return -1;
  _cleanup_close_ int dev = openat(rootfd, "dev", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dev < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot open /dev");
  for (size_t i = 0; i < ARRAY_SIZE(nodes); i++) {
    char host[32];
    snprintf(host, sizeof(host), "/dev/%s", nodes[i]);
    int fd = openat(dev, nodes[i], O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0444);
    if (fd < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot create /dev/%s", nodes[i]);
    close(fd);
    _cleanup_close_ int tree = sys_open_tree(AT_FDCWD, host, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
    if (tree < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot clone %s", host);
    if (sys_move_mount(tree, "", dev, nodes[i], MOVE_MOUNT_F_EMPTY_PATH) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot mount %s", host);
  }
  for (size_t i = 0; i < ARRAY_SIZE(links); i++)
    if (symlinkat(links[i][1], dev, links[i][0]) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot create /dev/%s", links[i][0]);
  if (mkdirat(dev, "shm", 01777) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot create /dev/shm");
  char options[64];
  if (tmpfs_options(options, sizeof(options), tmp_bytes, err) < 0 ||
      mount_fs_at(dev, "shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, options, err) < 0)
    return -1;
  for (size_t i = 0; i < spec->n_devices; i++)
    if (bind_device(dev, &spec->devices[i], err) < 0)
      return -1;
  /* Device binds keep their device access but lose suid/exec; the /dev tmpfs itself becomes
   * read-only so nothing can be planted there. */
  if (set_attr_at(dev, "", MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, true, err) < 0 ||
      set_attr_at(dev, "", MOUNT_ATTR_RDONLY, false, err) < 0)
    return cordon_error_prefix(err, "/dev");
  return 0;
}

static int setup_proc(int rootfd, bool deny_user_namespaces, struct cordon_error **err) {
  if (mkdirat(rootfd, "proc", 0555) < 0 && errno != EEXIST)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot create /proc");
  /* hidepid=2: processes the command may not ptrace (pid 1, the runtime's own, not dumpable)
   * are invisible, their command lines included. */
  if (mount_fs_at(rootfd, "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=2", err) < 0)
    return -1;
  _cleanup_close_ int proc = openat(rootfd, "proc", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (proc < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot open /proc");
  if (deny_user_namespaces) {
    /* Defence in depth behind seccomp: this namespace may create no further user namespaces.
     * The knob is per user namespace; we own ours. Best effort: seccomp is the real gate. */
    int fd = openat(proc, "sys/user/max_user_namespaces", O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
      (void)!write(fd, "0\n", 2);
      close(fd);
    }
  }
  /* What the kernel exposes for writing to a namespace's root stays read-only. */
  static const char *const ro[] = {"sys", "sysrq-trigger", "irq", "bus"};
  for (size_t i = 0; i < ARRAY_SIZE(ro); i++) {
    if (faccessat(proc, ro[i], F_OK, AT_SYMLINK_NOFOLLOW) < 0)
      continue;
    if (bind_self_readonly(proc, ro[i], err) < 0)
      return cordon_error_prefix(err, "/proc");
  }
  return 0;
}

/* Open `path` beneath the mounted workspace with no symlink anywhere: the policy was resolved
 * to canonical paths before, so a symlink here means something changed since. */
static int open_policy_path(int wsfd, const char *path, struct cordon_error **err) {
  int fd = anchor_open(wsfd, path, O_PATH, 0);
  if (fd < 0)
    return cordon_error_set(
        err, errno == ELOOP || errno == EXDEV ? CORDON_ERR_DENIED : CORDON_ERR_SYSTEM, errno,
        "policy path %s changed before it could be applied", path);
  return fd;
}

/* An empty tmpfs (mode 0555, 4k) over pfd; returns the mask's mount fd. Read-only from the
 * start unless `writable`: then the caller makes mount points in it and freezes it. */
static int mask_mount(int pfd, const char *path, bool writable, struct cordon_error **err) {
  _cleanup_close_ int fs = sys_fsopen("tmpfs", FSOPEN_CLOEXEC);
  if (fs < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "fsopen tmpfs");
  if (sys_fsconfig(fs, FSCONFIG_SET_STRING, "mode", "0555", 0) < 0 ||
      sys_fsconfig(fs, FSCONFIG_SET_STRING, "size", "4k", 0) < 0 ||
      sys_fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot create a tmpfs to hide %s",
                            path);
  uint64_t attr = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC;
  int mnt = sys_fsmount(fs, FSMOUNT_CLOEXEC, writable ? attr : attr | MOUNT_ATTR_RDONLY);
  if (mnt < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot mount a tmpfs to hide %s", path);
  if (sys_move_mount(mnt, "", pfd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0) {
    int e = errno;
    close(mnt);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "cannot hide %s", path);
  }
  return mnt;
}

static int mask_dir(int pfd, const char *path, struct cordon_error **err) {
  int mnt = mask_mount(pfd, path, false, err);
  if (mnt < 0)
    return -1;
  close(mnt);
  return 0;
}

#define EMPTY_FILE ".cordon-empty"
#define PASSWD_FILE ".cordon-passwd"
#define GROUP_FILE ".cordon-group"

static int mask_file(int rootfd, int pfd, const char *path, struct cordon_error **err) {
  _cleanup_close_ int tree = sys_open_tree(rootfd, EMPTY_FILE, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
  if (tree < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot clone the empty file");
  if (set_attr_at(tree, "",
                  MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
                  false, err) < 0)
    return -1;
  if (sys_move_mount(tree, "", pfd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot hide %s", path);
  return 0;
}

static int write_file_at(int dirfd, const char *name, const char *content, mode_t mode,
                         struct cordon_error **err) {
  _cleanup_close_ int fd =
      openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot create /%s", name);
  size_t len = content ? strlen(content) : 0;
  if (len && write(fd, content, len) != (ssize_t)len)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno ? errno : EIO, "cannot write /%s", name);
  return 0;
}

/* Bind rootfd/src (a file in the new root) over the existing file `target`. */
static int bind_file_over(int rootfd, const char *src, const char *target,
                          struct cordon_error **err) {
  _cleanup_close_ int tree = sys_open_tree(rootfd, src, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
  if (tree < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot clone /%s", src);
  if (set_attr_at(tree, "",
                  MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
                  false, err) < 0)
    return -1;
  if (sys_move_mount(tree, "", rootfd, target, MOVE_MOUNT_F_EMPTY_PATH) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot mount over /%s", target);
  return 0;
}

/* A read-only path shown inside the mask of the hidden directory above it: a recursive clone of
 * the real path (opened beneath the workspace with no symlink, before the mask covers it),
 * read-only, nosuid, nodev, and where it goes in the mask. */
struct reshown {
  const char *inner; /* relative to the hidden directory */
  int tree_fd;
  bool is_dir;
};

static int clone_readonly(int ws, const char *path, struct reshown *out,
                          struct cordon_error **err) {
  _cleanup_close_ int pfd = open_policy_path(ws, path, err);
  struct stat st;
  if (pfd < 0)
    return -1;
  if (fstat(pfd, &st) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "%s", path);
  out->is_dir = S_ISDIR(st.st_mode);
  out->tree_fd =
      sys_open_tree(pfd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_EMPTY_PATH);
  if (out->tree_fd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot clone %s", path);
  return set_attr_at(out->tree_fd, "", MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                     true, err);
}

static void reshown_free(struct reshown *r, size_t n) {
  for (size_t i = 0; r && i < n; i++)
    if (r[i].tree_fd >= 0)
      close(r[i].tree_fd);
  free(r);
}

/* Hide the directory `path` (pfd) and show inside its mask, read-only, the read-only paths that
 * lie beneath it: their mount points are made while the mask is still writable, then the mask
 * is frozen. A mount point cannot be renamed or removed (EBUSY), and the mask around it is
 * read-only, so nothing inside can carry a shown path away or put anything beside it. */
static int hide_dir(int ws, int pfd, const char *path, const char *const *ro_paths,
                    struct cordon_error **err) {
  size_t n = 0, len = strlen(path);
  for (size_t i = 0; ro_paths && ro_paths[i]; i++)
    n += confine_reshown(ro_paths[i], (const char *const[]){path, NULL});
  if (n == 0)
    return mask_dir(pfd, path, err);
  struct reshown *shown = calloc(n, sizeof(*shown));
  if (!shown)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "%s", path);
  for (size_t i = 0; i < n; i++)
    shown[i].tree_fd = -1;
  int r = 0;
  for (size_t i = 0, k = 0; ro_paths[i] && r == 0; i++) {
    if (!confine_reshown(ro_paths[i], (const char *const[]){path, NULL}))
      continue;
    shown[k].inner = ro_paths[i] + len + 1;
    if (clone_readonly(ws, ro_paths[i], &shown[k++], err) < 0)
      r = cordon_error_prefix(err, "read-only path %s", ro_paths[i]);
  }
  _cleanup_close_ int mnt = r < 0 ? -1 : mask_mount(pfd, path, true, err);
  if (mnt < 0)
    r = -1;
  for (size_t i = 0; i < n && r == 0; i++) {
    const char *base = NULL;
    _cleanup_close_ int dfd = make_mountpoint(mnt, shown[i].inner, shown[i].is_dir, &base, err);
    if (dfd < 0 || sys_move_mount(shown[i].tree_fd, "", dfd, base, MOVE_MOUNT_F_EMPTY_PATH) < 0)
      r = dfd < 0 ? -1
                  : cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot show %s/%s inside %s",
                                     path, shown[i].inner, path);
  }
  if (r == 0 && set_attr_at(mnt, "", MOUNT_ATTR_RDONLY, false, err) < 0)
    r = cordon_error_prefix(err, "hidden path %s", path);
  reshown_free(shown, n);
  return r;
}

/* Pin every directory between the workspace root and a read-only or hidden path: each becomes a
 * mount point (a clone of itself: read-write, with the workspace's flags and id mapping), which
 * the kernel refuses to rename, remove or replace (EBUSY). Without this, `mv .git x; mkdir -p
 * .git/hooks` inside would carry `--ro .git/hooks` away and leave the sandbox's files at the
 * protected host path. Parents first, so each clone carries the pins made before it. */
static int pin_ancestors(int ws, const struct confine_root_spec *spec, struct cordon_error **err) {
  char **dirs = NULL;
  if (confine_protected_ancestors(spec->ro_paths, spec->hidden_dirs, spec->hidden_files, &dirs,
                                  err) < 0)
    return -1;
  int r = 0;
  for (size_t i = 0; dirs[i] && r == 0; i++) {
    _cleanup_close_ int pfd = open_policy_path(ws, dirs[i], err);
    if (pfd < 0 || bind_self(pfd, "", false, err) < 0)
      r = cordon_error_prefix(err, "directory %s above a protected path", dirs[i]);
  }
  strv_free(dirs);
  return r;
}

static int apply_workspace_policy(int rootfd, const struct confine_root_spec *spec,
                                  struct cordon_error **err) {
  const char *rel = spec->workspace.target;
  while (*rel == '/')
    rel++;
  _cleanup_close_ int ws = openat(rootfd, rel, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (ws < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot open the workspace at %s",
                            spec->workspace.target);
  if (pin_ancestors(ws, spec, err) < 0)
    return -1;
  /* Read-only first, so hidden paths inside a read-only tree mask the read-only copy. */
  for (size_t i = 0; spec->ro_paths && spec->ro_paths[i]; i++) {
    if (confine_reshown(spec->ro_paths[i], spec->hidden_dirs))
      continue; /* shown inside its hidden directory's mask, below */
    _cleanup_close_ int pfd = open_policy_path(ws, spec->ro_paths[i], err);
    if (pfd < 0 || bind_self_readonly(pfd, "", err) < 0)
      return cordon_error_prefix(err, "read-only path %s", spec->ro_paths[i]);
  }
  for (size_t i = 0; spec->hidden_dirs && spec->hidden_dirs[i]; i++) {
    _cleanup_close_ int pfd = open_policy_path(ws, spec->hidden_dirs[i], err);
    if (pfd < 0 || hide_dir(ws, pfd, spec->hidden_dirs[i], spec->ro_paths, err) < 0)
      return -1;
  }
  if (spec->hidden_files && spec->hidden_files[0]) {
    if (write_file_at(rootfd, EMPTY_FILE, NULL, 0444, err) < 0)
      return -1;
    for (size_t i = 0; spec->hidden_files[i]; i++) {
      _cleanup_close_ int pfd = open_policy_path(ws, spec->hidden_files[i], err);
      if (pfd < 0 || mask_file(rootfd, pfd, spec->hidden_files[i], err) < 0)
        return -1;
    }
    /* The masks keep the inode; the name in the root goes. */
    unlinkat(rootfd, EMPTY_FILE, 0);
  }
  return 0;
}

static int setup_identity_files(int rootfd, const struct confine_root_spec *spec,
                                struct cordon_error **err) {
  if (!spec->passwd || faccessat(rootfd, "etc/passwd", F_OK, AT_SYMLINK_NOFOLLOW) < 0)
    return 0;
  if (write_file_at(rootfd, PASSWD_FILE, spec->passwd, 0444, err) < 0 ||
      bind_file_over(rootfd, PASSWD_FILE, "etc/passwd", err) < 0)
    return -1;
  unlinkat(rootfd, PASSWD_FILE, 0);
  if (spec->group && faccessat(rootfd, "etc/group", F_OK, AT_SYMLINK_NOFOLLOW) == 0) {
    if (write_file_at(rootfd, GROUP_FILE, spec->group, 0444, err) < 0 ||
        bind_file_over(rootfd, GROUP_FILE, "etc/group", err) < 0)
      return -1;
    unlinkat(rootfd, GROUP_FILE, 0);
  }
  return 0;
}

int confine_build_root(const struct confine_root_spec *spec, struct cordon_error **err) {
  /* Nothing we mount may propagate back to the host (the kernel already makes the copied
   * mounts slaves, as our user namespace is new; say so explicitly). */
  if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot make / a slave mount");
  if (mount("tmpfs", spec->staging, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m") < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot mount the new root on %s",
                            spec->staging);
  _cleanup_close_ int rootfd = open(spec->staging, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (rootfd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot open the new root");

  /* What the sandbox provides first: grants may land under /tmp. */
  if (setup_dev(rootfd, spec, err) < 0 || setup_proc(rootfd, spec->deny_user_namespaces, err) < 0)
    return -1;
  if (mkdirat(rootfd, "tmp", 01777) < 0 && errno != EEXIST)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot create /tmp");
  char tmp_options[64];
  if (tmpfs_options(tmp_options, sizeof(tmp_options), spec->tmp_bytes, err) < 0 ||
      mount_fs_at(rootfd, "tmp", "tmpfs", MS_NOSUID | MS_NODEV, tmp_options, err) < 0)
    return -1;
  for (size_t i = 0; i < spec->n_trees; i++) {
    const struct confine_tree *t = &spec->trees[i];
    int r = t->link ? make_symlink(rootfd, t, err) : attach_tree(rootfd, t, t->tree_fd, err);
    if (r < 0)
      return -1;
  }
  for (size_t i = 0; spec->hidden_host_dirs && spec->hidden_host_dirs[i]; i++) {
    const char *rel = spec->hidden_host_dirs[i];
    while (*rel == '/')
      rel++;
    _cleanup_close_ int pfd = anchor_open(rootfd, rel, O_PATH, 0);
    /* Gone, or out of our reach (a 0700 directory of a user our namespace does not map): the
     * sandbox, whose credentials are a subset of ours, cannot reach it either. */
    if (pfd < 0 && (errno == ENOENT || errno == EACCES))
      continue;
    if (pfd < 0)
      return cordon_error_set(err, CORDON_ERR_DENIED, errno,
                              "cordon's state at %s changed before it could be hidden",
                              spec->hidden_host_dirs[i]);
    if (mask_dir(pfd, spec->hidden_host_dirs[i], err) < 0)
      return -1;
  }
  /* HOME before the workspace: a workspace root beneath it stays the workspace. */
  if (spec->home.target && attach_tree(rootfd, &spec->home, spec->home.tree_fd, err) < 0)
    return -1;
  if (attach_tree(rootfd, &spec->workspace, spec->workspace.tree_fd, err) < 0 ||
      apply_workspace_policy(rootfd, spec, err) < 0 || setup_identity_files(rootfd, spec, err) < 0)
    return -1;
  /* Last, recursively: the pins and masks inside are covered too. */
  if (spec->workspace_read_only) {
    const char *ws = spec->workspace.target;
    while (*ws == '/')
      ws++;
    if (set_attr_at(rootfd, ws, MOUNT_ATTR_RDONLY, true, err) < 0)
      return cordon_error_prefix(err, "read-only workspace");
  }
  /* Volumes last: their targets lie outside every tree above, in the root's own tmpfs. */
  for (size_t i = 0; i < spec->n_volumes; i++)
    if (attach_tree(rootfd, &spec->volumes[i], spec->volumes[i].tree_fd, err) < 0)
      return -1;

  /* pivot_root(".", ".") stacks the old root on the new one; detaching it leaves only ours. */
  if (fchdir(rootfd) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot enter the new root");
  if (sys_pivot_root(".", ".") < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "pivot_root");
  if (umount2(".", MNT_DETACH) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot detach the old root");
  if (chdir("/") < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "chdir /");
  /* The root tmpfs holds only mount points now: freeze it. */
  if (set_attr_at(AT_FDCWD, "/", MOUNT_ATTR_RDONLY, false, err) < 0)
    return -1;
  return 0;
}
