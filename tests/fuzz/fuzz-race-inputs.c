/* libFuzzer target for the forms of a race's per-candidate options (src/race/forms.c):
 * --candidate I:FILE=SRC, --candidate-env I:KEY=VALUE, --patch I:PATCHFILE. The first byte picks
 * the form (low two bits) and the number of candidates k (the rest: 0..63); the remaining bytes,
 * up to a NUL, are the argument. What parses names a candidate below k, and its parts lie
 * within the argument, as the form says: FILE and SRC non-empty, KEY=VALUE with a '=' after a
 * non-empty KEY, a non-empty PATCHFILE. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "race/forms.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  enum race_form form = (enum race_form)((data[0] & 3u) % 3u);
  unsigned k = data[0] >> 2;
  char *arg = strndup((const char *)data + 1, size - 1);
  if (!arg)
    return 0;
  size_t length = strlen(arg);
  struct race_form_value v;
  struct cordon_error *err = NULL;
  if (race_form_parse(form, arg, k, &v, &err) < 0) {
    if (!err || err->kind != CORDON_ERR_USAGE || !err->message)
      abort(); /* a refusal is the user's mistake, and says so */
    cordon_error_free(err);
    free(arg);
    return 0;
  }
  const char *end = arg + length;
  if (v.index >= k || !strchr(arg, ':'))
    abort();
  if (v.name < arg || v.name + v.name_length > end || v.value < arg || v.value > end)
    abort();
  switch (form) {
  case RACE_FORM_FILE:
    if (!v.name_length || !*v.value || v.value != v.name + v.name_length + 1 ||
        memchr(v.name, '=', v.name_length))
      abort();
    break;
  case RACE_FORM_ENV:
    if (v.value[0] == '=' || !strchr(v.value, '='))
      abort();
    break;
  case RACE_FORM_PATCH:
    if (!*v.value)
      abort();
    break;
  }
  free(arg);
  return 0;
}
