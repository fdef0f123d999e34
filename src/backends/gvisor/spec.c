/* The OCI spec of a gvisor session (spec.h): mounts stacked in the order they must apply (the
 * system directories, the workspace, its read-only re-binds, then the hidden masks). Pure. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/gvisor/spec.h"
#include "base/cleanup.h"
#include "confine/policy.h"

const char *gvisor_network(enum cordon_egress egress) {
  return egress == CORDON_EGRESS_OPEN ? "host" : "none";
}

static int add_mount(json_t *mounts, const char *destination, const char *type, const char *source,
                     const char *const *options) {
  json_t *opts = json_array();
  for (size_t i = 0; opts && options[i]; i++)
    if (json_array_append_new(opts, json_string(options[i])) < 0)
      break;
  json_t *m = json_pack("{s:s, s:s, s:s, s:o*}", "destination", destination, "type", type, "source",
                        source, "options", opts);
  return m ? json_array_append_new(mounts, m) : -1;
}

static int bind(json_t *mounts, const char *destination, const char *source, bool writable) {
  const char *const opts[] = {"rbind", writable ? "rw" : "ro", "nosuid", "nodev", NULL};
  return add_mount(mounts, destination, "bind", source, opts);
}

static char *join(const char *a, const char *b) {
  char *out = NULL;
  return asprintf(&out, "%s/%s", a, b) < 0 ? NULL : out;
}

static int workspace_mounts(json_t *mounts, const struct gvisor_spec_params *p) {
  if (bind(mounts, p->root, p->workspace, true) < 0)
    return -1;
  for (const char *const *r = p->policy->read_only; r && *r; r++) {
    _cleanup_free_ char *inside = join(p->root, *r), *host = join(p->workspace, *r);
    if (!inside || !host || bind(mounts, inside, host, false) < 0)
      return -1;
  }
  const char *const mask_opts[] = {"nosuid", "nodev", "noexec", "mode=000", "size=4k", NULL};
  for (char *const *h = p->hidden_dirs; h && *h; h++) {
    _cleanup_free_ char *inside = join(p->root, *h);
    if (!inside || add_mount(mounts, inside, "tmpfs", "tmpfs", mask_opts) < 0)
      return -1;
  }
  const char *const file_opts[] = {"bind", "ro", "nosuid", "nodev", "noexec", NULL};
  for (char *const *h = p->hidden_files; h && *h; h++) {
    _cleanup_free_ char *inside = join(p->root, *h);
    if (!inside || add_mount(mounts, inside, "bind", p->empty_file, file_opts) < 0)
      return -1;
  }
  return 0;
}

static json_t *build_mounts(const struct gvisor_spec_params *p) {
  _cleanup_(json_decrefp) json_t *mounts = json_array();
  const struct cordon_limits *l = &p->policy->limits;
  char tmp_size[64];
  snprintf(tmp_size, sizeof(tmp_size), "size=%llu",
           (unsigned long long)(l->tmp_bytes      ? l->tmp_bytes
                                : l->memory_bytes ? l->memory_bytes
                                                  : CORDON_DEFAULT_TMP_BYTES));
  const char *const proc_opts[] = {"nosuid", "noexec", "nodev", NULL};
  const char *const tmp_opts[] = {"nosuid", "nodev", "mode=1777", tmp_size, NULL};
  const char *const helper_opts[] = {"bind", "ro", "nosuid", "nodev", NULL};
  if (!mounts || add_mount(mounts, "/proc", "proc", "proc", proc_opts) < 0 ||
      add_mount(mounts, "/tmp", "tmpfs", "tmpfs", tmp_opts) < 0 ||
      add_mount(mounts, CORDON_SANDBOX_HOME, "tmpfs", "tmpfs", tmp_opts) < 0 ||
      add_mount(mounts, GVISOR_HELPER_TARGET, "bind", p->helper, helper_opts) < 0 ||
      bind(mounts, GVISOR_CONTROL_TARGET, p->control, true) < 0)
    return NULL;
  for (char *const *d = p->system_binds; d && *d; d++)
    if (bind(mounts, *d, *d, false) < 0)
      return NULL;
  /* After /etc: the sandbox's own identity files name uid 1000 "cordon", as on ns. */
  if ((p->passwd_file &&
       add_mount(mounts, "/etc/passwd", "bind", p->passwd_file, helper_opts) < 0) ||
      (p->group_file && add_mount(mounts, "/etc/group", "bind", p->group_file, helper_opts) < 0))
    return NULL;
  if (workspace_mounts(mounts, p) < 0)
    return NULL;
  return steal_ptr(&mounts);
}

/* Two single-id ranges: the sandbox user is the workspace's owner (so it writes the workspace
 * and what it makes there is the owner's), 0 is the overflow id (so the wrapper owns the
 * control directory and nothing else of the host's). Every other host id is unmapped inside. */
static json_t *id_mappings(unsigned owner) {
  return json_pack("[{s:I, s:I, s:I}, {s:I, s:I, s:I}]", "containerID", (json_int_t)0, "hostID",
                   (json_int_t)GVISOR_WRAPPER_HOST_ID, "size", (json_int_t)1, "containerID",
                   (json_int_t)CONFINE_SANDBOX_UID, "hostID", (json_int_t)owner, "size",
                   (json_int_t)1);
}

int gvisor_spec(const struct gvisor_spec_params *p, json_t **out, struct cordon_error **err) {
  json_t *mounts = build_mounts(p);
  json_t *namespaces = json_pack("[{s:s}, {s:s}, {s:s}, {s:s}, {s:s}]", "type", "pid", "type",
                                 "ipc", "type", "uts", "type", "mount", "type", "user");
  if (namespaces && p->policy->egress != CORDON_EGRESS_OPEN)
    json_array_append_new(namespaces, json_pack("{s:s}", "type", "network"));
  json_t *uids = id_mappings(p->owner_uid), *gids = id_mappings(p->owner_gid);
  /* pid 1 is uid 0 of the sandbox with empty capability sets: it only reaps. Each exec's wrapper
   * starts as uid 0 too, with CAP_SETUID and CAP_SETGID alone, and drops to 1000 for the
   * command. */
  json_t *spec =
      mounts && namespaces
          ? json_pack("{s:s, s:{s:b, s:{s:I, s:I}, s:[s, s], s:[s], s:s, s:b, "
                      "s:{s:[], s:[], s:[], s:[], s:[]}}, s:{s:s, s:b}, s:s, s:o, s:{s:o}}",
                      "ociVersion", "1.0.2", "process", "terminal", 0, "user", "uid", (json_int_t)0,
                      "gid", (json_int_t)0, "args", GVISOR_HELPER_TARGET, "pause", "env",
                      "PATH=/usr/local/bin:/usr/bin:/bin", "cwd", "/", "noNewPrivileges", 1,
                      "capabilities", "bounding", "effective", "inheritable", "permitted",
                      "ambient", "root", "path", p->rootfs, "readonly", 1, "hostname", "cordon",
                      "mounts", mounts, "linux", "namespaces", namespaces)
          : NULL;
  if (spec && uids && gids) {
    json_t *linux_ = json_object_get(spec, "linux");
    json_object_set_new(linux_, "uidMappings", uids);
    json_object_set_new(linux_, "gidMappings", gids);
    uids = gids = NULL;
  }
  json_decref(uids);
  json_decref(gids);
  if (!spec || !json_object_get(json_object_get(spec, "linux"), "uidMappings")) {
    if (!spec && (!mounts || !namespaces)) {
      json_decref(mounts);
      json_decref(namespaces);
    }
    json_decref(spec);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "gvisor: building the OCI spec");
  }
  *out = spec;
  return 0;
}
