/* The library's side of -v (volume.c): a manifest's volumes checked and resolved to host
 * directories before a backend sees them, and what a session's state file records of them. */
#ifndef CORDON_PROTOCOL_VOLUME_H
#define CORDON_PROTOCOL_VOLUME_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include <cordon/backend.h>
#include <cordon/error.h>

struct cordon_context;

struct volumes_resolved {
  struct cordon_volume *list; /* sources: canonical host directories */
  size_t n;
  char **strings; /* what list points into */
  json_t *record; /* the state file's "volumes": [{name?, source, target, read_only}] */
};

/* Pure: a volume's target against the workspace root `root` and the directories the sandbox
 * needs (see struct cordon_volume); *out is the normalised target. */
int volume_check_target(const char *target, const char *root, char **out,
                        struct cordon_error **err);

/* Check every volume of m (root: the session's workspace root) and resolve its source: a name
 * to .cordon/volumes/NAME (made when missing), a host directory to its canonical path (missing,
 * not a directory, or private: refused by name). */
int volumes_resolve(struct cordon_context *ctx, const struct cordon_manifest *m, const char *root,
                    struct volumes_resolved *out, struct cordon_error **err);
void volumes_resolved_clear(struct volumes_resolved *v);

/* .cordon/volumes (made when create is true); malloc'd in *out. */
int volumes_dir(struct cordon_context *ctx, bool create, char **out, struct cordon_error **err);

/* A state file's "volumes" value is well formed (an array of such objects). */
bool volumes_record_valid(const json_t *record);

#endif
