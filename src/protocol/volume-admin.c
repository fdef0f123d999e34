/* `cordon volume list` and `remove`: the project's named volumes as a user manages them. A
 * volume in use is known from the sessions' state files, so this file sits above session.c
 * (which resolves a manifest's volumes through volume.c). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cordon/session.h>
#include <cordon/volume.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/strv.h"
#include "protocol/context.h"
#include "protocol/volume.h"

#define STATE_MAX_BYTES (1u << 20)

/* ---- list and remove ------------------------------------------------------------------------ */

/* Bytes of the regular files beneath dirfd; links are not followed, depth is bounded. */
static uint64_t tree_size(int dirfd, int depth) {
  int fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
  if (fd < 0 || depth > 256) {
    if (fd >= 0)
      close(fd);
    return 0;
  }
  _cleanup_closedir_ DIR *d = fdopendir(fd);
  if (!d) {
    close(fd);
    return 0;
  }
  uint64_t total = 0;
  for (struct dirent *de; (de = readdir(d));) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
      continue;
    struct stat st;
    if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
      continue;
    if (S_ISREG(st.st_mode)) {
      total += (uint64_t)st.st_size;
    } else if (S_ISDIR(st.st_mode)) {
      _cleanup_close_ int sub =
          openat(dirfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub >= 0)
        total += tree_size(sub, depth + 1);
    }
  }
  return total;
}

void cordon_volume_infos_free(struct cordon_volume_info *infos, size_t count) {
  for (size_t i = 0; infos && i < count; i++) {
    free(infos[i].name);
    free(infos[i].path);
  }
  free(infos);
}

int cordon_volume_list(struct cordon_context *ctx, struct cordon_volume_info **out, size_t *count,
                       struct cordon_error **err) {
  *out = NULL;
  *count = 0;
  _cleanup_free_ char *dir = NULL;
  if (volumes_dir(ctx, false, &dir, err) < 0)
    return -1;
  _cleanup_(strv_freep) char **names = strv_copy(NULL);
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0)
    return errno == ENOENT ? 0 : cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "%s", dir);
  _cleanup_closedir_ DIR *d = fdopendir(dfd);
  if (!d) {
    close(dfd);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "%s", dir);
  }
  for (struct dirent *de; names && (de = readdir(d));)
    if (cordon_volume_name_valid(de->d_name) && strv_push(&names, de->d_name) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "volumes");
  if (!names)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "volumes");
  strv_sort(names);
  size_t n = strv_length((const char *const *)names);
  struct cordon_volume_info *infos = calloc(n + 1, sizeof(*infos));
  if (!infos)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "volumes");
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    _cleanup_close_ int vfd =
        openat(dirfd(d), names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (vfd < 0)
      continue; /* not a directory: not a volume */
    infos[k].name = strdup(names[i]);
    if (!infos[k].name || asprintf(&infos[k].path, "%s/%s", dir, names[i]) < 0) {
      infos[k].path = NULL;
      cordon_volume_infos_free(infos, k + 1);
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "volumes");
    }
    infos[k++].size = tree_size(vfd, 0);
  }
  *out = infos;
  *count = k;
  return 0;
}

/* Whether session `id`'s state file records volume `name`. */
static bool session_uses(struct cordon_context *ctx, const char *id, const char *name) {
  _cleanup_free_ char *path = NULL;
  if (asprintf(&path, "%s/sessions/%s/state.json", cordon_context_state_dir(ctx), id) < 0)
    return false;
  _cleanup_free_ unsigned char *text = NULL;
  size_t len = 0;
  struct cordon_error *ignored = NULL;
  if (fs_read_file(path, STATE_MAX_BYTES, &text, &len, &ignored) < 0) {
    cordon_error_free(ignored);
    return false;
  }
  json_t *doc = json_loadb((const char *)text, len, 0, NULL);
  json_t *vols = json_object_get(doc, "volumes");
  bool used = false;
  size_t i;
  json_t *e;
  json_array_foreach(vols, i, e) {
    const char *n = json_string_value(json_object_get(e, "name"));
    if (n && strcmp(n, name) == 0)
      used = true;
  }
  json_decref(doc);
  return used;
}

int cordon_volume_remove(struct cordon_context *ctx, const char *name, struct cordon_error **err) {
  if (!cordon_volume_name_valid(name))
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "invalid volume name '%s'", name);
  _cleanup_free_ char *dir = NULL;
  if (volumes_dir(ctx, false, &dir, err) < 0)
    return -1;
  _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  if (dfd < 0 || fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
    return cordon_error_set(err, CORDON_ERR_NOT_FOUND, 0, "no volume %s", name);
  _cleanup_(strv_freep) char **ids = NULL;
  if (cordon_session_list(ctx, &ids, err) < 0)
    return -1;
  for (size_t i = 0; ids && ids[i]; i++)
    if (session_uses(ctx, ids[i], name))
      return cordon_error_set(err, CORDON_ERR_DENIED, 0,
                              "volume %s is in use by session %s (destroy it first)", name, ids[i]);
  return fs_remove_tree_at(dfd, name, err);
}
