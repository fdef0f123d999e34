/* libcurl, loaded on first use.
 *
 * Linking libcurl would make every `cordon` start-up load it and its ~30 dependencies (OpenSSL,
 * nghttp2, libssh2, Kerberos, LDAP, ...), which would cost every backend's cold start; only
 * the docker backend needs it, so it calls libcurl through this table, filled by dlopen() of
 * libcurl's soname (libcurl.so.4, stable since 2006). Same pattern as backends/git-loader.h. */
#ifndef CORDON_BACKENDS_DOCKER_CURL_LOADER_H
#define CORDON_BACKENDS_DOCKER_CURL_LOADER_H

/* The type-checking macros of curl.h would shadow the table's function pointers. */
#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>

#include <cordon/error.h>

#define CURL_LOADER_FUNCTIONS(X) \
  X(curl_global_init)            \
  X(curl_easy_init)              \
  X(curl_easy_setopt)            \
  X(curl_easy_perform)           \
  X(curl_easy_getinfo)           \
  X(curl_easy_cleanup)           \
  X(curl_easy_reset)             \
  X(curl_easy_strerror)          \
  X(curl_slist_append)           \
  X(curl_slist_free_all)

struct curl_api {
#define CURL_LOADER_FIELD(name) __typeof__(&name) name;
  CURL_LOADER_FUNCTIONS(CURL_LOADER_FIELD)
#undef CURL_LOADER_FIELD
};

/* The loaded and globally initialised table, or NULL with *err naming what is missing. */
const struct curl_api *curl_api_get(struct cordon_error **err);

#endif
