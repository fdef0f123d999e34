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
  if (workspace_mounts(mounts, p) < 0)
    return NULL;
  return steal_ptr(&mounts);
}

int gvisor_spec(const struct gvisor_spec_params *p, json_t **out, struct cordon_error **err) {
  json_t *mounts = build_mounts(p);
  json_t *namespaces = json_pack("[{s:s}, {s:s}, {s:s}, {s:s}]", "type", "pid", "type", "ipc",
                                 "type", "uts", "type", "mount");
  if (namespaces && p->policy->egress != CORDON_EGRESS_OPEN)
    json_array_append_new(namespaces, json_pack("{s:s}", "type", "network"));
  /* uid 0 of the Sentry (not of the host) with empty capability sets: gVisor has no id-mapped
   * mounts, so only the owner of the host's files (root) can write the workspace; without
   * capabilities it still cannot override a file's mode, mount or leave its namespaces. */
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
  if (!spec) {
    if (!mounts || !namespaces) {
      json_decref(mounts);
      json_decref(namespaces);
    }
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "gvisor: building the OCI spec");
  }
  *out = spec;
  return 0;
}
