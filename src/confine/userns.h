/* User namespaces: id maps, and the small throw-away namespaces that carry an id mapping for an
 * idmapped mount. */
#ifndef CORDON_CONFINE_USERNS_H
#define CORDON_CONFINE_USERNS_H

#include <stdbool.h>
#include <sys/types.h>

#include <cordon/error.h>

/* Map one uid and one gid of process pid's user namespace: inner -> outer. With
 * deny_setgroups (required when the writer is unprivileged), setgroups(2) is disabled in the
 * namespace first. */
int confine_userns_write_maps(pid_t pid, uid_t inner_uid, uid_t outer_uid, gid_t inner_gid,
                              gid_t outer_gid, bool deny_setgroups, struct cordon_error **err);

/* A user namespace fd whose mapping is `from_uid -> to_uid` and `from_gid -> to_gid`, for
 * MOUNT_ATTR_IDMAP: files owned by from_uid on disk appear owned by to_uid through the mount.
 * Needs CAP_SETUID/CAP_SETGID (root). The last mapping made is kept (one fd for the life of the
 * process) and handed out again as a duplicate. */
int confine_userns_idmap_fd(uid_t from_uid, uid_t to_uid, gid_t from_gid, gid_t to_gid,
                            struct cordon_error **err);

#endif
