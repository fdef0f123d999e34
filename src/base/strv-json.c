/* A string vector as a JSON array (strv-json.h). */
#include "base/strv-json.h"

json_t *strv_to_json(const char *const *list) {
  json_t *a = json_array();
  for (size_t i = 0; a && list && list[i]; i++)
    if (json_array_append_new(a, json_string(list[i])) < 0) {
      json_decref(a);
      return NULL;
    }
  return a;
}
