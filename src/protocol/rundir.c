/* A session's private runtime directory: see rundir.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "protocol/rundir.h"
#include "base/cleanup.h"
#include "base/fs.h"
#include "base/private-dirs.h"
#include "base/strv.h"
#include "crypto/digest.h"

#define OWNER_FILE "owner"
#define OWNER_MAX 8192

int rundir_name(const char *project_state_dir, const char *session_id,
                char out[RUNDIR_NAME_LEN + 1], struct cordon_error **err) {
  size_t a = strlen(project_state_dir), b = strlen(session_id);
  _cleanup_free_ char *buf = malloc(a + 1 + b);
  if (!buf)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "runtime directory");
  memcpy(buf, project_state_dir, a);
  buf[a] = 0;
  memcpy(buf + a + 1, session_id, b);
  uint8_t digest[CRYPTO_SHA256_LEN];
  if (crypto_sha256(buf, a + 1 + b, digest, err) < 0)
    return -1;
  crypto_hex_encode(digest, RUNDIR_NAME_LEN / 2, out);
  return 0;
}

int rundir_path(const char *project_state_dir, const char *session_id, const char *file, char **out,
                struct cordon_error **err) {
  char name[RUNDIR_NAME_LEN + 1];
  _cleanup_free_ char *base = NULL;
  if (rundir_name(project_state_dir, session_id, name, err) < 0 ||
      private_runtime_dir(&base, err) < 0)
    return -1;
  if (asprintf(out, "%s/%s%s%s", base, name, file ? "/" : "", file ? file : "") < 0) {
    *out = NULL;
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "runtime directory");
  }
  return 0;
}

/* Ours and private: owned by the effective uid, no group or other bits. */
static int check_private(int fd, const char *what, const char *path, bool dir,
                         struct cordon_error **err) {
  struct stat st;
  if (fstat(fd, &st) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "%s %s", what, path);
  if (dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))
    return cordon_error_set(err, CORDON_ERR_DENIED, 0, "%s %s is not a %s: refused", what, path,
                            dir ? "directory" : "regular file");
  if (st.st_uid != geteuid())
    return cordon_error_set(err, CORDON_ERR_DENIED, 0,
                            "%s %s is owned by uid %u, not by the current user (uid %u): refused",
                            what, path, (unsigned)st.st_uid, (unsigned)geteuid());
  if (st.st_mode & 077)
    return cordon_error_set(err, CORDON_ERR_DENIED, 0,
                            "%s %s has mode %04o: group and other access is refused (chmod %s %s)",
                            what, path, (unsigned)(st.st_mode & 07777), dir ? "700" : "600", path);
  return 0;
}

/* The runtime directory itself, made when missing, checked always. */
static int open_base(bool create, char **path, struct cordon_error **err) {
  if (private_runtime_dir(path, err) < 0)
    return -1;
  if (create && fs_mkdir_p(*path, 0700, err) < 0)
    return cordon_error_prefix(err, "runtime directory");
  int fd = open(*path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT)
      return cordon_error_set(err, CORDON_ERR_NOT_FOUND, 0, "runtime directory %s does not exist",
                              *path);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "runtime directory %s", *path);
  }
  if (check_private(fd, "runtime directory", *path, true, err) < 0) {
    close(fd);
    return -1;
  }
  return fd;
}

int rundir_create(const char *project_state_dir, const char *session_id, int *dirfd,
                  struct cordon_error **err) {
  char name[RUNDIR_NAME_LEN + 1];
  if (rundir_name(project_state_dir, session_id, name, err) < 0)
    return -1;
  _cleanup_free_ char *base = NULL;
  _cleanup_close_ int base_fd = open_base(true, &base, err);
  if (base_fd < 0)
    return -1;
  /* mkdir fails on anything already there: a directory planted ahead is never adopted. */
  if (mkdirat(base_fd, name, 0700) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot create %s/%s", base, name);
  int fd = openat(base_fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "%s/%s", base, name);
  _cleanup_free_ char *owner = NULL;
  int n = asprintf(&owner, "%s\n%s\n", project_state_dir, session_id);
  if (n < 0) {
    owner = NULL;
    close(fd);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "runtime directory");
  }
  if (rundir_write_private(fd, OWNER_FILE, owner, (size_t)n, err) < 0) {
    close(fd);
    return -1;
  }
  *dirfd = fd;
  return 0;
}

int rundir_open(const char *project_state_dir, const char *session_id, int *dirfd,
                struct cordon_error **err) {
  _cleanup_free_ char *path = NULL;
  if (rundir_path(project_state_dir, session_id, NULL, &path, err) < 0)
    return -1;
  int fd = open(path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT)
      return cordon_error_set(err, CORDON_ERR_NOT_FOUND, 0,
                              "the session's runtime directory %s is gone", path);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "runtime directory %s", path);
  }
  if (check_private(fd, "runtime directory", path, true, err) < 0) {
    close(fd);
    return -1;
  }
  *dirfd = fd;
  return 0;
}

int rundir_remove(const char *project_state_dir, const char *session_id,
                  struct cordon_error **err) {
  _cleanup_free_ char *path = NULL;
  struct cordon_error *path_err = NULL;
  /* No runtime directory can be named here: none was made here either. */
  if (rundir_path(project_state_dir, session_id, NULL, &path, &path_err) < 0) {
    cordon_error_free(path_err);
    return 0;
  }
  return fs_remove_tree(path, err);
}

int rundir_write_private(int dirfd, const char *name, const void *data, size_t length,
                         struct cordon_error **err) {
  _cleanup_close_ int fd =
      openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot create private file %s", name);
  if (fs_write_all(fd, data, length) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot write private file %s", name);
  return 0;
}

int rundir_read_private(int dirfd, const char *name, size_t max, unsigned char **data,
                        size_t *length, struct cordon_error **err) {
  _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT)
      return cordon_error_set(err, CORDON_ERR_NOT_FOUND, 0, "private file %s is missing", name);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "private file %s", name);
  }
  if (check_private(fd, "private file", name, false, err) < 0)
    return -1;
  if (fs_read_fd(fd, max, data, length, err) < 0)
    return cordon_error_prefix(err, "private file %s", name);
  return 0;
}

/* Whether the session named by an owner file ("<state dir>\n<id>\n") still has its directory
 * (a malformed owner file names none); *dir_out gets that directory. */
static bool owner_alive(const unsigned char *text, size_t length, char **dir_out) {
  _cleanup_free_ char *copy = strndup((const char *)text, length);
  if (!copy)
    return true;
  char *nl = strchr(copy, '\n');
  if (!nl || copy[0] != '/')
    return false;
  *nl = 0;
  char *id = nl + 1;
  char *end = strchr(id, '\n');
  if (end)
    *end = 0;
  if (!*id || strchr(id, '/'))
    return false;
  _cleanup_free_ char *dir = NULL;
  if (asprintf(&dir, "%s/sessions/%s", copy, id) < 0)
    return true;
  struct stat st;
  bool alive = !(lstat(dir, &st) < 0 && errno == ENOENT);
  *dir_out = steal_ptr(&dir);
  return alive;
}

int rundir_gc(bool dry_run, char ***gone, struct cordon_error **err) {
  *gone = calloc(1, sizeof(char *));
  if (!*gone)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "gc");
  _cleanup_free_ char *base = NULL;
  struct cordon_error *open_err = NULL;
  _cleanup_close_ int base_fd = open_base(false, &base, &open_err);
  if (base_fd < 0) {
    bool missing = open_err->kind == CORDON_ERR_NOT_FOUND;
    if (missing) {
      cordon_error_free(open_err);
      return 0;
    }
    if (err && !*err)
      *err = open_err;
    else
      cordon_error_free(open_err);
    return -1;
  }
  int list_fd = open(base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (list_fd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "runtime directory %s", base);
  DIR *d = fdopendir(list_fd);
  if (!d) {
    close(list_fd);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "runtime directory %s", base);
  }
  int r = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (strlen(e->d_name) != RUNDIR_NAME_LEN ||
        strspn(e->d_name, "0123456789abcdef") != RUNDIR_NAME_LEN)
      continue;
    _cleanup_close_ int fd =
        openat(list_fd, e->d_name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
      continue;
    _cleanup_free_ unsigned char *text = NULL;
    size_t length = 0;
    struct cordon_error *read_err = NULL;
    int got = rundir_read_private(fd, OWNER_FILE, OWNER_MAX, &text, &length, &read_err);
    cordon_error_free(read_err);
    /* No owner file yet (being made) or not ours: not ours to judge. */
    _cleanup_free_ char *session_dir = NULL;
    if (got < 0 || owner_alive(text, length, &session_dir))
      continue;
    if (!session_dir)
      session_dir = strdup("(no session named)");
    if (!session_dir || strv_push(gone, session_dir) < 0) {
      r = cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "gc");
      break;
    }
    if (!dry_run && fs_remove_tree_at(list_fd, e->d_name, err) < 0) {
      r = -1;
      break;
    }
  }
  closedir(d);
  return r;
}
