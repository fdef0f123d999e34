/* Errors: one-line messages that name the object, plus an errno and a kind. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cordon/error.h>

void cordon_error_free(struct cordon_error *err) {
  if (!err)
    return;
  free(err->message);
  free(err);
}

static char *vformat(const char *fmt, va_list ap) {
  char *s = NULL;
  if (vasprintf(&s, fmt, ap) < 0)
    return NULL;
  return s;
}

int cordon_error_set(struct cordon_error **err, enum cordon_error_kind kind, int errnum,
                     const char *fmt, ...) {
  int ret = errnum > 0 ? -errnum : -1;
  if (!err || *err)
    return ret;
  struct cordon_error *e = calloc(1, sizeof(*e));
  if (!e)
    return ret;
  va_list ap;
  va_start(ap, fmt);
  char *msg = vformat(fmt, ap);
  va_end(ap);
  if (msg && errnum > 0) {
    char *full = NULL;
    if (asprintf(&full, "%s: %s", msg, strerror(errnum)) >= 0) {
      free(msg);
      msg = full;
    }
  }
  e->kind = kind;
  e->errnum = errnum > 0 ? errnum : 0;
  e->message = msg ? msg : strdup("out of memory while reporting an error");
  *err = e;
  return ret;
}

int cordon_error_prefix(struct cordon_error **err, const char *fmt, ...) {
  if (!err || !*err)
    return -1;
  int ret = (*err)->errnum > 0 ? -(*err)->errnum : -1;
  va_list ap;
  va_start(ap, fmt);
  char *prefix = vformat(fmt, ap);
  va_end(ap);
  char *full = NULL;
  if (prefix && asprintf(&full, "%s: %s", prefix, (*err)->message) >= 0) {
    free((*err)->message);
    (*err)->message = full;
  }
  free(prefix);
  return ret;
}

/* Lock-free on every platform cordon builds for, so safe to set from a signal handler. */
static volatile sig_atomic_t interrupted;

void cordon_interrupt(void) {
  interrupted = 1;
}

bool cordon_interrupted(void) {
  return interrupted != 0;
}
