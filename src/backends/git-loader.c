/* libgit2, loaded on first use (see git-loader.h). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "backends/git-loader.h"

static struct git_api api;
static char load_error[512];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void) {
  void *handle = dlopen(CORDON_LIBGIT2_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *why = dlerror();
    snprintf(load_error, sizeof(load_error), "cannot load %s (needed for git workspaces): %s",
             CORDON_LIBGIT2_SONAME, why ? why : "unknown error");
    return;
  }
#define GIT_LOADER_RESOLVE(name)                                                           \
  if (!(*(void **)&api.name = dlsym(handle, #name))) {                                     \
    snprintf(load_error, sizeof(load_error), "%s lacks %s", CORDON_LIBGIT2_SONAME, #name); \
    return;                                                                                \
  }
  GIT_LOADER_FUNCTIONS(GIT_LOADER_RESOLVE)
#undef GIT_LOADER_RESOLVE
}

const struct git_api *git_api_get(struct cordon_error **err) {
  pthread_once(&once, load);
  if (load_error[0]) {
    cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0, "%s", load_error);
    return NULL;
  }
  return &api;
}
