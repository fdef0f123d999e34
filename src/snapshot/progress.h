/* A one-line progress bar for terminals (stderr), used by the CLI's long verbs. It draws only
 * when the stream is a terminal and clears its line when done; elsewhere it is silent.
 * (Belongs in src/base once base grows a progress module.) */
#ifndef CORDON_SNAPSHOT_PROGRESS_H
#define CORDON_SNAPSHOT_PROGRESS_H

#include <stdbool.h>
#include <stdio.h>

#include <cordon/cas.h>

struct tty_progress {
  struct cordon_progress progress; /* hand &progress to the library */
  FILE *out;
  bool active; /* out is a terminal */
  bool drawn;  /* a line is on screen */
  bool bytes;  /* done/total are bytes (else counts) */
  double start;
};

/* bytes: format done/total as sizes. Returns the progress to pass, or NULL when out is not a
 * terminal (so the library skips the work of reporting). */
const struct cordon_progress *tty_progress_init(struct tty_progress *p, FILE *out, bool bytes);
/* Erase the bar. */
void tty_progress_done(struct tty_progress *p);

#endif
