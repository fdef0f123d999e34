/* A NULL-terminated string vector as a JSON array of its strings: the one copy of what five
 * modules had each written (a receipt's lists, an OCI process, a session's policy). */
#ifndef CORDON_BASE_STRV_JSON_H
#define CORDON_BASE_STRV_JSON_H

#include <jansson.h>

/* ["a", "b"]; NULL gives []. NULL on ENOMEM (or a string that is not UTF-8). */
json_t *strv_to_json(const char *const *list);

#endif
