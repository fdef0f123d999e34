/* libFuzzer target for the ns holder's configuration as bytes (src/backends/ns/config.c), what
 * a spawner exec'd afresh reads from its memfd: the loader neither crashes nor leaks on any
 * input; a refusal is CORDON_ERR_INVALID on one line; a configuration it takes is saved to
 * bytes that load back and save to the same bytes, and its HMAC state, if any, answers. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backends/ns/config.h"
#include "base/fs.h"
#include "crypto/digest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A memfd holding size bytes of data, read from its start. */
static int memfd_of(const void *data, size_t size) {
  int fd = memfd_create("fuzz", MFD_CLOEXEC);
  if (fd < 0 || (size && fs_write_all(fd, data, size) < 0) || lseek(fd, 0, SEEK_SET) != 0)
    abort();
  return fd;
}

static struct ns_holder_config *load(const void *data, size_t size) {
  int fd = memfd_of(data, size);
  struct ns_holder_config *cfg = NULL;
  struct cordon_error *err = NULL;
  if (ns_holder_config_load(fd, &cfg, &err) < 0) {
    if (cfg || !err || err->kind != CORDON_ERR_INVALID || !err->message ||
        strchr(err->message, '\n'))
      abort();
    cordon_error_free(err);
  }
  close(fd);
  return cfg;
}

/* cfg's bytes, as the spawner's caller writes them. */
static unsigned char *saved(const struct ns_holder_config *cfg, size_t *length) {
  int fd = memfd_of(NULL, 0);
  unsigned char *text = NULL;
  if (ns_holder_config_save(cfg, fd, NULL) < 0 || lseek(fd, 0, SEEK_SET) != 0 ||
      fs_read_fd(fd, 1 << 24, &text, length, NULL) < 0)
    abort();
  close(fd);
  return text;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct ns_holder_config *cfg = load(data, size);
  if (!cfg)
    return 0;
  uint8_t mac[CRYPTO_SHA256_LEN];
  if (cfg->auth && crypto_hmac_2(cfg->auth, "chal", 4, "lenge", 5, mac, NULL) < 0)
    abort();
  size_t n1 = 0, n2 = 0;
  unsigned char *once = saved(cfg, &n1);
  struct ns_holder_config *again = load(once, n1);
  if (!again)
    abort(); /* what the saver writes, the loader takes */
  unsigned char *twice = saved(again, &n2);
  if (n1 != n2 || memcmp(once, twice, n1) != 0)
    abort();
  free(once);
  free(twice);
  ns_holder_config_free(again);
  ns_holder_config_free(cfg);
  return 0;
}
