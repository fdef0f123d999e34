/* Devices and backends (devices.h). A device grant widens what a sandbox reaches, so it is no
 * policy feature to be waived: a backend that cannot bind the node is refused it outright. */
#include <string.h>

#include "confine/devices.h"
#include "protocol/devices.h"
#include "protocol/registry.h"

bool protocol_backend_takes_devices(const struct cordon_backend *backend) {
  for (size_t i = 0; cordon_builtin_backends[i]; i++)
    if (cordon_builtin_backends[i] == backend)
      return strcmp(backend->name, "ns") == 0 || strcmp(backend->name, "docker") == 0;
  return false;
}

int protocol_refuse_devices(const struct cordon_backend *backend, const struct cordon_manifest *m,
                            struct cordon_error **err) {
  if (!m->devices || !m->devices[0] || protocol_backend_takes_devices(backend))
    return 0;
  return cordon_error_set(err, CORDON_ERR_UNSUPPORTED, 0,
                          "backend %s cannot pass devices into its sandbox (--device, --gpu: "
                          "only ns and docker can)",
                          backend->name);
}

uint32_t cordon_backend_capabilities(const struct cordon_backend *backend) {
  uint32_t caps = backend->capabilities;
  if (protocol_backend_takes_devices(backend) && confine_gpu_present())
    caps |= CORDON_CAP_GPU;
  return caps;
}
