/* Host-side workspace files. Every open resolves beneath the workspace directory fd (openat2
 * RESOLVE_BENEATH), so "..", absolute paths and symlinks that lead out are refused at the
 * moment of use, not at a separate check a swapped-in symlink could race. Writes go to a temp
 * file in the target directory and are renamed over the final name, so a symlink planted at the
 * final name is replaced, never written through. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cordon/cas.h>
#include <cordon/snapshot.h>

#include "protocol/workspace.h"
#include "base/cleanup.h"
#include "base/fs.h"

static int open_workspace(const char *workspace, struct cordon_error **err) {
  int fd = open(workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return cordon_error_set(err, errno == ENOENT ? CORDON_ERR_NOT_FOUND : CORDON_ERR_SYSTEM, errno,
                            "workspace %s", workspace);
  return fd;
}

int workspace_read(const char *workspace, const char *path, unsigned char **data, size_t *length,
                   struct cordon_error **err) {
  _cleanup_close_ int root = open_workspace(workspace, err);
  if (root < 0)
    return -1;
  /* O_NONBLOCK: a FIFO planted in the workspace must not hang the reader. */
  _cleanup_close_ int fd =
      fs_open_beneath(root, path, O_RDONLY | O_NOCTTY | O_NONBLOCK, 0, "the workspace", err);
  if (fd < 0)
    return -1;
  struct stat st;
  if (fstat(fd, &st) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "%s", path);
  if (S_ISDIR(st.st_mode))
    return cordon_error_set(err, CORDON_ERR_INVALID, EISDIR, "%s", path);
  if (!S_ISREG(st.st_mode))
    return cordon_error_set(err, CORDON_ERR_DENIED, 0, "%s is not a regular file", path);
  if (fs_read_fd(fd, WORKSPACE_READ_MAX, data, length, err) < 0)
    return cordon_error_prefix(err, "%s", path);
  return 0;
}

int workspace_write(const char *workspace, const char *path, const void *data, size_t length,
                    unsigned mode, struct cordon_error **err) {
  _cleanup_free_ char *norm = NULL;
  if (fs_normalize_relative(path, &norm, err) < 0)
    return -1;
  if (!*norm)
    return cordon_error_set(err, CORDON_ERR_INVALID, EISDIR, "cannot write the workspace root");
  _cleanup_close_ int root = open_workspace(workspace, err);
  if (root < 0)
    return -1;
  _cleanup_free_ char *dir = NULL, *base = NULL;
  fs_split_path(norm, &dir, &base);
  if (!dir || !base)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "%s", path);
  /* Parents are created one component at a time without following symlinks. */
  _cleanup_close_ int dirfd = fs_mkdirs_beneath(root, dir, "the workspace", err);
  if (dirfd < 0)
    return -1;
  struct stat st;
  if (fstatat(dirfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
    return cordon_error_set(err, CORDON_ERR_INVALID, EISDIR, "%s", path);
  if (fs_write_atomic_at(dirfd, base, data, length, mode ? mode : 0644, err) < 0)
    return cordon_error_prefix(err, "workspace");
  return 0;
}

static int compare_dirents(const void *a, const void *b) {
  return strcmp(((const struct cordon_dirent *)a)->name, ((const struct cordon_dirent *)b)->name);
}

int workspace_ls(const char *workspace, const char *path, struct cordon_dirent **entries,
                 size_t *count, struct cordon_error **err) {
  _cleanup_close_ int root = open_workspace(workspace, err);
  if (root < 0)
    return -1;
  int fd = fs_open_beneath(root, path, O_RDONLY | O_DIRECTORY, 0, "the workspace", err);
  if (fd < 0)
    return -1;
  _cleanup_closedir_ DIR *d = fdopendir(fd);
  if (!d) {
    int e = errno;
    close(fd);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "%s", path);
  }
  struct cordon_dirent *list = NULL;
  size_t n = 0, cap = 0;
  struct dirent *de;
  while ((errno = 0, de = readdir(d))) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
      continue;
    struct stat st;
    if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
      continue; /* removed while listing */
    if (n == cap) {
      cap = cap ? cap * 2 : 16;
      struct cordon_dirent *grown = realloc(list, cap * sizeof(*list));
      if (!grown) {
        cordon_dirents_free(list, n);
        return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "%s", path);
      }
      list = grown;
    }
    struct cordon_dirent *e = &list[n];
    e->name = strdup(de->d_name);
    if (!e->name) {
      cordon_dirents_free(list, n);
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "%s", path);
    }
    e->kind = S_ISREG(st.st_mode)   ? CORDON_KIND_FILE
              : S_ISDIR(st.st_mode) ? CORDON_KIND_DIRECTORY
              : S_ISLNK(st.st_mode) ? CORDON_KIND_SYMLINK
                                    : CORDON_KIND_OTHER;
    e->mode = st.st_mode & 07777;
    e->size = (uint64_t)st.st_size;
    n++;
  }
  if (errno) {
    int e = errno;
    cordon_dirents_free(list, n);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "%s", path);
  }
  if (n > 1)
    qsort(list, n, sizeof(*list), compare_dirents);
  *entries = list;
  *count = n;
  return 0;
}

int workspace_write_manifest_files(const char *workspace, const struct cordon_manifest *m,
                                   struct cordon_error **err) {
  for (size_t i = 0; i < m->n_files; i++) {
    const struct cordon_file_spec *f = &m->files[i];
    if (workspace_write(workspace, f->path, f->content, f->length, f->mode, err) < 0)
      return cordon_error_prefix(err, "manifest file %s", f->path);
  }
  return 0;
}

int workspace_snapshot(struct cordon_session *s, const char *const *exclude, char **snapshot_id,
                       struct cordon_error **err) {
  const char *const aliases[] = {s->root, NULL};
  struct cordon_snapshot_options o = {
      .root_aliases = aliases, .exclude = exclude, .max_bytes = s->max_snapshot_bytes};
  struct cordon_cas *cas = NULL;
  if (cordon_cas_open_project(s->ctx, &cas, err) < 0)
    return -1;
  char id[CORDON_DIGEST_HEX_SIZE];
  int r = cordon_snapshot_take(cas, s->workspace, &o, id, NULL, err);
  cordon_cas_close(cas);
  if (r < 0)
    return -1;
  *snapshot_id = strdup(id);
  return *snapshot_id ? 0 : cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "snapshot");
}

int workspace_restore(struct cordon_session *s, const char *snapshot_id, const char *dir,
                      struct cordon_error **err) {
  struct cordon_cas *cas = NULL;
  if (cordon_cas_open_project(s->ctx, &cas, err) < 0)
    return -1;
  int r = cordon_snapshot_restore(cas, snapshot_id, dir, NULL, err);
  cordon_cas_close(cas);
  return r;
}
