/* cordon — errors.
 *
 * A fallible function returns int (>= 0 success, < 0 failure) and, on failure, fills
 * *err (when err is not NULL) with an errno-style code and a message that names the object
 * involved (path, digest, backend). The caller owns the error and frees it with
 * cordon_error_free(). */
#ifndef CORDON_ERROR_H
#define CORDON_ERROR_H

#include <stdarg.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(CORDON_BUILDING_LIBRARY)
#define CORDON_API __attribute__((visibility("default")))
#else
#define CORDON_API
#endif

/* Error kinds beyond errno values, so callers can map them to exit codes. */
enum cordon_error_kind {
  CORDON_ERR_SYSTEM = 0,  /* errno carries the cause */
  CORDON_ERR_USAGE,       /* bad flags or arguments */
  CORDON_ERR_NOT_FOUND,   /* session, backend, file or blob missing */
  CORDON_ERR_INVALID,     /* malformed input: JSON, state file, manifest */
  CORDON_ERR_UNAVAILABLE, /* backend or mechanism missing on this host */
  CORDON_ERR_DENIED,      /* refused by policy (path escape, fail-closed confinement) */
  CORDON_ERR_INTEGRITY,   /* digest mismatch, tampered data */
  CORDON_ERR_UNSUPPORTED, /* the backend does not declare the capability */
  CORDON_ERR_INTERRUPTED, /* cordon_interrupt() was called: the work was stopped and undone */
};

struct cordon_error {
  enum cordon_error_kind kind;
  int errnum;    /* errno value, 0 when not a system error */
  char *message; /* one line, names the object, no trailing newline */
};

CORDON_API void cordon_error_free(struct cordon_error *err);

/* Set *err (if err and *err is NULL) and return -1 (or -errnum when errnum != 0). The message
 * gets ": strerror(errnum)" appended when errnum != 0. */
CORDON_API int cordon_error_set(struct cordon_error **err, enum cordon_error_kind kind, int errnum,
                                const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Prefix an existing error's message with "context: ". Returns the same code as the error. */
CORDON_API int cordon_error_prefix(struct cordon_error **err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Ask the library to stop: async-signal-safe, for a SIGINT/SIGTERM handler. A wait for a
 * command kills the command's process tree and fails with CORDON_ERR_INTERRUPTED; a batch of
 * sessions, or a race, stops and destroys the sessions it made. Stays set for the life of the
 * process. */
CORDON_API void cordon_interrupt(void);
CORDON_API bool cordon_interrupted(void);

#ifdef __cplusplus
}
#endif
#endif
