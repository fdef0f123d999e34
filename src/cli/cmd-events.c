/* `cordon events`: the project's event log (.cordon/events.jsonl, src/obs/events.h) as human
 * lines or its raw JSON lines, the rotated file first; --follow keeps printing what is
 * appended, across rotations, until interrupted. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cordon/session.h>

#include "base/cleanup.h"
#include "cli/cli.h"
#include "obs/events.h"

static const char events_usage[] =
    "usage: cordon events [--follow] [--json] [--since TIME]\n"
    "\n"
    "The project's event log: one line per session create, destroy and exec (by the CLI,\n"
    "the server or a race), failures too: time (UTC), verb, backend, session, exit code\n"
    "(exec), duration in seconds. It is not the audit chain: no secrets, no HMAC.\n"
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

static int print_line(void *data, const char *line, size_t n) {
  const struct printer *p = data;
  struct obs_event e;
  if (obs_event_parse(line, n, &e) < 0)
    return 0; /* torn or foreign: skipped */
  if (p->since_set && before(&e.time, &p->since))
    return 0;
  if (p->json) {
    /* A torn line that still held a whole event prints as that event alone. */
    char out[OBS_EVENT_LINE_MAX];
    int len = obs_event_format(&e, out, sizeof(out));
    if (len > 0)
      fwrite(out, 1, (size_t)len, stdout);
  } else {
    char when[40], code[16] = "-";
    obs_time_format(&e.time, when, sizeof(when));
    if (e.has_exit_code)
      snprintf(code, sizeof(code), "%d", e.exit_code);
    printf("%s  %-7s  %-10s  %-16s  %4s  %9.3fs%s\n", when, e.verb, e.backend,
           e.session[0] ? e.session : "-", code, e.duration_seconds, e.failed ? "  failed" : "");
  }
  return 0;
}

/* Print the whole of a file (for the rotated one), or from *offset on. */
static int print_from(int fd, off_t *offset, struct printer *p) {
  struct cordon_error *err = NULL;
  if (fd < 0)
    return EXIT_OK; /* no log yet */
  if (obs_events_read_fd(fd, offset, print_line, p, &err) < 0)
    return cli_fail(err);
  fflush(stdout);
  return EXIT_OK;
}

static int open_in(const char *dir, const char *name) {
  _cleanup_free_ char *path = NULL;
  if (asprintf(&path, "%s/%s", dir, name) < 0)
    return -1;
  return open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
}

/* Follow the log: poll for appended lines; when the name holds another file (a rotation),
 * finish the old one, then read the new one from its start. */
static int follow(const char *dir, int fd, off_t offset, struct printer *p) {
  for (;;) {
    int r = print_from(fd, &offset, p);
    if (r != EXIT_OK) {
      if (fd >= 0)
        close(fd);
      return r;
    }
    struct timespec pause = {.tv_nsec = 100 * 1000 * 1000};
    nanosleep(&pause, NULL);
    int named = open_in(dir, OBS_EVENTS_FILE);
    struct stat a, b;
    bool replaced = named >= 0 && (fd < 0 || (fstat(fd, &a) == 0 && fstat(named, &b) == 0 &&
                                              (a.st_ino != b.st_ino || a.st_dev != b.st_dev)));
    if (!replaced) {
      if (named >= 0)
        close(named);
      continue;
    }
    if (fd >= 0) {
      r = print_from(fd, &offset, p); /* what was written before the rename */
      /* Rotated more than once since the last look: the file between the one read and the
       * new one is now the .1; older ones are gone. */
      int rotated = open_in(dir, OBS_EVENTS_ROTATED);
      struct stat c;
      if (r == EXIT_OK && rotated >= 0 && fstat(fd, &a) == 0 && fstat(rotated, &c) == 0 &&
          (a.st_ino != c.st_ino || a.st_dev != c.st_dev)) {
        off_t whole = 0;
        r = print_from(rotated, &whole, p);
      }
      if (rotated >= 0)
        close(rotated);
      close(fd);
      if (r != EXIT_OK) {
        close(named);
        return r;
      }
    }
    fd = named;
    offset = 0;
  }
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
  const char *dir = cordon_context_state_dir(ctx);
  int r = EXIT_OK;
  int fd = open_in(dir, OBS_EVENTS_ROTATED);
  if (fd >= 0) {
    off_t offset = 0;
    r = print_from(fd, &offset, &p);
    close(fd);
  }
  fd = open_in(dir, OBS_EVENTS_FILE);
  if (r == EXIT_OK && fd < 0 && errno != ENOENT) {
    cli_error("cannot read %s/%s: %s", dir, OBS_EVENTS_FILE, strerror(errno));
    r = EXIT_FAILURE_;
  }
  if (r == EXIT_OK) {
    off_t offset = 0;
    if (fd >= 0)
      r = print_from(fd, &offset, &p);
    if (r == EXIT_OK && follow_log) {
      r = follow(dir, fd, offset, &p); /* closes fd */
      fd = -1;
    }
  }
  if (fd >= 0)
    close(fd);
  cordon_context_free(ctx);
  return r;
}
