/* Following the project's event log (.cordon/events.jsonl, written by the CLI: one JSON object
 * per line) for the metrics: each poll reads the complete lines added since the last one. The
 * log is rotated by renaming it to events.jsonl.1; a poll that finds a new file first finishes
 * the old one (by inode) from where it stopped, then starts the new one at its beginning. A
 * file that shrank was truncated and is read again from the start. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "server/metrics.h"

#define EVENTS_FILE "events.jsonl"
#define EVENTS_ROTATED "events.jsonl.1"
/* Read in pieces of this size; a line longer than one piece is skipped (no event is). */
#define EVENTS_PIECE (1u << 20)

struct events_reader {
  char *path, *rotated;
  ino_t inode; /* of the file being followed; 0 before the first */
  off_t offset;
  char *buf;
};

struct events_reader *events_reader_new(const char *state_dir) {
  struct events_reader *r = calloc(1, sizeof(*r));
  if (!r || asprintf(&r->path, "%s/%s", state_dir, EVENTS_FILE) < 0 ||
      asprintf(&r->rotated, "%s/%s", state_dir, EVENTS_ROTATED) < 0 ||
      !(r->buf = malloc(EVENTS_PIECE))) {
    events_reader_free(r);
    return NULL;
  }
  return r;
}

void events_reader_free(struct events_reader *r) {
  if (!r)
    return;
  free(r->path);
  free(r->rotated);
  free(r->buf);
  free(r);
}

/* Feed the complete lines of fd from *offset on; *offset ends after the last newline. */
static void read_lines(struct events_reader *r, int fd, off_t *offset, struct metrics *m) {
  for (;;) {
    ssize_t n = pread(fd, r->buf, EVENTS_PIECE, *offset);
    if (n <= 0)
      return;
    size_t start = 0;
    for (size_t i = 0; i < (size_t)n; i++)
      if (r->buf[i] == '\n') {
        metrics_apply_event(m, r->buf + start, i - start);
        start = i + 1;
      }
    if (start == 0) {
      if ((size_t)n < EVENTS_PIECE)
        return;          /* a line still being written */
      start = (size_t)n; /* an overlong line: skipped */
    }
    *offset += (off_t)start;
  }
}

void events_reader_poll(struct events_reader *r, struct metrics *m) {
  _cleanup_close_ int fd = open(r->path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  bool present = fd >= 0 && fstat(fd, &st) == 0;
  if (r->inode && (!present || st.st_ino != r->inode)) {
    /* Rotated: the rest of the file we followed is under its new name. */
    _cleanup_close_ int old = open(r->rotated, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat ost;
    if (old >= 0 && fstat(old, &ost) == 0 && ost.st_ino == r->inode)
      read_lines(r, old, &r->offset, m);
    r->inode = 0;
    r->offset = 0;
  }
  if (!present)
    return;
  if (!r->inode) {
    r->inode = st.st_ino;
    r->offset = 0;
  }
  if (st.st_size < r->offset)
    r->offset = 0;
  read_lines(r, fd, &r->offset, m);
}
