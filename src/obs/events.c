/* The project's event log (events.h): the line format, the append with its rotation, and the
 * reader. The format and parse are pure; the append is a few system calls around one write. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "obs/events.h"

static void copy_name(char *dst, const char *src) {
  size_t n = src ? strnlen(src, OBS_EVENT_NAME_MAX) : 0;
  memcpy(dst, src ? src : "", n);
  dst[n] = 0;
}

void obs_event_set(struct obs_event *e, const char *verb, const char *backend,
                   const char *session) {
  copy_name(e->verb, verb);
  copy_name(e->backend, backend);
  copy_name(e->session, session);
}

void obs_event_set_egress(struct obs_event *e, const char *decision, const char *rule,
                          uint64_t count, uint64_t bytes_out, uint64_t bytes_in) {
  e->has_egress = true;
  size_t n = decision ? strnlen(decision, OBS_EVENT_DECISION_MAX) : 0;
  memcpy(e->decision, decision ? decision : "", n);
  e->decision[n] = 0;
  copy_name(e->rule, rule);
  e->count = count;
  e->bytes_out = bytes_out;
  e->bytes_in = bytes_in;
}

/* UTC from POSIX seconds by arithmetic (days to civil date, H. Hinnant's algorithm): glibc's
 * gmtime_r loads the local time zone file first, a few system calls on every event. */
void obs_time_format(const struct timespec *t, char *buf, size_t size) {
  long long seconds = (long long)t->tv_sec;
  long long days = seconds / 86400, rest = seconds % 86400;
  if (rest < 0) {
    rest += 86400;
    days--;
  }
  long long z = days + 719468;
  long long era = (z >= 0 ? z : z - 146096) / 146097;
  long long doe = z - era * 146097;                                      /* [0, 146096] */
  long long yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365; /* [0, 399] */
  long long doy = doe - (365 * yoe + yoe / 4 - yoe / 100);               /* [0, 365] */
  long long mp = (5 * doy + 2) / 153;                                    /* [0, 11] */
  long long day = doy - (153 * mp + 2) / 5 + 1;
  long long month = mp < 10 ? mp + 3 : mp - 9;
  long long year = yoe + era * 400 + (month <= 2);
  snprintf(buf, size, "%04lld-%02lld-%02lldT%02lld:%02lld:%02lld.%03ldZ", year, month, day,
           rest / 3600, rest / 60 % 60, rest % 60, t->tv_nsec / 1000000);
}

int obs_time_parse(const char *text, const struct timespec *now, struct timespec *out) {
  size_t n = strlen(text);
  /* Relative: "90s", "10m", "2h", "7d" before now. */
  if (n >= 2 && strchr("smhd", text[n - 1]) && isdigit((unsigned char)text[0])) {
    char *end = NULL;
    errno = 0;
    unsigned long long count = strtoull(text, &end, 10);
    if (errno || end != text + n - 1 || count > 100000000ull)
      return -1;
    long long unit = text[n - 1] == 's'   ? 1
                     : text[n - 1] == 'm' ? 60
                     : text[n - 1] == 'h' ? 3600
                                          : 86400;
    out->tv_sec = now->tv_sec - (time_t)(count * (unsigned long long)unit);
    out->tv_nsec = now->tv_nsec;
    return 0;
  }
  struct tm tm = {0};
  int consumed = 0;
  if (n < 20 ||
      sscanf(text, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
             &tm.tm_min, &tm.tm_sec, &consumed) != 6 ||
      consumed != 19 || text[4] != '-' || text[7] != '-' || text[10] != 'T')
    return -1;
  if (tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 ||
      tm.tm_min > 59 || tm.tm_sec > 60 || tm.tm_year < 1970)
    return -1;
  long nsec = 0;
  const char *p = text + 19;
  if (*p == '.') {
    long scale = 100000000;
    p++;
    if (!isdigit((unsigned char)*p))
      return -1;
    for (; isdigit((unsigned char)*p); p++) {
      nsec += (*p - '0') * scale;
      scale /= 10;
    }
  }
  if (strcmp(p, "Z") != 0)
    return -1;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  out->tv_sec = timegm(&tm);
  out->tv_nsec = nsec;
  return 0;
}

/* A JSON string of a name: the names are ids and backend names, but a plugin may call itself
 * anything, so quotes, backslashes and control bytes are escaped. */
static size_t put_string(char *buf, size_t size, size_t at, const char *s) {
  static const char hex[] = "0123456789abcdef";
  for (size_t need; *s; s++) {
    unsigned char c = (unsigned char)*s;
    char esc[7];
    if (c == '"' || c == '\\') {
      esc[0] = '\\', esc[1] = (char)c, need = 2;
    } else if (c < 0x20) {
      memcpy(esc, "\\u00", 4), esc[4] = hex[c >> 4], esc[5] = hex[c & 15], need = 6;
    } else {
      esc[0] = (char)c, need = 1;
    }
    if (at + need < size)
      memcpy(buf + at, esc, need);
    at += need;
  }
  return at;
}

int obs_event_format(const struct obs_event *e, char *buf, size_t size) {
  char when[40];
  obs_time_format(&e->time, when, sizeof(when));
  if (size > OBS_EVENT_LINE_MAX)
    size = OBS_EVENT_LINE_MAX;
  size_t at = (size_t)snprintf(buf, size, "{\"time\": \"%s\", \"verb\": \"", when);
  at = put_string(buf, size, at, e->verb);
  at += (size_t)snprintf(buf + (at < size ? at : size), at < size ? size - at : 0,
                         "\", \"backend\": \"");
  at = put_string(buf, size, at, e->backend);
  at += (size_t)snprintf(buf + (at < size ? at : size), at < size ? size - at : 0,
                         "\", \"session\": \"");
  at = put_string(buf, size, at, e->session);
  if (e->has_egress) {
    at += (size_t)snprintf(buf + (at < size ? at : size), at < size ? size - at : 0,
                           "\", \"decision\": \"");
    at = put_string(buf, size, at, e->decision);
    at += (size_t)snprintf(buf + (at < size ? at : size), at < size ? size - at : 0,
                           "\", \"rule\": \"");
    at = put_string(buf, size, at, e->rule);
    at += (size_t)snprintf(buf + (at < size ? at : size), at < size ? size - at : 0,
                           "\", \"count\": %llu, \"bytes_out\": %llu, \"bytes_in\": %llu",
                           (unsigned long long)e->count, (unsigned long long)e->bytes_out,
                           (unsigned long long)e->bytes_in);
  }
  char tail[160], code[32] = "";
  if (e->has_exit_code)
    snprintf(code, sizeof(code), ", \"exit_code\": %d", e->exit_code);
  int t = snprintf(tail, sizeof(tail), "%s%s, \"duration_seconds\": %.6f%s}\n",
                   e->has_egress ? "" : "\"", code, e->duration_seconds,
                   e->failed ? ", \"failed\": true" : "");
  if (t < 0 || at + (size_t)t >= size)
    return -1;
  memcpy(buf + at, tail, (size_t)t + 1);
  return (int)(at + (size_t)t);
}

static int parse_object(const char *line, size_t length, struct obs_event *out) {
  json_error_t jerr;
  json_t *doc = json_loadb(line, length, JSON_REJECT_DUPLICATES, &jerr);
  if (!doc)
    return -1;
  const char *when = NULL, *verb = NULL, *backend = NULL, *session = NULL;
  json_t *exit_code = NULL, *duration = NULL, *failed = NULL;
  json_t *decision = NULL, *rule = NULL, *count = NULL, *bytes_out = NULL, *bytes_in = NULL;
  int r = json_unpack(doc, "{s:s, s:s, s:s, s:s, s?o, s:o, s?o, s?o, s?o, s?o, s?o, s?o}", "time",
                      &when, "verb", &verb, "backend", &backend, "session", &session, "exit_code",
                      &exit_code, "duration_seconds", &duration, "failed", &failed, "decision",
                      &decision, "rule", &rule, "count", &count, "bytes_out", &bytes_out,
                      "bytes_in", &bytes_in);
  struct timespec now = {0};
  /* An egress summary has all five or none, counts never negative. */
  bool egress = decision || rule || count || bytes_out || bytes_in;
  if (r == 0 && egress &&
      (!json_is_string(decision) || !json_is_string(rule) || !json_is_integer(count) ||
       !json_is_integer(bytes_out) || !json_is_integer(bytes_in) || json_integer_value(count) < 0 ||
       json_integer_value(bytes_out) < 0 || json_integer_value(bytes_in) < 0))
    r = -1;
  if (r == 0 && (!json_is_number(duration) || (exit_code && !json_is_integer(exit_code)) ||
                 (failed && !json_is_boolean(failed)) ||
                 obs_time_parse(when, &now, &out->time) < 0 || strchr(when, 'T') == NULL))
    r = -1;
  if (r == 0) {
    obs_event_set(out, verb, backend, session);
    out->has_exit_code = exit_code != NULL;
    out->exit_code = exit_code ? (int)json_integer_value(exit_code) : 0;
    out->duration_seconds = json_number_value(duration);
    out->failed = failed && json_is_true(failed);
    if (egress)
      obs_event_set_egress(out, json_string_value(decision), json_string_value(rule),
                           (uint64_t)json_integer_value(count),
                           (uint64_t)json_integer_value(bytes_out),
                           (uint64_t)json_integer_value(bytes_in));
  }
  json_decref(doc);
  return r;
}

int obs_event_parse(const char *line, size_t length, struct obs_event *out) {
  memset(out, 0, sizeof(*out));
  if (parse_object(line, length, out) == 0)
    return 0;
  /* A line torn by a crash runs into the next one written: the whole event after it is
   * still there, from its own opening. */
  static const char opening[] = "{\"time\"";
  for (size_t i = length; i-- > 1;)
    if (i + sizeof(opening) - 1 <= length && !memcmp(line + i, opening, sizeof(opening) - 1))
      return parse_object(line + i, length - i, out);
  return -1;
}

uint64_t obs_events_max_bytes(void) {
  const char *text = getenv("CORDON_EVENTS_MAX_BYTES");
  char *end = NULL;
  unsigned long long v = text && *text ? strtoull(text, &end, 10) : 0;
  return v && end && !*end ? (uint64_t)v : OBS_EVENTS_DEFAULT_MAX_BYTES;
}

static int open_log(int dir, struct cordon_error **err, const char *state_dir) {
  int fd =
      openat(dir, OBS_EVENTS_FILE, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0)
    cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot open %s/%s", state_dir,
                     OBS_EVENTS_FILE);
  return fd;
}

/* Under the lock: the log is rotated unless another process did it since *fd was opened (then
 * the name holds a new file), and *fd is reopened on whatever the name now holds. */
static int rotate(int dir, int *fd, uint64_t line, uint64_t max_bytes, const char *state_dir,
                  struct cordon_error **err) {
  _cleanup_close_ int lock =
      openat(dir, OBS_EVENTS_LOCK, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (lock < 0 || flock(lock, LOCK_EX) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot lock %s/%s", state_dir,
                            OBS_EVENTS_LOCK);
  struct stat ours, named;
  if (fstat(*fd, &ours) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "%s/%s", state_dir, OBS_EVENTS_FILE);
  bool same = fstatat(dir, OBS_EVENTS_FILE, &named, AT_SYMLINK_NOFOLLOW) == 0 &&
              named.st_ino == ours.st_ino && named.st_dev == ours.st_dev;
  if (same && (uint64_t)named.st_size + line > max_bytes && named.st_size > 0 &&
      renameat(dir, OBS_EVENTS_FILE, dir, OBS_EVENTS_ROTATED) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot rotate %s/%s", state_dir,
                            OBS_EVENTS_FILE);
  close(*fd);
  *fd = open_log(dir, err, state_dir);
  return *fd < 0 ? -1 : 0; /* the lock goes with its descriptor */
}

int obs_events_append(const char *state_dir, const struct obs_event *e, uint64_t max_bytes,
                      struct cordon_error **err) {
  char line[OBS_EVENT_LINE_MAX];
  int n = obs_event_format(e, line, sizeof(line));
  if (n < 0)
    return cordon_error_set(err, CORDON_ERR_INVALID, E2BIG, "event line too long");
  _cleanup_close_ int dir = open(state_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  /* A project without state yet (a create refused before it made any): nothing to log into,
   * and the log is no reason to make it. */
  if (dir < 0 && errno == ENOENT)
    return 0;
  if (dir < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot open %s", state_dir);
  _cleanup_close_ int fd = open_log(dir, err, state_dir);
  if (fd < 0)
    return -1;
  struct stat st;
  if (fstat(fd, &st) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "%s/%s", state_dir, OBS_EVENTS_FILE);
  if ((uint64_t)st.st_size + (uint64_t)n > max_bytes &&
      rotate(dir, &fd, (uint64_t)n, max_bytes, state_dir, err) < 0)
    return -1;
  /* One write of the whole line: O_APPEND places it at the end in one step, so lines of
   * concurrent writers never interleave. */
  ssize_t w = write(fd, line, (size_t)n);
  if (w != n)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, w < 0 ? errno : EIO, "cannot append to %s/%s",
                            state_dir, OBS_EVENTS_FILE);
  return 0;
}

int obs_events_read_fd(int fd, off_t *offset, int (*fn)(void *data, const char *line, size_t n),
                       void *data, struct cordon_error **err) {
  char buf[64 * 1024];
  size_t used = 0;
  bool skipping = false; /* inside a line longer than OBS_EVENT_LINE_MAX */
  off_t at = *offset;
  for (;;) {
    ssize_t got = pread(fd, buf + used, sizeof(buf) - used, at + (off_t)used);
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot read the event log");
    if (got == 0)
      return 0; /* what is left in buf has no newline yet */
    used += (size_t)got;
    size_t start = 0;
    for (char *nl; (nl = memchr(buf + start, '\n', used - start));) {
      size_t len = (size_t)(nl - (buf + start));
      if (!skipping && len < OBS_EVENT_LINE_MAX) {
        int r = fn(data, buf + start, len);
        if (r < 0)
          return r;
      }
      skipping = false;
      start += len + 1;
    }
    at += (off_t)start;
    *offset = at;
    memmove(buf, buf + start, used - start);
    used -= start;
    if (used >= OBS_EVENT_LINE_MAX) { /* no newline in sight: drop what came so far */
      skipping = true;
      at += (off_t)used;
      used = 0;
    }
  }
}

/* ---- the follower ------------------------------------------------------------------------- */

struct obs_events_follower {
  char *state_dir;
  int dir;      /* O_PATH of state_dir; -1 until it exists */
  int fd;       /* the file followed; -1 before there is one */
  off_t offset; /* in fd, after the last complete line handed over */
  /* Before the first file is taken up, a .1 holds events to hand over too: the whole history
   * (from_start), or, when there was no log at the start, the first events of a log made and
   * rotated before a poll saw it. A .1 already accounted for (read, or history there at a
   * start from the end) is known by its identity and never read again. */
  bool before_first;
  bool rotated_known;
  dev_t rotated_dev;
  ino_t rotated_ino;
};

struct parsed_lines {
  obs_event_fn fn;
  void *data;
};

static int parsed_line(void *data, const char *line, size_t n) {
  struct parsed_lines *p = data;
  struct obs_event e;
  return obs_event_parse(line, n, &e) < 0 ? 0 : p->fn(p->data, &e);
}

static int read_events(int fd, off_t *offset, obs_event_fn fn, void *data,
                       struct cordon_error **err) {
  struct parsed_lines p = {fn, data};
  return obs_events_read_fd(fd, offset, parsed_line, &p, err);
}

static bool same_file(int a, int b) {
  struct stat sa, sb;
  return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_ino == sb.st_ino &&
         sa.st_dev == sb.st_dev;
}

#define NAMED_ABSENT (-1) /* open_named: the name holds no file, which is no error */
#define NAMED_FAILED (-2) /* open_named: err is set */

/* A file of the log by name: its descriptor, NAMED_ABSENT or NAMED_FAILED. */
static int open_named(const struct obs_events_follower *f, const char *name,
                      struct cordon_error **err) {
  int fd = openat(f->dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0 || errno == ENOENT)
    return fd >= 0 ? fd : NAMED_ABSENT;
  cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot read %s/%s", f->state_dir, name);
  return NAMED_FAILED;
}

/* The state directory, once it exists: 1 when it is open, 0 when not yet, -1 on error. */
static int open_state_dir(struct obs_events_follower *f, struct cordon_error **err) {
  if (f->dir >= 0)
    return 1;
  f->dir = open(f->state_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (f->dir >= 0)
    return 1;
  return errno == ENOENT
             ? 0
             : cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot open %s", f->state_dir);
}

int obs_events_follow_new(const char *state_dir, bool from_start, struct obs_events_follower **out,
                          struct cordon_error **err) {
  *out = NULL;
  struct obs_events_follower *f = calloc(1, sizeof(*f));
  if (!f || !(f->state_dir = strdup(state_dir))) {
    free(f);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "event log reader");
  }
  f->dir = f->fd = -1;
  int r = from_start ? 0 : open_state_dir(f, err);
  if (r > 0) {
    /* From the end: what the file holds now is history; a file made later is read whole. */
    struct stat st;
    f->fd = open_named(f, OBS_EVENTS_FILE, err);
    if (f->fd == NAMED_FAILED)
      r = -1;
    else if (f->fd >= 0 && fstat(f->fd, &st) < 0)
      r = cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "%s/%s", state_dir, OBS_EVENTS_FILE);
    else if (f->fd >= 0)
      f->offset = st.st_size;
    else if (fstatat(f->dir, OBS_EVENTS_ROTATED, &st, AT_SYMLINK_NOFOLLOW) == 0) {
      f->rotated_known = true; /* history */
      f->rotated_dev = st.st_dev;
      f->rotated_ino = st.st_ino;
    }
  }
  f->before_first = f->fd < 0;
  if (r < 0) {
    obs_events_follow_free(f);
    return -1;
  }
  *out = f;
  return 0;
}

void obs_events_follow_free(struct obs_events_follower *f) {
  if (!f)
    return;
  if (f->fd >= 0)
    close(f->fd);
  if (f->dir >= 0)
    close(f->dir);
  free(f->state_dir);
  free(f);
}

/* The name holds `named`, not the file followed: a rotation. Finish the old file (a writer that
 * opened it before the rename may have appended since), then the file between when the log
 * was rotated twice since the last poll, and take up `named` from its start. */
static int follow_rotation(struct obs_events_follower *f, int named, obs_event_fn fn, void *data,
                           struct cordon_error **err) {
  int r = read_events(f->fd, &f->offset, fn, data, err);
  if (r < 0)
    return r;
  _cleanup_close_ int between = open_named(f, OBS_EVENTS_ROTATED, err);
  if (between == NAMED_FAILED)
    return -1;
  off_t whole = 0;
  if (between >= 0 && !same_file(between, f->fd) && !same_file(between, named) &&
      (r = read_events(between, &whole, fn, data, err)) < 0)
    return r;
  close(f->fd);
  f->fd = named;
  f->offset = 0;
  return 0;
}

/* Before the first file: hand over the .1, whole, unless it is accounted for or is the file
 * the name holds (named, or NAMED_ABSENT). */
static int read_rotated_once(struct obs_events_follower *f, int named, obs_event_fn fn, void *data,
                             struct cordon_error **err) {
  _cleanup_close_ int rotated = open_named(f, OBS_EVENTS_ROTATED, err);
  if (rotated == NAMED_FAILED)
    return -1;
  struct stat st;
  if (rotated < 0 || (named >= 0 && same_file(rotated, named)) || fstat(rotated, &st) < 0)
    return 0;
  if (f->rotated_known && st.st_dev == f->rotated_dev && st.st_ino == f->rotated_ino)
    return 0;
  f->rotated_known = true;
  f->rotated_dev = st.st_dev;
  f->rotated_ino = st.st_ino;
  off_t whole = 0;
  return read_events(rotated, &whole, fn, data, err);
}

int obs_events_follow_poll(struct obs_events_follower *f, obs_event_fn fn, void *data,
                           struct cordon_error **err) {
  int r = open_state_dir(f, err);
  if (r <= 0)
    return r;
  for (;;) {
    if (f->fd >= 0) {
      struct stat st;
      if (fstat(f->fd, &st) == 0 && st.st_size < f->offset)
        f->offset = 0; /* truncated: what it holds now is new */
      if ((r = read_events(f->fd, &f->offset, fn, data, err)) < 0)
        return r;
    }
    int named = open_named(f, OBS_EVENTS_FILE, err);
    if (named == NAMED_FAILED)
      return -1;
    if (f->before_first && (r = read_rotated_once(f, named, fn, data, err)) < 0) {
      if (named >= 0)
        close(named);
      return r;
    }
    if (named == NAMED_ABSENT)
      return 0; /* between a rename and the next append: nothing new */
    if (f->fd >= 0 && same_file(named, f->fd)) {
      close(named);
      return 0;
    }
    if (f->fd < 0) {
      f->fd = named;
      f->offset = 0;
      f->before_first = false;
    } else if ((r = follow_rotation(f, named, fn, data, err)) < 0) {
      close(named);
      return r;
    }
  }
}

int obs_events_read_all(const char *state_dir, obs_event_fn fn, void *data,
                        struct cordon_error **err) {
  struct obs_events_follower *f = NULL;
  if (obs_events_follow_new(state_dir, true, &f, err) < 0)
    return -1;
  int r = obs_events_follow_poll(f, fn, data, err);
  obs_events_follow_free(f);
  return r;
}
