/* Devices and backends: which backends take device grants (ns and docker, built in) and the
 * gpu capability each has on this host. */
#ifndef CORDON_PROTOCOL_DEVICES_H
#define CORDON_PROTOCOL_DEVICES_H

#include <stdbool.h>

#include <cordon/backend.h>

/* The built-in ns or docker backend (a plugin of either name is not it). */
bool protocol_backend_takes_devices(const struct cordon_backend *backend);

/* Refuse, naming the backend, a manifest with devices for a backend that cannot take them. */
int protocol_refuse_devices(const struct cordon_backend *backend, const struct cordon_manifest *m,
                            struct cordon_error **err);

#endif
