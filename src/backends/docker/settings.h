/* The docker backend's settings from the environment: the default image, the check an image
 * reference passes before it goes into a URL, and where the cordon-docker-init binary is.
 * Calls nothing else of the backend. */
#ifndef CORDON_BACKENDS_DOCKER_SETTINGS_H
#define CORDON_BACKENDS_DOCKER_SETTINGS_H

#include <cordon/error.h>

/* The image a manifest that names none gets: $CORDON_DOCKER_IMAGE, else DOCKER_DEFAULT_IMAGE. */
const char *docker_default_image(void);
/* Refuse an image reference holding anything that could change the request's URL. */
int docker_check_image_name(const char *image, struct cordon_error **err);
/* The absolute path of the cordon-docker-init binary to bind-mount, or an error saying where
 * it was looked for. */
int docker_init_binary(const char **out, struct cordon_error **err);

#endif
