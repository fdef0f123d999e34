/* `cordon events`: the project's event log (.cordon/events.jsonl, src/obs/events.h) as human
 * lines or its raw JSON lines, the rotated file first; --follow keeps printing what is
 * appended, across rotations, until interrupted. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cordon/session.h>

#include "cli/cli.h"
#include "obs/events.h"

static const char events_usage[] =
    "usage: cordon events [--follow] [--json] [--since TIME]\n"
    "\n"
    "The project's event log: one line per session create, destroy and exec (by the CLI,\n"
    "the server or a race), failures too: time (UTC), verb, backend, session, exit code\n"
    "(exec), duration in seconds; and when a session of --net restricted is destroyed, one\n"
    "egress line per kind of its proxy's decisions: decision, rule, count, bytes out and in.\n"
    "It is not the audit chain: no secrets, no HMAC.\n"
    "\n"
    "  --json          the log's own lines, one JSON object each\n"
    "  --follow, -f    keep printing events as they are appended (also across a rotation)\n"
    "                  until interrupted\n"
    "  --since TIME    only events at or after TIME: 2026-12-02T08:00:00Z (UTC, optional\n"
    "                  fraction) or a span before now: 30s, 10m, 2h, 7d\n"
    "\n"
    "The log is .cordon/events.jsonl, renamed to events.jsonl.1 when it would pass 8 MiB\n"
    "(CORDON_EVENTS_MAX_BYTES). Exit codes: 0 ok, 1 failed, 2 usage.\n";

struct printer {
  bool json;
  bool since_set;
  struct timespec since;
};

static bool before(const struct timespec *a, const struct timespec *b) {
  return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

static int print_event(void *data, const struct obs_event *e) {
  const struct printer *p = data;
  if (p->since_set && before(&e->time, &p->since))
    return 0;
  if (p->json) {
    /* A torn line that still held a whole event prints as that event alone. */
    char out[OBS_EVENT_LINE_MAX];
    int len = obs_event_format(e, out, sizeof(out));
    if (len > 0)
      fwrite(out, 1, (size_t)len, stdout);
  } else {
    char when[40], code[16] = "-";
    obs_time_format(&e->time, when, sizeof(when));
    if (e->has_exit_code)
      snprintf(code, sizeof(code), "%d", e->exit_code);
    if (e->has_egress)
      printf("%s  %-7s  %-10s  %-16s  %s %s x%llu  out %llu B  in %llu B\n", when, e->verb,
             e->backend, e->session[0] ? e->session : "-", e->decision, e->rule[0] ? e->rule : "-",
             (unsigned long long)e->count, (unsigned long long)e->bytes_out,
             (unsigned long long)e->bytes_in);
    else
      printf("%s  %-7s  %-10s  %-16s  %4s  %9.3fs%s\n", when, e->verb, e->backend,
             e->session[0] ? e->session : "-", code, e->duration_seconds,
             e->failed ? "  failed" : "");
  }
  return 0;
}

/* The whole log, then (--follow) what is appended, polled until interrupted; the follower
 * (obs/events.h) carries the reading across rotations. */
static int print_log(const char *dir, bool follow, struct printer *p) {
  struct cordon_error *err = NULL;
  struct obs_events_follower *f = NULL;
  if (obs_events_follow_new(dir, true, &f, &err) < 0)
    return cli_fail(err);
  int r;
  while ((r = obs_events_follow_poll(f, print_event, p, &err)) == 0) {
    fflush(stdout);
    if (!follow)
      break;
    struct timespec pause = {.tv_nsec = 100 * 1000 * 1000};
    nanosleep(&pause, NULL);
  }
  obs_events_follow_free(f);
  return r < 0 ? cli_fail(err) : EXIT_OK;
}

int cmd_events(int argc, char **argv) {
  static const struct option opts[] = {{"json", no_argument, NULL, 'j'},
                                       {"follow", no_argument, NULL, 'f'},
                                       {"since", required_argument, NULL, 's'},
                                       {"help", no_argument, NULL, 'h'},
                                       {0}};
  struct printer p = {0};
  bool follow_log = false;
  int c;
  optind = 0;
  while ((c = cli_getopt(argc, argv, "hf", opts, NULL)) != -1) {
    switch (c) {
    case 'j': p.json = true; break;
    case 'f': follow_log = true; break;
    case 's': {
      struct timespec now;
      clock_gettime(CLOCK_REALTIME, &now);
      if (obs_time_parse(optarg, &now, &p.since) < 0)
        return cli_usage_error("events",
                               "--since '%s' is neither a UTC time (2026-12-02T08:00:00Z) nor "
                               "a span (30s, 10m, 2h, 7d)",
                               optarg);
      p.since_set = true;
      break;
    }
    case 'h': fputs(events_usage, stdout); return EXIT_OK;
    default: return cli_option_error("events");
    }
  }
  if (optind < argc)
    return cli_usage_error("events", "unexpected argument '%s'", argv[optind]);
  struct cordon_error *err = NULL;
  struct cordon_context *ctx = NULL;
  if (cordon_context_open(NULL, &ctx, &err) < 0)
    return cli_fail(err);
  int r = print_log(cordon_context_state_dir(ctx), follow_log, &p);
  cordon_context_free(ctx);
  return r;
}
