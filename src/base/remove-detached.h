/* Removing a directory tree without waiting for it: for a process about to exit (see
 * proc_exit_pending), whose caller must not pay for the file system's work of freeing it. */
#ifndef CORDON_BASE_REMOVE_DETACHED_H
#define CORDON_BASE_REMOVE_DETACHED_H

#include <cordon/error.h>

/* Move path (a directory) into the directory trash (made 0700 if missing, on the same file
 * system), then remove it there in a process of its own, which outlives us by the time the
 * removal takes. When the move or the process cannot be made, path is removed here, as
 * fs_remove_tree does. A removal cut short (the process killed, a tree too deep) is left in
 * trash for `cordon gc`. Only for a process that exits next: the remover shares its memory. */
int fs_remove_tree_detached(const char *path, const char *trash, struct cordon_error **err);

#endif
