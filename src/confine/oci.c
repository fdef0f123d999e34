/* The OCI spec pieces a gVisor sandbox's path policy is lowered into (see oci.h). Pure. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/strv-json.h"
#include "confine/oci.h"
#include "confine/policy.h"

int oci_add_mount(json_t *mounts, const char *destination, const char *type, const char *source,
                  const char *const *options) {
  json_t *opts = json_array();
  for (size_t i = 0; opts && options[i]; i++)
    if (json_array_append_new(opts, json_string(options[i])) < 0)
      break;
  json_t *m = json_pack("{s:s, s:s, s:s, s:o*}", "destination", destination, "type", type, "source",
                        source, "options", opts);
  return m ? json_array_append_new(mounts, m) : -1;
}

int oci_add_bind(json_t *mounts, const char *destination, const char *source, bool writable) {
  const char *const opts[] = {"rbind", writable ? "rw" : "ro", "nosuid", "nodev", NULL};
  return oci_add_mount(mounts, destination, "bind", source, opts);
}

static char *join(const char *a, const char *b) {
  char *out = NULL;
  return asprintf(&out, "%s/%s", a, b) < 0 ? NULL : out;
}

/* Bind workspace-relative rel onto itself inside. */
static int bind_rel(json_t *mounts, const struct oci_workspace *w, const char *rel, bool writable) {
  _cleanup_free_ char *inside = join(w->inside, rel), *host = join(w->host, rel);
  return inside && host ? oci_add_bind(mounts, inside, host, writable) : -1;
}

struct rebind {
  const char *rel;
  bool writable;
};

static int by_path(const void *a, const void *b) {
  return strcmp(((const struct rebind *)a)->rel, ((const struct rebind *)b)->rel);
}

/* The pins and the read-only re-binds as one list sorted by path: a parent sorts before what lies
 * beneath it, so each mount lands on the one above it (a pin inside a read-only tree, a read-only
 * path inside a pinned directory). */
static int rebinds(json_t *mounts, const struct oci_workspace *w) {
  size_t n = 0, i = 0;
  for (char *const *p = w->pinned; p && *p; p++)
    n++;
  for (char *const *r = w->read_only; r && *r; r++)
    n++;
  _cleanup_free_ struct rebind *all = calloc(n ? n : 1, sizeof(*all));
  if (!all)
    return -1;
  for (char *const *p = w->pinned; p && *p; p++)
    all[i++] = (struct rebind){*p, true};
  for (char *const *r = w->read_only; r && *r; r++)
    all[i++] = (struct rebind){*r, false};
  qsort(all, n, sizeof(*all), by_path);
  for (i = 0; i < n; i++)
    if (bind_rel(mounts, w, all[i].rel, all[i].writable) < 0)
      return -1;
  return 0;
}

int oci_workspace_mounts(json_t *mounts, const struct oci_workspace *w) {
  if (oci_add_bind(mounts, w->inside, w->host, true) < 0 || rebinds(mounts, w) < 0)
    return -1;
  for (char *const *h = w->hidden_dirs; h && *h; h++) {
    _cleanup_free_ char *inside = join(w->inside, *h);
    /* No capabilities inside, so the mode holds: nothing in it can be listed or made. */
    bool holds_visible = w->visible && confine_path_covers(*h, w->visible);
    const char *const opts[] = {
        "nosuid", "nodev", "noexec", holds_visible ? "mode=111" : "mode=000", "size=4k", NULL};
    if (!inside || oci_add_mount(mounts, inside, "tmpfs", "tmpfs", opts) < 0)
      return -1;
  }
  const char *const file_opts[] = {"bind", "ro", "nosuid", "nodev", "noexec", NULL};
  for (char *const *h = w->hidden_files; h && *h; h++) {
    _cleanup_free_ char *inside = join(w->inside, *h);
    if (!inside || oci_add_mount(mounts, inside, "bind", w->empty_file, file_opts) < 0)
      return -1;
  }
  return w->visible ? bind_rel(mounts, w, w->visible, false) : 0;
}

const char *oci_runsc_network(bool open) {
  return open ? "host" : "none";
}

json_t *oci_namespaces(bool user, bool open_network) {
  json_t *ns = json_pack("[{s:s}, {s:s}, {s:s}, {s:s}]", "type", "pid", "type", "ipc", "type",
                         "uts", "type", "mount");
  if (ns && user && json_array_append_new(ns, json_pack("{s:s}", "type", "user")) < 0)
    goto fail;
  if (ns && !open_network && json_array_append_new(ns, json_pack("{s:s}", "type", "network")) < 0)
    goto fail;
  return ns;
fail:
  json_decref(ns);
  return NULL;
}

json_t *oci_process(const char *const *argv, const char *const *env, const char *cwd, unsigned uid,
                    unsigned gid, bool terminal) {
  json_t *args = strv_to_json(argv), *env_json = strv_to_json(env);
  if (!args || !env_json) {
    json_decref(args);
    json_decref(env_json);
    return NULL;
  }
  /* Empty capability sets: uid 0 inside still cannot override file modes or mount. */
  return json_pack("{s:b, s:{s:I, s:I}, s:o, s:o, s:s, s:b, s:{s:[], s:[], s:[], s:[], s:[]}}",
                   "terminal", terminal, "user", "uid", (json_int_t)uid, "gid", (json_int_t)gid,
                   "args", args, "env", env_json, "cwd", cwd, "noNewPrivileges", 1, "capabilities",
                   "bounding", "effective", "inheritable", "permitted", "ambient");
}

int oci_spec(json_t *process, const char *root_path, const char *hostname, json_t *mounts,
             json_t *namespaces, json_t **out, struct cordon_error **err) {
  json_t *spec =
      process && mounts && namespaces
          ? json_pack("{s:s, s:o, s:{s:s, s:b}, s:s, s:o, s:{s:o}}", "ociVersion", "1.0.2",
                      "process", process, "root", "path", root_path, "readonly", 1, "hostname",
                      hostname, "mounts", mounts, "linux", "namespaces", namespaces)
          : NULL;
  if (!spec) {
    /* json_pack's "o" steals even on failure, so only what it never saw is ours to drop. */
    if (!process || !mounts || !namespaces) {
      json_decref(process);
      json_decref(mounts);
      json_decref(namespaces);
    }
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "gvisor: building the OCI spec");
  }
  *out = spec;
  return 0;
}
