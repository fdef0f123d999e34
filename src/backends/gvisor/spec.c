/* The OCI spec of a gvisor session (spec.h): mounts stacked in the order they must apply (the
 * system directories, then the workspace with its policy: confine/oci.h, shared with the agent's
 * gvisor mechanism). Pure. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/gvisor/spec.h"
#include "base/cleanup.h"
#include "confine/oci.h"
#include "confine/policy.h"

const char *gvisor_network(enum cordon_egress egress) {
  return oci_runsc_network(egress == CORDON_EGRESS_OPEN);
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
  if (!mounts || oci_add_mount(mounts, "/proc", "proc", "proc", proc_opts) < 0 ||
      oci_add_mount(mounts, "/tmp", "tmpfs", "tmpfs", tmp_opts) < 0 ||
      oci_add_mount(mounts, CORDON_SANDBOX_HOME, "tmpfs", "tmpfs", tmp_opts) < 0 ||
      oci_add_mount(mounts, GVISOR_HELPER_TARGET, "bind", p->helper, helper_opts) < 0 ||
      oci_add_bind(mounts, GVISOR_CONTROL_TARGET, p->control, true) < 0)
    return NULL;
  for (char *const *d = p->system_binds; d && *d; d++)
    if (oci_add_bind(mounts, *d, *d, false) < 0)
      return NULL;
  /* After /etc: the sandbox's own identity files name uid 1000 "cordon", as on ns. */
  if ((p->passwd_file &&
       oci_add_mount(mounts, "/etc/passwd", "bind", p->passwd_file, helper_opts) < 0) ||
      (p->group_file &&
       oci_add_mount(mounts, "/etc/group", "bind", p->group_file, helper_opts) < 0))
    return NULL;
  const struct oci_workspace ws = {
      .host = p->workspace,
      .inside = p->root,
      .pinned = p->pinned,
      .read_only = p->read_only,
      .hidden_dirs = p->hidden_dirs,
      .hidden_files = p->hidden_files,
      .empty_file = p->empty_file,
  };
  if (oci_workspace_mounts(mounts, &ws) < 0)
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
  /* pid 1 is uid 0 of the sandbox with empty capability sets: it only reaps. Each exec's wrapper
   * starts as uid 0 too, with CAP_SETUID and CAP_SETGID alone, and drops to 1000 for the
   * command. */
  const char *const argv[] = {GVISOR_HELPER_TARGET, "pause", NULL};
  /* gVisor shows every process's environment to every other (/proc/PID/environ is 0444 there,
   * with no ptrace check): pid 1's and each wrapper's (runsc exec gives it the spec's) hold only
   * the defaults every command gets (protocol/session.c's base environment), and HOME is set so
   * runsc adds none of its own: a command reads nothing there it was not given. */
  const char *const env[] = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                             "HOME=" CORDON_SANDBOX_HOME, "LANG=C.UTF-8", NULL};
  json_t *spec = NULL;
  if (oci_spec(oci_process(argv, env, "/", 0, 0, false), p->rootfs, "cordon", build_mounts(p),
               oci_namespaces(true, p->policy->egress == CORDON_EGRESS_OPEN), &spec, err) < 0)
    return -1;
  json_t *uids = id_mappings(p->owner_uid), *gids = id_mappings(p->owner_gid);
  json_t *linux_ = json_object_get(spec, "linux");
  /* json_object_set_new steals its value, also when it fails. */
  int r = json_object_set_new(linux_, "uidMappings", uids);
  if (json_object_set_new(linux_, "gidMappings", gids) < 0 || r < 0) {
    json_decref(spec);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "gvisor: building the OCI spec");
  }
  *out = spec;
  return 0;
}
