/* Path policy, file-system half (see resolve.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "confine/policy.h"
#include "confine/resolve.h"

void confine_path_clear(struct confine_path *p) {
  if (!p)
    return;
  free(p->path);
  free(p->source);
  free(p->link);
  p->path = p->source = p->link = NULL;
}

void confine_paths_free(struct confine_path *paths, size_t count) {
  for (size_t i = 0; paths && i < count; i++)
    confine_path_clear(&paths[i]);
  free(paths);
}

char *confine_fd_path(int fd) {
  char link[64];
  snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
  char buf[PATH_MAX];
  ssize_t n = readlink(link, buf, sizeof(buf) - 1);
  if (n < 0)
    return NULL;
  buf[n] = 0;
  return strdup(buf);
}

static enum confine_kind kind_of(mode_t mode, bool *ok) {
  *ok = S_ISDIR(mode) || S_ISREG(mode);
  return S_ISDIR(mode) ? CONFINE_KIND_DIR : CONFINE_KIND_FILE;
}

int confine_resolve_workspace_path(int ws_fd, const char *ws_real, const char *path,
                                   const char *what, struct confine_path *out,
                                   struct cordon_error **err) {
  struct open_how how = {
      .flags = O_PATH | O_CLOEXEC,
      .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
  };
  _cleanup_close_ int fd = (int)syscall(SYS_openat2, ws_fd, path, &how, sizeof(how));
  if (fd < 0) {
    int e = errno;
    if (e == EXDEV || e == ELOOP)
      return cordon_error_set(err, CORDON_ERR_DENIED, 0,
                              "%s %s resolves outside the workspace (symlink)", what, path);
    return cordon_error_set(err, e == ENOENT ? CORDON_ERR_NOT_FOUND : CORDON_ERR_SYSTEM, e, "%s %s",
                            what, path);
  }
  struct stat st;
  if (fstat(fd, &st) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "%s %s", what, path);
  bool ok;
  enum confine_kind kind = kind_of(st.st_mode, &ok);
  if (!ok)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                            "%s %s is neither a regular file nor a directory", what, path);
  _cleanup_free_ char *real = confine_fd_path(fd);
  if (!real)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "%s %s", what, path);
  size_t wl = strlen(ws_real);
  if (strncmp(real, ws_real, wl) != 0 || real[wl] != '/' || !real[wl + 1])
    return cordon_error_set(err, CORDON_ERR_DENIED, 0,
                            "%s %s resolves to the workspace root or outside it", what, path);
  out->path = strdup(real + wl + 1);
  if (!out->path)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "%s", what);
  out->kind = kind;
  return 0;
}

int confine_resolve_host_path(const char *path, bool system, bool optional, const char *what,
                              struct confine_path *out, bool *present, struct cordon_error **err) {
  if (present)
    *present = true;
  struct stat st;
  if (lstat(path, &st) < 0) {
    if (errno == ENOENT && optional) {
      if (present)
        *present = false;
      return 0;
    }
    return cordon_error_set(err, errno == ENOENT ? CORDON_ERR_NOT_FOUND : CORDON_ERR_SYSTEM, errno,
                            "%s %s", what, path);
  }
  if (system && S_ISLNK(st.st_mode)) {
    char buf[PATH_MAX];
    ssize_t n = readlink(path, buf, sizeof(buf) - 1);
    if (n < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "%s %s", what, path);
    buf[n] = 0;
    out->path = strdup(path);
    out->link = strdup(buf);
    out->kind = CONFINE_KIND_SYMLINK;
    if (!out->path || !out->link)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "%s", what);
    return 0;
  }
  char real[PATH_MAX];
  if (!realpath(path, real) || stat(real, &st) < 0) {
    if (errno == ENOENT && optional) {
      if (present)
        *present = false;
      return 0;
    }
    return cordon_error_set(err, errno == ENOENT ? CORDON_ERR_NOT_FOUND : CORDON_ERR_SYSTEM, errno,
                            "%s %s", what, path);
  }
  bool ok;
  out->kind = kind_of(st.st_mode, &ok);
  if (!ok)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                            "%s %s is neither a regular file nor a directory", what, path);
  out->path = strdup(path);
  out->source = strdup(real);
  if (!out->path || !out->source)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "%s", what);
  return 0;
}
