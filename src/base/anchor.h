/* Opens anchored at a directory fd: the one home for "open this relative path beneath that
 * directory and never leave it". Two modes, distinct by name:
 *   anchor_open          no symlink anywhere in the path (RESOLVE_NO_SYMLINKS): for trees we
 *                        walk, restore or mount from, where a symlink means something changed;
 *   anchor_open_beneath  symlinks followed while they stay beneath the anchor
 *                        (RESOLVE_BENEATH): for paths a user names inside a workspace.
 * Both use openat2 in one call where the kernel (and any seccomp filter) allows it and the path
 * fits, otherwise one O_NOFOLLOW component at a time (then anchor_open_beneath refuses every
 * symlink: stricter, never looser). Neither allocates: safe in a clone child that shares our
 * memory. Errors are -1 with errno; base/fs.h fs_open_beneath reports them as cordon errors. */
#ifndef CORDON_BASE_ANCHOR_H
#define CORDON_BASE_ANCHOR_H

#include <sys/types.h>

/* flags are open flags; O_CLOEXEC and O_NOFOLLOW are added. "" opens rootfd itself (with
 * flags). Returns an fd, or -1 with errno (ELOOP: a symlink was met; EXDEV: ".." or an
 * absolute path would leave rootfd). */
int anchor_open(int rootfd, const char *path, int flags, mode_t mode);

/* The parent directory of path (O_RDONLY | O_DIRECTORY, no symlinks, as anchor_open) and a
 * pointer to path's last component. */
int anchor_open_parent(int rootfd, const char *path, const char **name);

/* flags are open flags; O_CLOEXEC is added. Symlinks (the last component's too, unless flags
 * has O_NOFOLLOW) are followed while they resolve beneath rootfd; magic links never. "" opens
 * rootfd itself. -1 with errno: EXDEV when the path or a symlink would leave rootfd, ELOOP
 * when a symlink was met without openat2. */
int anchor_open_beneath(int rootfd, const char *path, int flags, mode_t mode);

#endif
