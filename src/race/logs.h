/* A race's logs (include/cordon/race.h, docs/formats.md): each candidate's and judge's output
 * kept up to a bound, captured or streamed live, and their form in the receipt. */
#ifndef CORDON_RACE_LOGS_H
#define CORDON_RACE_LOGS_H

#include <jansson.h>
#include <stdbool.h>

#include <cordon/backend.h>
#include <cordon/race.h>

/* Free a log's bytes and zero it. */
void race_log_clear(struct cordon_race_log *log);

/* Run req in session, keeping at most limit bytes of each output stream in logs[0] (stdout)
 * and logs[1] (stderr). With output, every byte is also handed to output->write as it arrives
 * (as streams first and first + 1 of candidate index), through pipes a thread reads; without,
 * the backend captures. res holds the exit status; its data is empty. */
int race_exec_logged(struct cordon_session *session, const struct cordon_exec_request *req,
                     size_t limit, const struct cordon_race_output *output, size_t index,
                     enum cordon_race_log_stream first, struct cordon_race_log logs[2],
                     struct cordon_exec_result *res, struct cordon_error **err);

/* The receipt's "logs" of a candidate: {"stdout": {"bytes", "sha256", "truncated"}, ...} for
 * every present stream; NULL on ENOMEM. */
json_t *race_logs_json(const struct cordon_race_log logs[CORDON_RACE_LOG_STREAMS]);

/* Check a receipt candidate's "logs" (pure): NULL when well formed, else why not (static). */
const char *race_logs_check(const json_t *logs, bool judged);

#endif
