/* Helpers the pool module's files share: checks of JSON values and names, capability
 * sets as JSON, the canonical hash of a value. */
#ifndef CORDON_POOL_INTERNAL_H
#define CORDON_POOL_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include <cordon/audit.h>
#include <cordon/cas.h>
#include <cordon/error.h>
#include <cordon/keys.h>

/* For _cleanup_(): the handles the effects hold. */
static inline void audit_closep(struct cordon_audit_log **log) {
  if (*log)
    cordon_audit_close(*log);
}
static inline void cas_closep(struct cordon_cas **cas) {
  if (*cas)
    cordon_cas_close(*cas);
}

/* The capabilities a pool may name: every protocol capability but caller_stdio (plumbing). */
#define POOL_CAPABILITIES                                                       \
  (CORDON_CAP_FILE_RW | CORDON_CAP_EXEC | CORDON_CAP_NETWORK | CORDON_CAP_GPU | \
   CORDON_CAP_SNAPSHOT | CORDON_CAP_PERSISTENT_VOLUMES)

/* A whole number 0..2^53 (every JSON number is read as a double). */
bool pool_json_uint(const json_t *v, uint64_t *out);
/* A string without NUL. */
bool pool_json_plain_string(const json_t *v);
/* [A-Za-z_][A-Za-z0-9_]*, at most 128 bytes. */
bool pool_env_name_valid(const char *name);
/* A workspace-relative path: not empty, not absolute, no "..", no empty or NUL component
 * (except "." alone: the whole workspace), at most 4096 bytes. */
bool pool_rel_path_valid(const char *path);
/* An absolute path without "." or ".." components. */
bool pool_abs_path_valid(const char *path);
/* [a-z0-9][a-z0-9_.-]*, at most 64 bytes: a backend name. */
bool pool_backend_name_valid(const char *name);

/* A JSON array of unique strings, each accepted by valid (NULL: any non-empty string), at most
 * POOL_LIST_MAX long, into a NULL-terminated vector in the given order. On a bad value: -1
 * with *why (static) and *bad_index. */
int pool_json_strings(const json_t *v, bool (*valid)(const char *), char ***out, const char **why,
                      size_t *bad_index);
/* A JSON array of capability names into a set; -1 with *bad (the offending name, or NULL when
 * the value is not an array of strings, or a duplicate). */
int pool_json_capabilities(const json_t *v, uint32_t *out, const char **bad);
/* The set as a JSON array of names, in the protocol's order. */
json_t *pool_capabilities_json(uint32_t caps);

/* Canonical bytes of v and their SHA-256 (hash: 65 bytes). canonical may be NULL. */
int pool_hash_json(const json_t *v, char **canonical, size_t *length, char hash[65],
                   struct cordon_error **err);

#endif
