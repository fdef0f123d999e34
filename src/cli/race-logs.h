/* `cordon race`'s logs on the command line: --logs DIR files, --json tails, --stream's live
 * prefixed lines, and the last line of stderr quoted when a candidate did not pass. */
#ifndef CORDON_CLI_RACE_LOGS_H
#define CORDON_CLI_RACE_LOGS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include <cordon/race.h>

/* Bytes of each stream --json carries: the end of the kept bytes. */
#define RACE_LOG_TAIL_BYTES (4u * 1024u)
/* A live line longer than this is written in pieces of this size, each prefixed. */
#define RACE_STREAM_LINE_MAX (4u * 1024u)

/* Create DIR (0700) when missing and check it is a directory we can write in, before the race
 * runs. */
int cli_race_logs_prepare(const char *dir, struct cordon_error **err);
/* Write every candidate's logs into DIR, each file atomically (0600): TASK.stdout, TASK.stderr,
 * TASK.judge.stdout, TASK.judge.stderr, and logs.json (bytes, total, truncated, sha256). */
int cli_race_logs_write(const char *dir, const struct cordon_race_result *res,
                        struct cordon_error **err);
/* A candidate's logs for --json: {"stdout": {bytes, total, truncated, sha256, tail,
 * tail_bytes}, ...}; NULL on ENOMEM. */
json_t *cli_race_logs_tails_json(const struct cordon_race_candidate *c);
/* The last non-empty line of the stderr that explains why c did not pass (the judge's when the
 * command passed), control bytes shown as '?', at most size - 1 bytes; "" when there is none. */
void cli_race_logs_last_line(const struct cordon_race_candidate *c, char *buf, size_t size);

/* --stream: the race's output hook, writing whole prefixed lines to fd 1 (stdout streams) and 2
 * (stderr streams), or all to 2 when all_to_stderr (--json keeps stdout for its document). */
struct race_line {
  char *data;
  size_t length;
};
struct cli_race_streamer {
  pthread_mutex_t mu; /* one write at a time: lines from different candidates never interleave */
  size_t k;
  bool all_to_stderr;
  struct race_line *lines; /* k * CORDON_RACE_LOG_STREAMS partial lines */
  struct cordon_race_output output;
};
int cli_race_streamer_init(struct cli_race_streamer *s, size_t k, bool all_to_stderr);
/* Write what is left of partial lines (ended by a newline) and free everything. */
void cli_race_streamer_finish(struct cli_race_streamer *s);

#endif
