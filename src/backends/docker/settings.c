/* The docker backend's settings from the environment (settings.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/docker/docker-paths.h"
#include "backends/docker/docker.h"
#include "backends/docker/settings.h"

const char *docker_default_image(void) {
  const char *image = getenv("CORDON_DOCKER_IMAGE");
  return image && *image ? image : DOCKER_DEFAULT_IMAGE;
}

/* Image references go into URL paths: accept the characters a reference may hold and nothing
 * that could change the request (?, #, %, spaces). */
int docker_check_image_name(const char *image, struct cordon_error **err) {
  size_t n = strlen(image);
  if (n == 0 || n > 255)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "image name '%s' is empty or too long",
                            image);
  for (size_t i = 0; i < n; i++) {
    char c = image[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
          strchr("._-/:@", c)))
      return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                              "image name '%s' holds a character not allowed in image references",
                              image);
  }
  return 0;
}

/* The init binary to bind-mount: $CORDON_DOCKER_INIT, else the installed one, else the one in
 * the build tree (for tests and benchmarks run from a build directory). */
static const char *init_binary(void) {
  const char *env = getenv("CORDON_DOCKER_INIT");
  if (env && *env)
    return env;
  if (access(CORDON_DOCKER_INIT_INSTALLED, X_OK) == 0)
    return CORDON_DOCKER_INIT_INSTALLED;
  if (access(CORDON_DOCKER_INIT_BUILD, X_OK) == 0)
    return CORDON_DOCKER_INIT_BUILD;
  return NULL;
}

int docker_init_binary(const char **out, struct cordon_error **err) {
  const char *path = init_binary();
  if (!path)
    return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0,
                            "cordon-docker-init not found (looked for %s; set CORDON_DOCKER_INIT)",
                            CORDON_DOCKER_INIT_INSTALLED);
  if (path[0] != '/' || access(path, X_OK) < 0)
    return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, errno ? errno : EINVAL,
                            "cordon-docker-init %s is not an executable absolute path", path);
  *out = path;
  return 0;
}
