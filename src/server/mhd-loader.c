/* libmicrohttpd, loaded when `cordon serve` starts (see mhd-loader.h). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#define MHD_LOADER_NO_REDIRECT 1
#include "server/mhd-loader.h"

#define MHD_SONAME "libmicrohttpd.so.12"

struct mhd_api mhd_api;
static char load_error[512];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void) {
  /* The library stays loaded for the life of the process. */
  void *handle = dlopen(MHD_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *why = dlerror();
    snprintf(load_error, sizeof(load_error),
             "cannot load %s (needed by cordon serve; install libmicrohttpd12): %s", MHD_SONAME,
             why ? why : "unknown error");
    return;
  }
#define MHD_LOADER_RESOLVE(name)                                                \
  if (!(*(void **)&mhd_api.name = dlsym(handle, #name))) {                      \
    snprintf(load_error, sizeof(load_error), "%s lacks %s", MHD_SONAME, #name); \
    return;                                                                     \
  }
  MHD_LOADER_FUNCTIONS(MHD_LOADER_RESOLVE)
#undef MHD_LOADER_RESOLVE
}

int mhd_api_load(struct cordon_error **err) {
  pthread_once(&once, load);
  if (load_error[0])
    return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0, "%s", load_error);
  return 0;
}
