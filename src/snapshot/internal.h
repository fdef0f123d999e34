/* Pieces the snapshot module's files share: loading a verified manifest, storing a new one
 * (stored.c). */
#ifndef CORDON_SNAPSHOT_INTERNAL_H
#define CORDON_SNAPSHOT_INTERNAL_H

#include <cordon/snapshot.h>

#include "snapshot/manifest.h"
#include "store/cas.h"

/* Parse a snapshot id (64 lowercase hex digits). */
int snap_parse_id(const char *hex, unsigned char id[CAS_DIGEST_LEN], struct cordon_error **err);

/* Read the manifest blob (verified against its id) and parse it strictly. */
int snap_load_manifest(struct cordon_cas *cas, const unsigned char id[CAS_DIGEST_LEN],
                       struct snap_manifest *out, struct cordon_error **err);

/* Encode entries, store the manifest (fsync'd, with a sidecar naming its type) and add a ref;
 * id receives the snapshot id. */
int snap_store_manifest(struct cordon_cas *cas, const struct snap_entry *entries, size_t count,
                        unsigned char id[CAS_DIGEST_LEN], struct cordon_error **err);

/* Stage already-encoded manifest bytes in the batch, commit the batch (one round of syncs for
 * the blobs and the manifest) and only then add the ref. */
int snap_commit_manifest(struct cas_batch *batch, const struct snap_buf *bytes,
                         unsigned char id[CAS_DIGEST_LEN], struct cordon_error **err);

#endif
