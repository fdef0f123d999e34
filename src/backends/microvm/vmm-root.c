/* The VMM's view of the host's files. A VMM runs in a mount namespace of its own; without a
 * root of its own it would still see the whole host file system, with uid 65534's rights: the
 * host's /tmp (world-writable), other users' readable files, every other session's workspace.
 * A guest that escapes into qemu holds what qemu holds, so qemu gets a root built the way the ns
 * backend builds a sandbox's (confine/mount.h): the system paths read-only (the guest's /usr
 * and /etc shares come from there, and qemu's own libraries and firmware), /dev's basic nodes
 * (and /dev/kvm when KVM runs the guest), a /proc of its own, small empty /tmp and /dev/shm,
 * and the workspace, which qemu reaches by fd. Nothing else of the host. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "backends/microvm/microvm.h"
#include "base/cleanup.h"
#include "base/syscalls.h"
#include "confine/devices.h"
#include "confine/mount.h"
#include "confine/policy.h"
#include "confine/resolve.h"

#define VMM_ROOT_MAX_TREES 16
/* /tmp and /dev/shm of the VMM: qemu writes neither with the options it is given. */
#define VMM_ROOT_TMP_BYTES (1u << 20)

int microvm_vmm_root_enter(int workspace_tree, bool kvm, struct cordon_error **err) {
  struct confine_path paths[VMM_ROOT_MAX_TREES] = {0};
  struct confine_tree trees[VMM_ROOT_MAX_TREES] = {0};
  struct confine_tree kvm_device = {.target = "/dev/kvm", .source = "/dev/kvm", .tree_fd = -1};
  size_t n = 0;
  int r = -1;
  const uint64_t ro = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
  for (size_t i = 0; confine_default_system_paths[i] && n < VMM_ROOT_MAX_TREES; i++) {
    bool present = false;
    struct confine_path *p = &paths[n];
    if (confine_resolve_host_path(confine_default_system_paths[i], true, true, "system path", p,
                                  &present, err) < 0)
      goto done;
    if (!present)
      continue;
    trees[n] = (struct confine_tree){.target = p->path,
                                     .source = p->source,
                                     .link = p->kind == CONFINE_KIND_SYMLINK ? p->link : NULL,
                                     .tree_fd = -1,
                                     .is_dir = p->kind == CONFINE_KIND_DIR};
    if (!trees[n].link && (trees[n].tree_fd = confine_tree_prepare(p->source, ro, -1, err)) < 0)
      goto done;
    n++;
  }
  if (kvm && (kvm_device.tree_fd = confine_device_prepare("/dev/kvm", err)) < 0)
    goto done;
  struct confine_root_spec spec = {
      .staging = "/tmp", /* in our own mount namespace: the host's /tmp is untouched */
      .trees = trees,
      .n_trees = n,
      .workspace = {.target = MICROVM_VMM_WORKSPACE, .tree_fd = workspace_tree, .is_dir = true},
      .tmp_bytes = VMM_ROOT_TMP_BYTES,
      .devices = kvm ? &kvm_device : NULL,
      .n_devices = kvm ? 1 : 0,
  };
  r = confine_build_root(&spec, err);
done:
  for (size_t i = 0; i < VMM_ROOT_MAX_TREES; i++) {
    if (trees[i].tree_fd > 0)
      close(trees[i].tree_fd);
    confine_path_clear(&paths[i]);
  }
  if (kvm_device.tree_fd >= 0)
    close(kvm_device.tree_fd);
  return r;
}
