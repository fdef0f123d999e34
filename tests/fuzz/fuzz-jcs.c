/* libFuzzer target for canonical JSON (src/crypto/jcs.c), differential:
 *   - parsing never crashes; whatever parses serialises, and the serialisation is a fixed point
 *     (parse → serialise → parse → serialise gives the same bytes);
 *   - the tree-free checker accepts exactly the texts that are their own canonical form:
 *     jcs_check_canonical(x) succeeds iff jcs_parse(x) succeeds and serialises back to x;
 *   - every number the serialiser writes reads back to the same double. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crypto/jcs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *text = (const char *)data;
  struct jcs_span members[8];
  struct jcs_check check;
  int canonical = jcs_check_canonical(text, size, members, 8, &check);

  json_t *value = NULL;
  struct cordon_error *err = NULL;
  if (jcs_parse(text, size, 1u << 20, "fuzz", &value, &err) < 0) {
    cordon_error_free(err);
    if (canonical == 0 && size <= (1u << 20))
      abort(); /* the checker accepted what the parser refuses */
    return 0;
  }
  char *once = NULL, *twice = NULL;
  size_t once_length = 0, twice_length = 0;
  if (jcs_dump(value, &once, &once_length, &err) < 0) {
    /* Only values that cannot be canonical (integers beyond 2^53 are impossible here since
     * every number parses as a double) may fail; nothing else should. */
    cordon_error_free(err);
    json_decref(value);
    if (canonical == 0)
      abort();
    return 0;
  }
  bool same = once_length == size && !memcmp(once, text, size);
  if ((canonical == 0) != same)
    abort(); /* checker and parser+serialiser disagree on whether the input is canonical */

  json_t *again = NULL;
  if (jcs_parse(once, once_length, 0, "fuzz", &again, NULL) < 0)
    abort();
  if (jcs_dump(again, &twice, &twice_length, NULL) < 0)
    abort();
  if (twice_length != once_length || memcmp(once, twice, once_length))
    abort();
  if (jcs_check_canonical(once, once_length, NULL, 0, &check) < 0)
    abort();
  if (check.type == 'o' && check.n_members != json_object_size(again))
    abort();

  if (json_is_number(value)) {
    double d = json_number_value(value);
    char formatted[40];
    if (jcs_format_double(d, formatted, sizeof(formatted)) < 0 || strtod(formatted, NULL) != d)
      if (!(d == 0 && strtod(formatted, NULL) == 0))
        abort();
  }
  free(once);
  free(twice);
  json_decref(again);
  json_decref(value);
  return 0;
}
