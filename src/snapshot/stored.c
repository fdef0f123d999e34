/* Manifests in the store, by id: parsing a snapshot id, loading a manifest (verified against its
 * id, parsed strictly) and storing a new one with its ref. Every other file of the module that
 * reads or writes a snapshot goes through here, so the files above it (snapshot.c, restore.c,
 * tar.c, gc.c) depend on this one and never on each other for it. */
#include <stdlib.h>
#include <string.h>

#include "snapshot/internal.h"

int snap_parse_id(const char *hex, unsigned char id[CAS_DIGEST_LEN], struct cordon_error **err) {
  if (cas_unhex(hex, id) < 0)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                            "'%s' is not a snapshot id (64 lowercase hex digits)", hex ? hex : "");
  return 0;
}

int snap_load_manifest(struct cordon_cas *cas, const unsigned char id[CAS_DIGEST_LEN],
                       struct snap_manifest *out, struct cordon_error **err) {
  char hex[CAS_HEX_LEN + 1];
  cas_hex(id, hex);
  unsigned char *data = NULL;
  size_t len = 0;
  struct cordon_error *read_err = NULL;
  /* A snapshot's reads see the packs on disk now, not the ones an earlier call loaded. */
  cas_packs_refresh(cas, NULL);
  if (cas_read_verified(cas, id, SNAP_MANIFEST_MAX, &data, &len, &read_err) < 0) {
    int r;
    if (read_err->kind == CORDON_ERR_NOT_FOUND)
      r = cordon_error_set(err, CORDON_ERR_NOT_FOUND, 0, "no snapshot %s in store %s", hex,
                           cas->dir);
    else
      r = cordon_error_set(err, read_err->kind, read_err->errnum, "snapshot %s: %s", hex,
                           read_err->message);
    cordon_error_free(read_err);
    return r;
  }
  int r = snap_manifest_parse(data, len, out, err);
  free(data);
  if (r < 0)
    return cordon_error_prefix(err, "snapshot %s", hex);
  return 0;
}

static int store_manifest_bytes(struct cordon_cas *cas, const struct snap_buf *bytes,
                                unsigned char id[CAS_DIGEST_LEN], struct cordon_error **err) {
  if (cas_put_internal(cas, bytes->data, bytes->length, CAS_MANIFEST_TYPE, NULL, id, err) < 0)
    return cordon_error_prefix(err, "cannot store the manifest");
  return cas_ref_add(cas, id, err);
}

int snap_commit_manifest(struct cas_batch *batch, const struct snap_buf *bytes,
                         unsigned char id[CAS_DIGEST_LEN], struct cordon_error **err) {
  if (cas_batch_add_typed(batch, bytes->data, bytes->length, CAS_MANIFEST_TYPE, id, err) < 0)
    return cordon_error_prefix(err, "cannot store the manifest");
  if (cas_batch_commit(batch, err) < 0)
    return -1;
  /* The ref last: it names the manifest, which names every blob, all durable by now. */
  return cas_ref_add(cas_batch_store(batch), id, err);
}

int snap_store_manifest(struct cordon_cas *cas, const struct snap_entry *entries, size_t count,
                        unsigned char id[CAS_DIGEST_LEN], struct cordon_error **err) {
  struct snap_buf buf = {0};
  int r = snap_manifest_encode(entries, count, &buf, err);
  if (r == 0)
    r = store_manifest_bytes(cas, &buf, id, err);
  snap_buf_free(&buf);
  return r;
}
