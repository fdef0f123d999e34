/* Sidecars: the optional <store>/<2 hex>/<64 hex>.meta.json next to a loose blob (content type
 * and metadata), shared by the single put (put.c), `cas info` (sidecar.c) and verify. */
#ifndef CORDON_STORE_SIDECAR_H
#define CORDON_STORE_SIDECAR_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/object.h"

/* Read and parse a blob's sidecar: 1 with *out a JSON object, 0 when there is none, -1 when it
 * cannot be read or is not a JSON object. */
int cas_sidecar_read(struct cordon_cas *cas, const unsigned char digest[CAS_DIGEST_LEN],
                     json_t **out, struct cordon_error **err);
/* Check a sidecar's fields against its blob. Returns NULL when fine, else a static reason. */
const char *cas_sidecar_problem(json_t *doc, const char *hex, uint64_t blob_size);
/* The sidecar's bytes: canonical-enough JSON (sorted keys, compact) and a newline. */
int cas_sidecar_text(const unsigned char digest[CAS_DIGEST_LEN], uint64_t size,
                     const char *content_type, const char *metadata_json, char **out,
                     size_t *out_len, struct cordon_error **err);
/* True when the sidecar on disk already holds exactly these bytes. */
bool cas_sidecar_same(int shard, const char *name, const char *text, size_t len);

#endif
