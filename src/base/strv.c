/* NULL-terminated string vectors. */
#include <stdlib.h>
#include <string.h>

#include "base/strv.h"

size_t strv_length(const char *const *v) {
  size_t n = 0;
  while (v && v[n])
    n++;
  return n;
}

void strv_free(char **v) {
  if (!v)
    return;
  for (char **p = v; *p; p++)
    free(*p);
  free(v);
}

char **strv_copy(const char *const *v) {
  size_t n = strv_length(v);
  char **out = calloc(n + 1, sizeof(char *));
  if (!out)
    return NULL;
  for (size_t i = 0; i < n; i++) {
    out[i] = strdup(v[i]);
    if (!out[i]) {
      strv_free(out);
      return NULL;
    }
  }
  return out;
}

int strv_push_take(char ***v, char *s) {
  if (!s)
    return -1;
  size_t n = strv_length((const char *const *)*v);
  char **grown = realloc(*v, (n + 2) * sizeof(char *));
  if (!grown) {
    free(s);
    return -1;
  }
  grown[n] = s;
  grown[n + 1] = NULL;
  *v = grown;
  return 0;
}

int strv_push(char ***v, const char *s) {
  return strv_push_take(v, strdup(s));
}

static size_t key_length(const char *kv) {
  const char *eq = strchr(kv, '=');
  return eq ? (size_t)(eq - kv) : strlen(kv);
}

char **strv_env_merge(const char *const *base, const char *const *over) {
  char **out = strv_copy(base);
  if (!out)
    return NULL;
  for (size_t i = 0; over && over[i]; i++) {
    size_t klen = key_length(over[i]);
    bool replaced = false;
    for (size_t j = 0; out[j]; j++) {
      if (key_length(out[j]) == klen && strncmp(out[j], over[i], klen) == 0) {
        char *copy = strdup(over[i]);
        if (!copy) {
          strv_free(out);
          return NULL;
        }
        free(out[j]);
        out[j] = copy;
        replaced = true;
        break;
      }
    }
    if (!replaced && strv_push(&out, over[i]) < 0) {
      strv_free(out);
      return NULL;
    }
  }
  return out;
}

const char *strv_env_get(const char *const *env, const char *key) {
  size_t klen = strlen(key);
  for (size_t i = 0; env && env[i]; i++)
    if (strncmp(env[i], key, klen) == 0 && env[i][klen] == '=')
      return env[i] + klen + 1;
  return NULL;
}

static int compare_strings(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

void strv_sort(char **v) {
  qsort(v, strv_length((const char *const *)v), sizeof(char *), compare_strings);
}
