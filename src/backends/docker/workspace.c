/* The docker backend's workspace, a host directory bind-mounted into the container: making it
 * (given, fresh, or restored from a snapshot), giving a restored one to the sandbox's user,
 * the host-side read, write and ls beneath it (protocol/workspace.c), and snapshots of it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/docker/internal.h"
#include "backends/docker/workspace.h"
#include "base/cleanup.h"
#include "base/fs.h"
#include "confine/policy.h"
#include "protocol/workspace.h"

/* The workspace: the given directory, or a fresh one in the session's state directory (empty,
 * or restored from a snapshot, every blob verified); then the manifest's files on top. */
int docker_prepare_workspace(struct cordon_session *s, const struct cordon_manifest *m,
                             const char *snapshot_id, const char *const *private_dirs, bool *owned,
                             struct cordon_error **err) {
  char resolved[PATH_MAX];
  *owned = !m->workspace;
  if (snapshot_id && m->workspace)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                            "a session resumed from a snapshot gets a fresh workspace; a "
                            "workspace cannot be given too");
  if (m->workspace) {
    struct stat st;
    if (!realpath(m->workspace, resolved) || stat(resolved, &st) < 0)
      return cordon_error_set(err, CORDON_ERR_NOT_FOUND, errno, "workspace %s", m->workspace);
    if (!S_ISDIR(st.st_mode))
      return cordon_error_set(err, CORDON_ERR_USAGE, ENOTDIR, "workspace %s", m->workspace);
    if (confine_check_not_private(resolved, "workspace", private_dirs, err) < 0)
      return -1;
    s->workspace = strdup(resolved);
  } else {
    _cleanup_free_ char *dir = NULL;
    if (asprintf(&dir, "%s/workspace", s->state_dir) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "workspace");
    if (snapshot_id) {
      if (workspace_restore(s, snapshot_id, dir, err) < 0)
        return -1;
    } else if (mkdir(dir, 0755) < 0 || chmod(dir, 0755) < 0) { /* not umask's */
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot create %s", dir);
    }
    /* The engine mounts real paths: resolve any symlink in the project's own path. */
    if (!realpath(dir, resolved))
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "workspace %s", dir);
    s->workspace = strdup(resolved);
  }
  if (!s->workspace)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "workspace");
  return workspace_write_manifest_files(s->workspace, m, err);
}

/* Chown the directory dirfd and everything below it to uid:gid, anchored at dirfd: no link is
 * followed, no other file system entered. Returns 0 or an errno value. */
static int chown_tree(int dirfd, dev_t dev, uid_t uid, gid_t gid, unsigned depth) {
  if (depth > 4096)
    return ELOOP;
  if (fchown(dirfd, uid, gid) < 0)
    return errno;
  int fd = dup(dirfd);
  DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
  if (!d) {
    int e = errno;
    if (fd >= 0)
      close(fd);
    return e;
  }
  int r = 0;
  struct dirent *de;
  while (r == 0 && (errno = 0, de = readdir(d))) {
    const char *n = de->d_name;
    if (n[0] == '.' && (!n[1] || (n[1] == '.' && !n[2])))
      continue;
    struct stat st;
    if (fstatat(dirfd, n, &st, AT_SYMLINK_NOFOLLOW) < 0) {
      r = errno;
    } else if (S_ISDIR(st.st_mode)) {
      if (st.st_dev != dev)
        continue;
      int sub = openat(dirfd, n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      r = sub < 0 ? errno : chown_tree(sub, dev, uid, gid, depth + 1);
      if (sub >= 0)
        close(sub);
    } else if (fchownat(dirfd, n, uid, gid, AT_SYMLINK_NOFOLLOW) < 0) {
      r = errno;
    }
  }
  if (r == 0 && errno)
    r = errno;
  closedir(d);
  return r;
}

int docker_give_workspace(const char *dir, struct cordon_error **err) {
  /* The sandbox user, the same uid and gid as on ns (confine/policy.h). */
  uid_t uid = CONFINE_SANDBOX_UID;
  _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  int r =
      fd < 0 || fstat(fd, &st) < 0 ? errno : chown_tree(fd, st.st_dev, uid, CONFINE_SANDBOX_GID, 0);
  if (r)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, r,
                            "cannot give the workspace %s to the sandbox's user %u", dir,
                            (unsigned)uid);
  return 0;
}

/* The workspace as it is now, into the project's store. The container keeps running: a command
 * writing meanwhile may or may not make it in, as with any live tree. */
int docker_snapshot(struct cordon_session *s, char **snapshot_id, struct cordon_error **err) {
  return workspace_snapshot(s, NULL, snapshot_id, err);
}

/* ---- files ------------------------------------------------------------------------------------
 */

int docker_read(struct cordon_session *s, const char *path, unsigned char **data, size_t *length,
                struct cordon_error **err) {
  return workspace_read(s->workspace, path, data, length, err);
}

/* A workspace cordon made (created or restored) and gave to the sandbox's user: what the
 * host writes there goes to that user too, or the sandbox could not change it. Every
 * component of path (anchored at the workspace, no link followed) that root owns was made by
 * the host, since the whole tree was given away. */
static int give_written(struct cordon_session *s, const char *path, struct cordon_error **err) {
  _cleanup_json_ json_t *o = s->backend_state ? json_loads(s->backend_state, 0, NULL) : NULL;
  if (geteuid() != 0 || !json_is_true(json_object_get(o, "owned_workspace")))
    return 0;
  _cleanup_free_ char *norm = NULL;
  if (fs_normalize_relative(path, &norm, err) < 0)
    return -1;
  int fd = open(s->workspace, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct stat root;
  if (fd < 0 || fstat(fd, &root) < 0) {
    int e = errno;
    if (fd >= 0)
      close(fd);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "workspace %s", s->workspace);
  }
  if (root.st_uid == 0) {
    close(fd);
    return 0;
  }
  int r = 0;
  for (char *name = norm, *next; r == 0 && name && *name; name = next) {
    next = strchr(name, '/');
    if (next)
      *next++ = 0;
    int sub = openat(fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (sub < 0 || fstat(sub, &st) < 0)
      r = cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "workspace %s", path);
    else if (st.st_uid == 0 &&
             fchownat(sub, "", root.st_uid, root.st_gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
      r = cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot give %s to the sandbox's user",
                           path);
    close(fd);
    fd = sub;
  }
  if (fd >= 0)
    close(fd);
  return r;
}

int docker_write(struct cordon_session *s, const char *path, const void *data, size_t length,
                 unsigned mode, struct cordon_error **err) {
  if (workspace_write(s->workspace, path, data, length, mode, err) < 0)
    return -1;
  return give_written(s, path, err);
}

int docker_ls(struct cordon_session *s, const char *path, struct cordon_dirent **entries,
              size_t *count, struct cordon_error **err) {
  return workspace_ls(s->workspace, path, entries, count, err);
}
