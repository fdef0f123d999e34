/* The fixture and helpers shared by the snapshot unit tests (test-snapshot.c,
 * test-snapshot-restore.c, test-snapshot-store.c): a scratch directory with a store in it, trees
 * made file by file, snapshots taken, exported and restored through the public API. */
#ifndef CORDON_TESTS_UNIT_SNAPSHOT_FIXTURE_H
#define CORDON_TESTS_UNIT_SNAPSHOT_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include <cordon/cas.h>
#include <cordon/error.h>
#include <cordon/snapshot.h>

struct fixture {
  char dir[64];
  char store[96];
  struct cordon_cas *cas;
};

/* cmocka's setup and teardown: a fresh directory under /tmp and a store in it. */
int setup(void **state);
int teardown(void **state);

/* Fails the test with err's message when r < 0. */
void must(int r, struct cordon_error *err, const char *what);
/* f->dir/rel, malloc'd. */
char *path_of(struct fixture *f, const char *rel);

/* Create root/rel with content and mode, parents as needed (0755). */
void mk(const char *root, const char *rel, const void *content, size_t len, mode_t mode);
void mks(const char *root, const char *rel, const char *content, mode_t mode);
void mkdir_in(const char *root, const char *rel, mode_t mode);
void symlink_in(const char *root, const char *rel, const char *target);
/* The same tree, built in one of two orders; absolute links point into the tree's own root. */
void build_tree(const char *root, bool reverse);
/* Flip one bit of the byte at `at` of path (twice restores it). */
void flip(const char *path, off_t at);

void take(struct fixture *f, const char *dir, char id[CORDON_DIGEST_HEX_SIZE]);
unsigned char *export_bytes(struct fixture *f, const char *id, size_t *len);
void restore_to(struct fixture *f, const char *id, const char *dir);

#endif
