/* NULL-terminated string vectors. */
#ifndef CORDON_BASE_STRV_H
#define CORDON_BASE_STRV_H

#include <stdbool.h>
#include <stddef.h>

size_t strv_length(const char *const *v);
char **strv_copy(const char *const *v); /* NULL input gives an empty vector */
void strv_free(char **v);
/* For _cleanup_(strv_freep) char **v = NULL; */
static inline void strv_freep(char ***v) {
  strv_free(*v);
}
/* Append a copy of s; returns 0 or -1 (ENOMEM). *v may be NULL. */
int strv_push(char ***v, const char *s);
/* Append s itself (takes ownership). */
int strv_push_take(char ***v, char *s);
/* Environment merge: copy base, then for each "K=V" in over replace or append K. */
char **strv_env_merge(const char *const *base, const char *const *over);
/* Value of key in a "K=V" vector, or NULL. */
const char *strv_env_get(const char *const *env, const char *key);
/* Sort in place with strcmp. */
void strv_sort(char **v);

#endif
