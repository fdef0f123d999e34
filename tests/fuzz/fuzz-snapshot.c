/* libFuzzer target for the snapshot module's parsers of untrusted bytes: the manifest (read
 * back from the store, where a blob may have been replaced) and the stat cache (a file in
 * .cordon/ that a crash can truncate). A manifest that parses must encode back to the very same
 * bytes (the encoding is canonical), and a stat cache that parses must stay within its bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "snapshot/manifest.h"
#include "snapshot/statcache.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct snap_manifest m = {0};
  struct cordon_error *err = NULL;
  if (snap_manifest_parse(data, size, &m, &err) == 0) {
    struct snap_buf out = {0};
    if (snap_manifest_encode(m.entries, m.count, &out, NULL) < 0)
      abort(); /* what the strict parser accepts is a valid manifest */
    if (out.length != size || memcmp(out.data, data, size) != 0)
      abort(); /* and its one canonical encoding */
    free(out.data);
    snap_manifest_free(&m);
  }
  cordon_error_free(err);

  /* statcache_parse works on a private writable copy, as on its mapping. */
  unsigned char *copy = malloc(size ? size : 1);
  if (!copy)
    return 0;
  memcpy(copy, data, size);
  struct statcache c;
  memset(&c, 0, sizeof(c));
  if (statcache_parse(copy, size, &c) == 0) {
    for (size_t i = 0; i < c.n_files; i++)
      if ((uint64_t)c.files[i].name_off + c.files[i].name_len > c.names_size)
        abort(); /* every record's name lies within the names the cache holds */
  }
  free(copy);
  return 0;
}
