/* libcurl, loaded on first use (see curl-loader.h). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "backends/docker/curl-loader.h"

#define CURL_SONAME "libcurl.so.4"

static struct curl_api api;
static char load_error[512];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void) {
  void *handle = dlopen(CURL_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *why = dlerror();
    snprintf(load_error, sizeof(load_error),
             "cannot load %s (needed to talk to the Docker engine; install libcurl4): %s",
             CURL_SONAME, why ? why : "unknown error");
    return;
  }
#define CURL_LOADER_RESOLVE(name)                                                \
  if (!(*(void **)&api.name = dlsym(handle, #name))) {                           \
    snprintf(load_error, sizeof(load_error), "%s lacks %s", CURL_SONAME, #name); \
    return;                                                                      \
  }
  CURL_LOADER_FUNCTIONS(CURL_LOADER_RESOLVE)
#undef CURL_LOADER_RESOLVE
  /* No TLS: the engine is reached over a unix socket, so OpenSSL needs no initialisation. The
   * library stays loaded for the life of the process (no curl_global_cleanup). */
  CURLcode rc = api.curl_global_init(CURL_GLOBAL_NOTHING);
  if (rc != CURLE_OK)
    snprintf(load_error, sizeof(load_error), "libcurl initialisation failed: %s",
             api.curl_easy_strerror(rc));
}

const struct curl_api *curl_api_get(struct cordon_error **err) {
  pthread_once(&once, load);
  if (load_error[0]) {
    cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0, "%s", load_error);
    return NULL;
  }
  return &api;
}
