/* The project's event log: one JSON object per line in <project>/.cordon/events.jsonl, for
 * operators and dashboards (`cordon events`, the server's /metrics). Not the audit chain: no
 * HMAC, no secrets, only the time, the verb (create, destroy, exec, egress), the backend, the
 * session, an exec's exit code, a duration, whether the operation failed, and for egress the
 * count and bytes of one kind of proxy decision.
 *
 * A line is written with one write(2) on an O_APPEND descriptor, so lines from many processes
 * never interleave. When the file would pass its bound it is renamed to events.jsonl.1 (the
 * older .1 goes) under an flock on events.lock, so two processes never both rotate. The reader
 * hands over complete lines only and skips what does not parse (a line torn by a crash).
 * Formatting and parsing are pure; the module takes the state directory, knows no context. */
#ifndef CORDON_OBS_EVENTS_H
#define CORDON_OBS_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include <cordon/error.h>

#define OBS_EVENTS_FILE "events.jsonl"
#define OBS_EVENTS_ROTATED "events.jsonl.1"
#define OBS_EVENTS_LOCK "events.lock"
/* The default bound of events.jsonl; CORDON_EVENTS_MAX_BYTES overrides it (tests). */
#define OBS_EVENTS_DEFAULT_MAX_BYTES (8u << 20)
/* No line is longer (newline included); longer ones are neither written nor read. */
#define OBS_EVENT_LINE_MAX 1024
#define OBS_EVENT_NAME_MAX 64 /* a verb, backend, session or rule, without its NUL */
#define OBS_EVENT_DECISION_MAX 15

struct obs_event {
  struct timespec time; /* wall clock (CLOCK_REALTIME); written in UTC, milliseconds */
  char verb[OBS_EVENT_NAME_MAX + 1];
  char backend[OBS_EVENT_NAME_MAX + 1];
  char session[OBS_EVENT_NAME_MAX + 1]; /* "" when a create failed before it had an id */
  bool has_exit_code;                   /* exec only */
  int exit_code;
  double duration_seconds;
  bool failed; /* the operation failed (written as "failed": true; absent otherwise) */
  /* verb "egress": one kind of a session's egress proxy decisions (restricted), summed when
   * the session is destroyed (the session's own log goes with it). */
  bool has_egress;
  char decision[OBS_EVENT_DECISION_MAX + 1]; /* "allowed" or "refused" */
  char rule[OBS_EVENT_NAME_MAX + 1];         /* the refusing rule; "" when allowed */
  uint64_t count;                            /* decisions of this kind */
  uint64_t bytes_out, bytes_in;              /* client to destination, and back */
};

/* Fill the names of e (truncated to OBS_EVENT_NAME_MAX; NULL is ""). */
void obs_event_set(struct obs_event *e, const char *verb, const char *backend, const char *session);
/* Make e an egress summary: decision and rule (truncated; NULL rule is ""), count, bytes. */
void obs_event_set_egress(struct obs_event *e, const char *decision, const char *rule,
                          uint64_t count, uint64_t bytes_out, uint64_t bytes_in);

/* The event as one line, newline included, into buf: its length, or -1 when it does not fit
 * (never more than OBS_EVENT_LINE_MAX). Pure. */
int obs_event_format(const struct obs_event *e, char *buf, size_t size);
/* One line (without its newline) into *out: 0, or -1 when it is not an event. Pure. */
int obs_event_parse(const char *line, size_t length, struct obs_event *out);

/* "2026-12-02T08:00:00.123Z": the form of "time"; buf of at least 32 bytes. Pure. */
void obs_time_format(const struct timespec *t, char *buf, size_t size);
/* That form, with or without a fraction, or a relative "N" + s|m|h|d before now: 0, or -1. */
int obs_time_parse(const char *text, const struct timespec *now, struct timespec *out);

/* The bound in effect: CORDON_EVENTS_MAX_BYTES when set to a number, else the default. */
uint64_t obs_events_max_bytes(void);

/* Append e to state_dir's log, rotating it first when this line would pass max_bytes. A
 * state_dir that does not exist is not made: nothing is written, and that is success. */
int obs_events_append(const char *state_dir, const struct obs_event *e, uint64_t max_bytes,
                      struct cordon_error **err);

/* Hand every complete line of fd from *offset on to fn (the line without its newline), and
 * advance *offset past the last one: a last line without its newline (being written, or torn)
 * is left for a later call. Lines longer than OBS_EVENT_LINE_MAX are skipped. fn returning < 0
 * stops the read with that value. */
int obs_events_read_fd(int fd, off_t *offset, int (*fn)(void *data, const char *line, size_t n),
                       void *data, struct cordon_error **err);

typedef int (*obs_event_fn)(void *data, const struct obs_event *event);

/* Every event of state_dir's log, oldest first: events.jsonl.1, then events.jsonl; lines that do
 * not parse are skipped. A missing file is no error. fn returning < 0 stops with that value. */
int obs_events_read_all(const char *state_dir, obs_event_fn fn, void *data,
                        struct cordon_error **err);

/* A reader that follows state_dir's log as it grows, for `cordon events --follow` and the
 * server's /metrics: each poll hands fn the events of the complete lines appended since the
 * last. It holds the file it follows open, so a rotation loses nothing: when the name holds
 * another file, the rest of the old one is read first, then the file between when there were
 * two rotations since the last poll (it is then the .1), then the new one from its start. A
 * followed file that shrank was truncated and is read again from its start. Lines that do not
 * parse (obs_event_parse) are skipped. A state_dir that does not exist yet is waited for.
 *
 * from_start: the first poll hands over the whole log (events.jsonl.1, then events.jsonl);
 * else only what is appended after this call. Not thread-safe: one poller at a time. */
struct obs_events_follower;
int obs_events_follow_new(const char *state_dir, bool from_start, struct obs_events_follower **out,
                          struct cordon_error **err);
int obs_events_follow_poll(struct obs_events_follower *f, obs_event_fn fn, void *data,
                           struct cordon_error **err);
void obs_events_follow_free(struct obs_events_follower *f);

#endif
