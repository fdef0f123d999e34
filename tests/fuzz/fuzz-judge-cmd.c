/* libFuzzer target for --judge-cmd (src/race/forms.c): the judge's whole argv as a JSON array of
 * strings, often pasted from a script. The input, up to a NUL, is the option's value. What
 * parses is an argv exactly as long as the array, its first word non-empty, and it survives a
 * round trip through JSON unchanged. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/strv.h"
#include "race/forms.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = strndup((const char *)data, size);
  if (!text)
    return 0;
  char **argv = NULL;
  struct cordon_error *err = NULL;
  if (race_judge_cmd_parse(text, &argv, &err) < 0) {
    if (argv || !err || err->kind != CORDON_ERR_USAGE)
      abort();
    cordon_error_free(err);
    free(text);
    return 0;
  }
  if (!argv || !argv[0] || !argv[0][0])
    abort();
  json_t *again = json_array();
  for (size_t i = 0; argv[i]; i++)
    json_array_append_new(again, json_string(argv[i]));
  char *dumped = json_dumps(again, 0);
  char **twice = NULL;
  if (!dumped || race_judge_cmd_parse(dumped, &twice, NULL) < 0)
    abort();
  size_t n = strv_length((const char *const *)argv);
  if (strv_length((const char *const *)twice) != n)
    abort();
  for (size_t i = 0; i < n; i++)
    if (strcmp(argv[i], twice[i]))
      abort();
  strv_free(twice);
  free(dumped);
  json_decref(again);
  strv_free(argv);
  free(text);
  return 0;
}
