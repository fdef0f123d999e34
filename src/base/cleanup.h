/* Scope-bound cleanup (bubblewrap/systemd style). Declare with the attribute, hand ownership
 * on with steal_ptr()/steal_fd(). */
#ifndef CORDON_BASE_CLEANUP_H
#define CORDON_BASE_CLEANUP_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <dirent.h>

static inline void cleanup_freep(void *p) {
  free(*(void **)p);
}
static inline void cleanup_closep(int *fd) {
  if (*fd >= 0) {
    int saved = errno;
    close(*fd);
    errno = saved;
  }
}
static inline void cleanup_fclosep(FILE **f) {
  if (*f)
    fclose(*f);
}
static inline void cleanup_closedirp(DIR **d) {
  if (*d)
    closedir(*d);
}

#define _cleanup_(fn) __attribute__((cleanup(fn)))
#define _cleanup_free_ _cleanup_(cleanup_freep)
#define _cleanup_close_ _cleanup_(cleanup_closep)
#define _cleanup_fclose_ _cleanup_(cleanup_fclosep)
#define _cleanup_closedir_ _cleanup_(cleanup_closedirp)

#define steal_ptr(pp)                  \
  ({                                   \
    __typeof__(*(pp)) stolen_ = *(pp); \
    *(pp) = NULL;                      \
    stolen_;                           \
  })

static inline int steal_fd(int *fd) {
  int r = *fd;
  *fd = -1;
  return r;
}

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#endif
