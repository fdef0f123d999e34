/* Opens anchored at a directory fd that never follow a symlink anywhere in the path: openat2
 * with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS in one call where the kernel has it and the path
 * fits, otherwise one O_NOFOLLOW component at a time (paths of any length work). */
#ifndef CORDON_SNAPSHOT_ANCHOR_H
#define CORDON_SNAPSHOT_ANCHOR_H

/* flags are open flags; O_CLOEXEC and O_NOFOLLOW are added. "" opens rootfd itself (with
 * flags). Returns an fd, or -1 with errno (ELOOP: a symlink was met). */
int anchor_open(int rootfd, const char *path, int flags, unsigned mode);

/* The parent directory of path (O_RDONLY | O_DIRECTORY) and a pointer to path's last
 * component. */
int anchor_open_parent(int rootfd, const char *path, const char **name);

#endif
