/* A plugin built against a future ABI: the registry must refuse it by name and keep loading
 * the others. */
#include <cordon/backend.h>

__attribute__((visibility("default"))) const struct cordon_backend *
cordon_plugin_entry(uint32_t *abi_version);

static const struct cordon_backend future = {.abi_version = 999, .name = "future"};

const struct cordon_backend *cordon_plugin_entry(uint32_t *abi_version) {
  *abi_version = 999;
  return &future;
}
