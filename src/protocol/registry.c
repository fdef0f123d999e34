/* The backend registry: built-ins plus plugins found on CORDON_PLUGIN_PATH.
 *
 * A plugin is a shared object exporting CORDON_PLUGIN_ENTRY_SYMBOL. It is loaded with
 * RTLD_NOW | RTLD_LOCAL so an unresolved symbol fails at load time, not mid-session. Each
 * failure (dlopen error, missing entry, ABI mismatch, malformed backend, a name already taken)
 * becomes an entry carrying the reason, so `cordon backends` can name it while the other
 * plugins still load. Plugins stay loaded until the registry is freed. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cordon/session.h>

#include "protocol/registry.h"
#include "base/cleanup.h"
#include "base/strv.h"

struct registry_item {
  struct cordon_registry_entry entry;
  char *name_owned;
  char *origin_owned;
  char *error_owned;
  void *handle;
};

struct cordon_registry {
  struct registry_item *items;
  size_t count;
};

int cordon_backend_check(const struct cordon_backend *b, struct cordon_error **err) {
  if (!b)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "backend description is NULL");
  if (b->abi_version != CORDON_BACKEND_ABI_VERSION)
    return cordon_error_set(
        err, CORDON_ERR_INVALID, 0, "backend %s declares ABI version %u, cordon speaks %u",
        b->name ? b->name : "(unnamed)", b->abi_version, CORDON_BACKEND_ABI_VERSION);
  if (!b->name || !*b->name || strlen(b->name) > 64 || strpbrk(b->name, " /\t\n"))
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "backend has no valid name");
  if (!b->available || !b->create || !b->attach || !b->destroy || !b->shutdown)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                            "backend %s lacks a required operation (available, create, attach, "
                            "destroy, shutdown)",
                            b->name);
  if ((b->capabilities & CORDON_CAP_FILE_RW) && (!b->read || !b->write || !b->ls))
    return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                            "backend %s declares file_rw without read, write and ls", b->name);
  if ((b->capabilities & CORDON_CAP_EXEC) && !b->exec)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "backend %s declares exec without exec",
                            b->name);
  if ((b->capabilities & CORDON_CAP_SNAPSHOT) && (!b->snapshot || !b->resume))
    return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                            "backend %s declares snapshot without snapshot and resume", b->name);
  if (b->tier > CORDON_TIER_VM)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "backend %s has an unknown tier", b->name);
  if (b->enforces & ~CORDON_FEATURE_ALL)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                            "backend %s declares policy features cordon does not know (0x%x)",
                            b->name, b->enforces & ~CORDON_FEATURE_ALL);
  return 0;
}

static struct registry_item *add_item(struct cordon_registry *reg) {
  struct registry_item *grown = realloc(reg->items, (reg->count + 1) * sizeof(*grown));
  if (!grown)
    return NULL;
  reg->items = grown;
  struct registry_item *it = &reg->items[reg->count++];
  memset(it, 0, sizeof(*it));
  return it;
}

static const struct cordon_backend *find_loaded(const struct cordon_registry *reg,
                                                const char *name) {
  for (size_t i = 0; i < reg->count; i++)
    if (reg->items[i].entry.backend && strcmp(reg->items[i].entry.name, name) == 0)
      return reg->items[i].entry.backend;
  return NULL;
}

static void load_plugin(struct cordon_registry *reg, const char *path) {
  struct registry_item *it = add_item(reg);
  if (!it)
    return;
  const char *slash = strrchr(path, '/');
  it->origin_owned = strdup(path);
  it->name_owned = strdup(slash ? slash + 1 : path);
  it->entry.origin = it->origin_owned;
  it->entry.name = it->name_owned;

  struct cordon_error *err = NULL;
  void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *why = dlerror();
    cordon_error_set(&err, CORDON_ERR_INVALID, 0, "cannot load: %s", why ? why : "unknown");
    goto failed;
  }
  it->handle = handle;
  cordon_plugin_entry_fn entry;
  *(void **)&entry = dlsym(handle, CORDON_PLUGIN_ENTRY_SYMBOL);
  if (!entry) {
    cordon_error_set(&err, CORDON_ERR_INVALID, 0, "no entry symbol %s", CORDON_PLUGIN_ENTRY_SYMBOL);
    goto failed;
  }
  uint32_t abi = 0;
  const struct cordon_backend *b = entry(&abi);
  if (abi != CORDON_BACKEND_ABI_VERSION) {
    cordon_error_set(&err, CORDON_ERR_INVALID, 0,
                     "built against backend ABI version %u, cordon speaks %u", abi,
                     CORDON_BACKEND_ABI_VERSION);
    goto failed;
  }
  if (cordon_backend_check(b, &err) < 0)
    goto failed;
  if (find_loaded(reg, b->name)) {
    cordon_error_set(&err, CORDON_ERR_INVALID, 0, "backend name %s is already taken", b->name);
    goto failed;
  }
  free(it->name_owned);
  it->name_owned = strdup(b->name);
  it->entry.name = it->name_owned;
  it->entry.backend = b;
  return;

failed:
  it->error_owned = strdup(err && err->message ? err->message : "failed to load");
  it->entry.load_error = it->error_owned;
  cordon_error_free(err);
}

static int compare_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A directory contributes its *.so files in name order, so loading is deterministic. */
static void load_plugin_dir(struct cordon_registry *reg, const char *dir) {
  _cleanup_closedir_ DIR *d = opendir(dir);
  if (!d)
    return;
  char **names = NULL;
  size_t n = 0;
  struct dirent *de;
  while ((de = readdir(d))) {
    size_t len = strlen(de->d_name);
    if (len > 3 && strcmp(de->d_name + len - 3, ".so") == 0 && strv_push(&names, de->d_name) == 0)
      n++;
  }
  if (names)
    qsort(names, n, sizeof(char *), compare_names);
  for (size_t i = 0; i < n; i++) {
    _cleanup_free_ char *path = NULL;
    if (asprintf(&path, "%s/%s", dir, names[i]) >= 0)
      load_plugin(reg, path);
  }
  strv_free(names);
}

int cordon_registry_load(struct cordon_registry **out, struct cordon_error **err) {
  struct cordon_registry *reg = calloc(1, sizeof(*reg));
  if (!reg)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "registry");
  for (size_t i = 0; cordon_builtin_backends[i]; i++) {
    struct registry_item *it = add_item(reg);
    if (!it) {
      cordon_registry_free(reg);
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "registry");
    }
    it->entry.backend = cordon_builtin_backends[i];
    it->entry.name = cordon_builtin_backends[i]->name;
    it->entry.origin = "builtin";
  }
  const char *path = getenv("CORDON_PLUGIN_PATH");
  if (path && *path) {
    _cleanup_free_ char *copy = strdup(path);
    char *save = NULL;
    for (char *p = copy ? strtok_r(copy, ":", &save) : NULL; p; p = strtok_r(NULL, ":", &save)) {
      struct stat st;
      if (stat(p, &st) < 0)
        continue;
      if (S_ISDIR(st.st_mode))
        load_plugin_dir(reg, p);
      else
        load_plugin(reg, p);
    }
  }
  *out = reg;
  return 0;
}

void cordon_registry_free(struct cordon_registry *reg) {
  if (!reg)
    return;
  for (size_t i = 0; i < reg->count; i++) {
    struct registry_item *it = &reg->items[i];
    free(it->name_owned);
    free(it->origin_owned);
    free(it->error_owned);
    /* Plugins are not dlclose'd: a backend may have left handles (threads, atexit) behind. */
  }
  free(reg->items);
  free(reg);
}

size_t cordon_registry_count(const struct cordon_registry *reg) {
  return reg->count;
}

const struct cordon_registry_entry *cordon_registry_entry(const struct cordon_registry *reg,
                                                          size_t index) {
  return index < reg->count ? &reg->items[index].entry : NULL;
}

int cordon_registry_find(const struct cordon_registry *reg, const char *name,
                         const struct cordon_backend **out, struct cordon_error **err) {
  const struct cordon_backend *b = find_loaded(reg, name);
  if (b) {
    *out = b;
    return 0;
  }
  for (size_t i = 0; i < reg->count; i++) {
    const struct cordon_registry_entry *e = &reg->items[i].entry;
    if (e->load_error && strcmp(e->name, name) == 0)
      return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0, "plugin %s failed to load: %s",
                              e->origin, e->load_error);
  }
  return cordon_error_set(err, CORDON_ERR_NOT_FOUND, 0,
                          "no backend named %s (see `cordon backends`)", name);
}

const char *cordon_registry_default_name(void) {
  const char *env = getenv("CORDON_BACKEND");
  if (env && *env)
    return env;
  return "ns";
}
