/* A plugin built against backend ABI 2, before backends declared the policy features they
 * enforce: the registry must refuse it by name (it would silently ignore --ro, --memory...),
 * and keep loading the others. The struct is ABI 2's layout: nothing past abi_version is read. */
#include <stdint.h>

struct abi2_backend {
  uint32_t abi_version;
  const char *name;
};

__attribute__((visibility("default"))) const void *cordon_plugin_entry(uint32_t *abi_version);

static const struct abi2_backend old = {.abi_version = 2, .name = "old"};

const void *cordon_plugin_entry(uint32_t *abi_version) {
  *abi_version = 2;
  return &old;
}
