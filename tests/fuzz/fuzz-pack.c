/* libFuzzer target for the pack format (src/store/pack.c): a pack is a file in .cordon/cas/packs
 * that anyone with write access to the store can replace, and its index is parsed before any
 * blob is read. Any input gives either an error (a static reason), or entries that each lie
 * inside the pack's data, in strictly increasing digest order; the tiling check then never
 * crashes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/pack.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < CAS_PACK_HEADER_LEN + CAS_PACK_TRAILER_LEN)
    return 0;
  const char *why = cas_pack_check_header(data);
  if (why && !*why)
    abort();
  uint64_t index_offset = 0, count = 0;
  why = cas_pack_parse_trailer(data + size - CAS_PACK_TRAILER_LEN, size, &index_offset, &count);
  if (why)
    return 0;
  if (index_offset < CAS_PACK_HEADER_LEN ||
      index_offset + count * CAS_PACK_ENTRY_LEN + CAS_PACK_TRAILER_LEN != size)
    abort();
  struct cas_pack_entry *entries = malloc((count ? count : 1) * sizeof(*entries));
  if (!entries)
    return 0;
  why = cas_pack_parse_index(data + index_offset, count, index_offset, entries);
  if (!why) {
    for (uint64_t i = 0; i < count; i++) {
      if (entries[i].offset < CAS_PACK_HEADER_LEN || entries[i].offset > index_offset ||
          entries[i].offset + entries[i].length > index_offset)
        abort();
      if (i && memcmp(entries[i - 1].digest, entries[i].digest, sizeof(entries[i].digest)) >= 0)
        abort();
    }
    cas_pack_check_tiling(entries, count, index_offset);
  }
  free(entries);
  return 0;
}
