/* cordon — persistent volumes of a project.
 *
 * A named volume is a directory in the project's state, .cordon/volumes/NAME, made the first
 * time a session mounts it (`-v NAME:/PATH`, struct cordon_volume in backend.h). It outlives
 * every session and is never part of a workspace snapshot. These calls list and remove them;
 * a volume that a session still records in its state file is in use and stays. */
#ifndef CORDON_VOLUME_H
#define CORDON_VOLUME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cordon/error.h>

#ifdef __cplusplus
extern "C" {
#endif

struct cordon_context;

struct cordon_volume_info {
  char *name;
  char *path;    /* the host directory */
  uint64_t size; /* bytes of the regular files in it (apparent sizes, links not followed) */
};

/* [A-Za-z0-9][A-Za-z0-9_.-]{0,63} (pure). */
CORDON_API bool cordon_volume_name_valid(const char *name);

/* The project's volumes, sorted by name. */
CORDON_API int cordon_volume_list(struct cordon_context *ctx, struct cordon_volume_info **out,
                                  size_t *count, struct cordon_error **err);
CORDON_API void cordon_volume_infos_free(struct cordon_volume_info *infos, size_t count);

/* Remove a volume and everything in it. CORDON_ERR_NOT_FOUND: no such volume;
 * CORDON_ERR_DENIED: a session (named in the message) uses it. */
CORDON_API int cordon_volume_remove(struct cordon_context *ctx, const char *name,
                                    struct cordon_error **err);

#ifdef __cplusplus
}
#endif
#endif
