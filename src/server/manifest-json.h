/* A session's manifest as the API's JSON gives it (POST /v1/sessions, docs/api.md): parsed
 * strictly (an unknown key or a wrong type is refused with its name), pure. */
#ifndef CORDON_SERVER_MANIFEST_JSON_H
#define CORDON_SERVER_MANIFEST_JSON_H

#include <stdbool.h>

#include <jansson.h>

#include <cordon/backend.h>

/* What a parsed manifest points at: its strings point into the JSON document, which must
 * outlive it; the arrays and decoded file contents are owned here. */
struct manifest_json {
  struct cordon_manifest manifest;
  struct cordon_repo_spec repo;
  const char *backend; /* NULL: the default backend */
  const char *from;    /* a snapshot to resume, or NULL */
  bool egress_given;   /* "net" was given; else the backend's default class applies */
  const char **env;    /* n_env entries, NULL, then the same n_env strings (owned) */
  size_t n_env;
  const char **sparse;
  const char **read_only;
  const char **hidden;
  const char **allow_ro;
  struct cordon_file_spec *files;
};

/* 0, or -1 with *why (malloc'd) naming the field. */
int manifest_json_parse(json_t *doc, struct manifest_json *out, char **why);
void manifest_json_clear(struct manifest_json *m);

/* The helpers the API's other bodies (exec-request.c) parse with, so that every body is as
 * strict in the same words. */

/* Refuse any key of object not in allowed (NULL-terminated); where ("" at the top) prefixes
 * the name given in *why. */
int json_only_keys(json_t *object, const char *where, const char *const *allowed, char **why);
/* doc's "env" (absent or null: *env is NULL) as a vector of "KEY=VALUE": *n entries, NULL,
 * then the same *n strings again, the owned copies that json_env_free frees (so a caller may
 * reorder the first ones). On failure nothing is left to free. */
int json_env_parse(json_t *doc, const char ***env, size_t *n, char **why);
void json_env_free(const char **env, size_t n);

#endif
