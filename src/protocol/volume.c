/* Persistent volumes and host binds (see volume.h and <cordon/volume.h>): the checks of a
 * manifest's volumes and named volumes in .cordon/volumes/. `volume list` and `remove`, which
 * read the sessions, are in volume-admin.c, above session.c. */
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
#include "confine/policy.h"
#include "confine/private.h"
#include "confine/resolve.h"
#include "protocol/context.h"
#include "protocol/volume.h"

#define VOLUMES_DIR "volumes"

/* Directories the sandbox itself needs or provides: no volume lands in or above one. */
static const char *const refused_targets[] = {
    "/proc", "/sys",  "/dev", "/tmp",   "/run",   "/boot",   "/etc", "/usr",
    "/bin",  "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt", NULL,
};

bool cordon_volume_name_valid(const char *name) {
  if (!name)
    return false;
  size_t n = strlen(name);
  if (n == 0 || n > CORDON_VOLUME_NAME_MAX)
    return false;
  for (size_t i = 0; i < n; i++) {
    char c = name[i];
    bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!alnum && (i == 0 || (c != '_' && c != '.' && c != '-')))
      return false;
  }
  return true;
}

int volume_check_target(const char *target, const char *root, char **out,
                        struct cordon_error **err) {
  if (!target || target[0] != '/')
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "volume target '%s' must be absolute",
                            target ? target : "");
  _cleanup_free_ char *norm = NULL;
  if (confine_normalize_host_path(target, "volume target", &norm, err) < 0)
    return -1;
  for (size_t i = 0; refused_targets[i]; i++)
    if (confine_path_covers(refused_targets[i], norm) ||
        confine_path_covers(norm, refused_targets[i]))
      return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                              "volume target %s overlaps %s, which the sandbox needs", norm,
                              refused_targets[i]);
  /* cordon's own names (/.cordon-init, /.cordon-agent in a container; .cordon/ anywhere). */
  for (const char *c = strstr(norm, "/.cordon"); c; c = strstr(c + 1, "/.cordon"))
    if (c[8] == 0 || c[8] == '/' || c[8] == '-')
      return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                              "volume target %s names cordon's own directories", norm);
  if (confine_path_covers(root, norm) || confine_path_covers(norm, root))
    return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                            "volume target %s overlaps the workspace root %s", norm, root);
  *out = steal_ptr(&norm);
  return 0;
}

int volumes_dir(struct cordon_context *ctx, bool create, char **out, struct cordon_error **err) {
  if (create)
    return context_ensure_dir(ctx, VOLUMES_DIR, out, err);
  if (asprintf(out, "%s/" VOLUMES_DIR, cordon_context_state_dir(ctx)) < 0) {
    *out = NULL;
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "volumes");
  }
  return 0;
}

/* .cordon/volumes/NAME, made when missing (0755: the sandbox's uid reaches it through an
 * id-mapped mount or a container's bind), opened with no symlink on the way; its canonical
 * path. */
static int named_source(struct cordon_context *ctx, const char *name, char **out,
                        struct cordon_error **err) {
  _cleanup_free_ char *dir = NULL;
  if (volumes_dir(ctx, true, &dir, err) < 0)
    return -1;
  _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "volumes %s", dir);
  if (mkdirat(dfd, name, 0755) == 0)
    fchmodat(dfd, name, 0755, 0); /* not umask's */
  else if (errno != EEXIST)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot create volume %s", name);
  _cleanup_close_ int vfd = openat(dfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (vfd < 0)
    return cordon_error_set(err, CORDON_ERR_DENIED, errno, "volume %s is not a directory in %s",
                            name, dir);
  *out = confine_fd_path(vfd);
  return *out ? 0 : cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "volume %s", name);
}

/* An existing host directory, canonical, that is not, does not contain and does not lie
 * inside cordon's state (any .cordon/, the key directory, the state home). */
static int host_source(struct cordon_context *ctx, const char *path, char **out,
                       struct cordon_error **err) {
  char real[PATH_MAX];
  struct stat st;
  if (!realpath(path, real) || stat(real, &st) < 0)
    return cordon_error_set(err, CORDON_ERR_NOT_FOUND, errno, "volume source %s", path);
  if (!S_ISDIR(st.st_mode))
    return cordon_error_set(err, CORDON_ERR_USAGE, ENOTDIR, "volume source %s is not a directory",
                            path);
  _cleanup_(strv_freep) char **private_dirs = NULL;
  if (confine_private_set(cordon_context_state_dir(ctx), &private_dirs, err) < 0 ||
      confine_check_not_private(real, "volume source", (const char *const *)private_dirs, err) < 0)
    return -1;
  _cleanup_(strv_freep) char **beneath = NULL;
  if (confine_private_beneath((const char *const *)private_dirs, real, true, &beneath, err) < 0)
    return -1;
  if (beneath && beneath[0])
    return cordon_error_set(err, CORDON_ERR_DENIED, 0,
                            "volume source %s contains cordon's state directory %s/%s: the "
                            "sandbox would see cordon's state",
                            path, real, beneath[0]);
  *out = strdup(real);
  return *out ? 0 : cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "volume");
}

void volumes_resolved_clear(struct volumes_resolved *v) {
  free(v->list);
  strv_free(v->strings);
  json_decref(v->record);
  memset(v, 0, sizeof(*v));
}

/* One volume: target checked, source resolved, both kept in v->strings. */
static int resolve_one(struct cordon_context *ctx, const struct cordon_volume *in, const char *root,
                       struct volumes_resolved *v, struct cordon_error **err) {
  char *target = NULL, *source = NULL;
  const char *name = NULL;
  if (volume_check_target(in->target, root, &target, err) < 0 ||
      strv_push_take(&v->strings, target) < 0)
    return target ? cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "volume") : -1;
  for (size_t j = 0; j < v->n; j++)
    if (confine_path_covers(v->list[j].target, target) ||
        confine_path_covers(target, v->list[j].target))
      return cordon_error_set(err, CORDON_ERR_USAGE, 0, "volume target %s overlaps %s", target,
                              v->list[j].target);
  if (!in->source || !*in->source)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "volume for %s has no source", target);
  if (in->source[0] == '/') {
    if (host_source(ctx, in->source, &source, err) < 0)
      return -1;
  } else {
    if (!cordon_volume_name_valid(in->source))
      return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                              "invalid volume name '%s' (expected [A-Za-z0-9][A-Za-z0-9_.-]{0,63},"
                              " or an absolute host directory)",
                              in->source);
    name = in->source;
    if (named_source(ctx, name, &source, err) < 0)
      return -1;
  }
  if (strv_push_take(&v->strings, source) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "volume");
  v->list[v->n++] = (struct cordon_volume){source, target, in->read_only};
  json_t *entry =
      json_pack("{s:s, s:s, s:b}", "source", source, "target", target, "read_only", in->read_only);
  if (entry && name)
    json_object_set_new(entry, "name", json_string(name));
  if (!entry || json_array_append_new(v->record, entry) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "volume");
  return 0;
}

int volumes_resolve(struct cordon_context *ctx, const struct cordon_manifest *m, const char *root,
                    struct volumes_resolved *out, struct cordon_error **err) {
  struct volumes_resolved v = {0};
  v.list = calloc(m->n_volumes + 1, sizeof(*v.list));
  v.strings = strv_copy(NULL);
  v.record = json_array();
  if (!v.list || !v.strings || !v.record) {
    volumes_resolved_clear(&v);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "volume");
  }
  for (size_t i = 0; i < m->n_volumes; i++)
    if (resolve_one(ctx, &m->volumes[i], root, &v, err) < 0) {
      volumes_resolved_clear(&v);
      return -1;
    }
  *out = v;
  return 0;
}

bool volumes_record_valid(const json_t *record) {
  if (!json_is_array(record))
    return false;
  size_t i;
  json_t *e;
  json_array_foreach(record, i, e) {
    const char *source = NULL, *target = NULL, *name = NULL;
    int ro = 0;
    if (json_unpack(e, "{s:s, s:s, s:b, s?:s !}", "source", &source, "target", &target, "read_only",
                    &ro, "name", &name) < 0 ||
        source[0] != '/' || target[0] != '/' || (name && !cordon_volume_name_valid(name)))
      return false;
  }
  return true;
}
