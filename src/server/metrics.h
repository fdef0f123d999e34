/* The server's Prometheus metrics (text format 0.0.4): counters, gauges and histograms of
 * sessions and execs by backend. The server records its own work as it does it; the CLI's
 * work arrives through the project's event log (.cordon/events.jsonl), read incrementally at
 * each scrape (events.c). Thread-safe. */
#ifndef CORDON_SERVER_METRICS_H
#define CORDON_SERVER_METRICS_H

#include <stdbool.h>
#include <stddef.h>

struct metrics;

/* state_dir: the project's .cordon/, whose events.jsonl is followed. */
struct metrics *metrics_new(const char *state_dir);
void metrics_free(struct metrics *m);

void metrics_session_created(struct metrics *m, const char *backend);
/* lifetime_seconds < 0: unknown (the duration histogram is not fed). */
void metrics_session_destroyed(struct metrics *m, const char *backend, double lifetime_seconds);
void metrics_exec(struct metrics *m, const char *backend, int exit_code, double seconds);

/* One line of the event log: {"verb": "create"|"destroy"|"exec", "backend", "exit_code",
 * "duration_seconds", ...}; a line that is not such an event is skipped (false). */
bool metrics_apply_event(struct metrics *m, const char *line, size_t length);

/* Read what the event log gained since the last call, then render everything; malloc'd. */
char *metrics_render(struct metrics *m);

/* events.c: feed the event log's new complete lines to m (the caller holds no lock). */
struct events_reader;
struct events_reader *events_reader_new(const char *state_dir);
void events_reader_free(struct events_reader *r);
void events_reader_poll(struct events_reader *r, struct metrics *m);

#endif
