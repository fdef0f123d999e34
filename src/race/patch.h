/* A strict applier of unified diffs (pure): the per-candidate --patch of a race. A patch is
 * split into its files, and each file's hunks are applied to that file's bytes with exact
 * context at the stated line numbers, no fuzz, no offset search: a patch that does not apply
 * as written is refused with a one-line reason. The race reads and writes the files through
 * the session API (race/inputs.c), so this needs no `patch` binary and no backend support. */
#ifndef CORDON_RACE_PATCH_H
#define CORDON_RACE_PATCH_H

#include <stdbool.h>
#include <stddef.h>

/* The largest patch a race takes, and the most files one patch may touch. */
#define RACE_PATCH_MAX_BYTES (16u << 20)
#define RACE_PATCH_MAX_FILES 4096u

struct race_patch_file {
  char *path;       /* workspace-relative, a/ or b/ removed */
  bool creates;     /* --- /dev/null: the file must not exist */
  const char *body; /* the hunks' text, inside the patch */
  size_t body_length;
};

struct race_patch {
  struct race_patch_file *files;
  size_t n_files;
};

/* Split a patch into its files. Returns 0, or -1 with *why (static text). Deleting a file
 * (+++ /dev/null) is refused: the session API writes files, it does not remove them. */
int race_patch_parse(const char *text, size_t length, struct race_patch *out, const char **why);
void race_patch_clear(struct race_patch *p);

/* Apply one file's hunks to old (old_length bytes; NULL and 0 for a file being created).
 * Returns 0 with *out malloc'd (its length in *out_length), or -1 with *why (static text). */
int race_patch_apply(const struct race_patch_file *f, const char *old, size_t old_length,
                     char **out, size_t *out_length, const char **why);

#endif
