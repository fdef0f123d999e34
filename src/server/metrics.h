/* The server's Prometheus metrics (text format 0.0.4): counters, gauges and histograms of
 * sessions and execs by backend. One source feeds them all: the project's event log
 * (.cordon/events.jsonl), where the library records every create, destroy and exec, the
 * server's own and the CLI's alike; it is followed from where it stood at the server's start
 * and read on at each scrape. The server never counts its own work besides, or it would count
 * it twice. Thread-safe. */
#ifndef CORDON_SERVER_METRICS_H
#define CORDON_SERVER_METRICS_H

#include <cordon/error.h>

struct metrics;
struct obs_event;

/* state_dir: the project's .cordon/, whose events.jsonl is followed from its present end. */
int metrics_new(const char *state_dir, struct metrics **out, struct cordon_error **err);
void metrics_free(struct metrics *m);

/* A session that exists at the server's start (call after metrics_new): it counts in
 * sandbox_active_sessions until its destroy is seen; a create of it seen in the log (made
 * between metrics_new and the listing) does not count it twice. */
void metrics_session_present(struct metrics *m, const char *session, const char *backend);

/* One event of the log into the counters: a create or destroy that failed changes nothing (no
 * session came or went); an exec counts under its exit code, a failed one under the 125 the log
 * gives it. */
void metrics_apply(struct metrics *m, const struct obs_event *e);

/* Read what the event log gained since the last call, then render everything; malloc'd. */
char *metrics_render(struct metrics *m);

#endif
