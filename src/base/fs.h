/* Filesystem helpers: atomic writes, bounded reads, anchored (beneath-a-directory) opens,
 * recursive removal that never follows symlinks. */
#ifndef CORDON_BASE_FS_H
#define CORDON_BASE_FS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cordon/error.h>

/* Temp files beside a target: the one way the tree writes a file whole before anyone sees it.
 * fs_temp_create makes ".<target>.tmp-<16 hex>" (getrandom) in dirfd, O_EXCL | O_NOFOLLOW |
 * O_CLOEXEC, with exactly mode (fchmod: the umask does not apply); the caller writes t->fd;
 * fs_temp_commit gives it the target's name. A crash in between leaves only the hidden temp
 * name, never a partial target. Use as
 *   _cleanup_fs_temp_ struct fs_temp t = FS_TEMP_INIT;
 * so a failure before the commit removes the temp file. */
struct fs_temp {
  int dirfd;               /* borrowed: the target's directory */
  int fd;                  /* the temp file, open for writing; -1 once committed or discarded */
  char name[NAME_MAX + 1]; /* its name in dirfd; "" when there is none */
};
#define FS_TEMP_INIT \
  { .dirfd = -1, .fd = -1, .name = "" }

enum {
  FS_COMMIT_NO_SYNC = 1 << 0,    /* atomic but not durable: no fsync of the file or directory */
  FS_COMMIT_NO_REPLACE = 1 << 1, /* linkat, not renameat: an existing target is kept */
};

int fs_temp_create(int dirfd, const char *target, mode_t mode, struct fs_temp *t,
                   struct cordon_error **err);
/* fsync the temp file, close it, renameat it over target (a symlink at target is replaced, not
 * followed) or, with FS_COMMIT_NO_REPLACE, linkat it to target, then fsync dirfd. The temp
 * name is gone afterwards, whatever the result. 1 when target now holds the temp file's bytes,
 * 0 with FS_COMMIT_NO_REPLACE when target already existed, -1 with err. */
int fs_temp_commit(struct fs_temp *t, const char *target, unsigned flags,
                   struct cordon_error **err);
/* Close and remove the temp file unless committed; a no-op on a committed or FS_TEMP_INIT t. */
void fs_temp_discard(struct fs_temp *t);
#define _cleanup_fs_temp_ __attribute__((cleanup(fs_temp_discard)))

/* Write data to dirfd/name atomically (fs_temp_create, write, fs_temp_commit): the temp file
 * is removed on failure. */
int fs_write_atomic_at(int dirfd, const char *name, const void *data, size_t length, mode_t mode,
                       struct cordon_error **err);
/* The same, with the fsyncs only when durable: still atomic (readers see the old or the new
 * content, never a mix), but after a power loss the new content may be absent or empty. For
 * state that dies with the machine anyway. */
int fs_write_replace_at(int dirfd, const char *name, const void *data, size_t length, mode_t mode,
                        bool durable, struct cordon_error **err);
int fs_write_atomic(const char *path, const void *data, size_t length, mode_t mode,
                    struct cordon_error **err);

/* write(2) until everything is written, retrying on EINTR and short writes; -1 with errno. */
int fs_write_all(int fd, const void *data, size_t length);
/* Read exactly length bytes at offset (retrying short reads and EINTR); -1 on error or end of
 * file first. */
int fs_pread_all(int fd, void *buf, size_t length, uint64_t offset);

/* Read a whole fd; more than max bytes is an error (E2BIG). *data is NUL-terminated. */
int fs_read_fd(int fd, size_t max, unsigned char **data, size_t *length, struct cordon_error **err);
int fs_read_file(const char *path, size_t max, unsigned char **data, size_t *length,
                 struct cordon_error **err);

/* mkdir -p; existing directories are fine. */
int fs_mkdir_p(const char *path, mode_t mode, struct cordon_error **err);

/* Open relpath beneath rootfd: ".." and absolute paths are refused, symlinks may be followed
 * only while they stay beneath rootfd (base/anchor.h anchor_open_beneath, with cordon errors).
 * flags are openat flags (O_CLOEXEC is added). label names the root in errors. */
int fs_open_beneath(int rootfd, const char *relpath, int flags, mode_t mode, const char *label,
                    struct cordon_error **err);

/* Open (creating as needed, mode 0755) the directory relpath beneath rootfd, one component at
 * a time, never following symlinks. "" opens rootfd itself. */
int fs_mkdirs_beneath(int rootfd, const char *relpath, const char *label,
                      struct cordon_error **err);

/* Remove dirfd/name recursively without following symlinks. A missing name is success. */
int fs_remove_tree_at(int dirfd, const char *name, struct cordon_error **err);
int fs_remove_tree(const char *path, struct cordon_error **err);

/* Hand the tree under dirfd (itself included) to uid:gid, never following a symlink and never
 * crossing into a mount (EXDEV: something mounted inside is not the tree's to give away); a
 * tree deeper than FS_CHOWN_TREE_MAX_DEPTH directories fails with ELOOP. 0, or -1 with errno
 * and the tree handed over in part. */
#define FS_CHOWN_TREE_MAX_DEPTH 64
int fs_chown_tree(int dirfd, uid_t uid, gid_t gid);

/* This boot's id (/proc/sys/kernel/random/boot_id, without the newline); "" when unreadable.
 * With a pid and its start time, it names a process across reboots. */
void fs_boot_id(char *out, size_t size);

/* Split "a/b/c" into dir "a/b" and base "c" (dir "" when there is no slash). */
void fs_split_path(const char *path, char **dir, char **base);

/* Close *fd when it is open, and mark it closed (-1). */
void fs_close_reset(int *fd);

/* Add O_NONBLOCK to fd's status flags: 0, or -1 with errno set. */
int fs_set_nonblocking(int fd);

/* Whether the directory at path holds any entry; a missing directory holds none, and one that
 * cannot be read counts as used (the caller then does its clean-up anyway). */
bool fs_dir_has_entries(const char *path);

/* Normalise a relative path: drop empty and "." components; refuse ".." and absolute paths.
 * "" and "." give "". */
int fs_normalize_relative(const char *path, char **out, struct cordon_error **err);

/* Random lowercase hex string of 2*nbytes characters (getrandom). */
int fs_random_hex(size_t nbytes, char **out, struct cordon_error **err);
/* Fill buf with length bytes from the kernel's CSPRNG (getrandom). 0, or -1 with errno.
 * Allocates nothing: safe in a sandbox's pid 1 and after fork. */
int fs_random_bytes(void *buf, size_t length);

/* Monotonic clock in seconds. */
double fs_now(void);

#endif
