/* Refs: the snapshots the store keeps, one empty file <store>/refs/<64 hex> each (gc's roots). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/strv.h"
#include "store/cas.h"

static int open_refs(struct cordon_cas *cas, struct cordon_error **err) {
  int fd = openat(cas->rootfd, CAS_REFS_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return cordon_error_set(
        err, errno == ELOOP || errno == ENOTDIR ? CORDON_ERR_INTEGRITY : CORDON_ERR_SYSTEM, errno,
        "store %s: refs", cas->dir);
  return fd;
}

int cas_ref_add(struct cordon_cas *cas, const unsigned char digest[CAS_DIGEST_LEN],
                struct cordon_error **err) {
  char hex[CAS_HEX_LEN + 1];
  cas_hex(digest, hex);
  _cleanup_close_ int dir = open_refs(cas, err);
  if (dir < 0)
    return -1;
  struct stat st;
  if (fstatat(dir, hex, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
    return 0;
  /* The name is the content: an empty file needs no temp file to appear atomically. */
  int fd = openat(dir, hex, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
  if (fd < 0 && errno != EEXIST)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "ref %s", hex);
  if (fd >= 0)
    close(fd);
  if (fsync(dir) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "ref %s", hex);
  return 0;
}

int cas_ref_remove(struct cordon_cas *cas, const unsigned char digest[CAS_DIGEST_LEN],
                   struct cordon_error **err) {
  char hex[CAS_HEX_LEN + 1];
  cas_hex(digest, hex);
  _cleanup_close_ int dir = open_refs(cas, err);
  if (dir < 0)
    return -1;
  if (unlinkat(dir, hex, 0) < 0 && errno != ENOENT)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "ref %s", hex);
  fsync(dir);
  return 0;
}

int cas_ref_list(struct cordon_cas *cas, char ***out, struct cordon_error **err) {
  int dir = open_refs(cas, err);
  if (dir < 0)
    return -1;
  _cleanup_closedir_ DIR *d = fdopendir(dir);
  if (!d) {
    close(dir);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "store %s: refs", cas->dir);
  }
  char **list = calloc(1, sizeof(char *));
  if (!list)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "refs");
  struct dirent *de;
  while ((errno = 0, de = readdir(d))) {
    if (!cas_hex_valid(de->d_name))
      continue;
    if (strv_push(&list, de->d_name) < 0) {
      strv_free(list);
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "refs");
    }
  }
  if (errno) {
    int e = errno;
    strv_free(list);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "store %s: refs", cas->dir);
  }
  strv_sort(list);
  *out = list;
  return 0;
}
