/* libFuzzer target for `cordon snapshot import`: the archive is hostile by definition. Each
 * input is imported from a memfd into one scratch store; whatever it holds, the import must end
 * in a snapshot id or a one-line error, never a crash, a hang or a leak. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cordon/cas.h>
#include <cordon/snapshot.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static struct cordon_cas *cas;
  if (!cas) {
    char dir[] = "/tmp/cordon-fuzz-tar.XXXXXX";
    if (!mkdtemp(dir) || cordon_cas_open(dir, &cas, NULL) < 0)
      abort();
  }
  int fd = memfd_create("archive", MFD_CLOEXEC);
  if (fd < 0)
    abort();
  if (size && write(fd, data, size) != (ssize_t)size)
    abort();
  lseek(fd, 0, SEEK_SET);
  char id[CORDON_DIGEST_HEX_SIZE];
  struct cordon_error *err = NULL;
  if (cordon_snapshot_import(cas, fd, NULL, id, &err) < 0) {
    if (!err || !err->message || strchr(err->message, '\n'))
      abort(); /* a failure is one line */
  }
  cordon_error_free(err);
  close(fd);
  return 0;
}
