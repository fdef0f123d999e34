/* The server's Prometheus metrics (metrics.h): a few families kept in small arrays under one
 * lock, rendered in text format 0.0.4. Labels are escaped: a backend name read from the event
 * log is data, not trusted text. */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "server/metrics.h"

#define METRICS_MAX_BACKENDS 32
#define METRICS_MAX_EXEC_SERIES 512
#define METRICS_NAME_MAX 64

/* Buckets in seconds: execs are short (Prometheus' default buckets), sessions live longer. */
static const double exec_buckets[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
static const double session_buckets[] = {1, 5, 15, 30, 60, 300, 900, 1800, 3600, 14400, 86400};
#define N_BUCKETS 11

struct histogram {
  uint64_t counts[N_BUCKETS]; /* not cumulative; rendered cumulative */
  uint64_t count;
  double sum;
};

struct backend_series {
  char name[METRICS_NAME_MAX];
  uint64_t created, destroyed;
  struct histogram session_duration;
  struct histogram exec_duration;
};

struct exec_series {
  int backend; /* index into backends */
  int exit_code;
  uint64_t count;
};

struct metrics {
  pthread_mutex_t lock;
  pthread_mutex_t reading; /* one reader of the event log at a time */
  struct backend_series backends[METRICS_MAX_BACKENDS];
  size_t n_backends;
  struct exec_series execs[METRICS_MAX_EXEC_SERIES];
  size_t n_execs;
  struct events_reader *events;
};

struct metrics *metrics_new(const char *state_dir) {
  struct metrics *m = calloc(1, sizeof(*m));
  if (!m)
    return NULL;
  pthread_mutex_init(&m->lock, NULL);
  pthread_mutex_init(&m->reading, NULL);
  m->events = state_dir ? events_reader_new(state_dir) : NULL;
  return m;
}

void metrics_free(struct metrics *m) {
  if (!m)
    return;
  events_reader_free(m->events);
  pthread_mutex_destroy(&m->lock);
  pthread_mutex_destroy(&m->reading);
  free(m);
}

/* The series of a backend, made on first use; -1 when the table is full. Lock held. */
static int backend_index(struct metrics *m, const char *name) {
  for (size_t i = 0; i < m->n_backends; i++)
    if (!strcmp(m->backends[i].name, name))
      return (int)i;
  if (m->n_backends == METRICS_MAX_BACKENDS || strlen(name) >= METRICS_NAME_MAX)
    return -1;
  snprintf(m->backends[m->n_backends].name, METRICS_NAME_MAX, "%s", name);
  return (int)m->n_backends++;
}

static void observe(struct histogram *h, const double *bounds, double value) {
  for (int i = 0; i < N_BUCKETS; i++)
    if (value <= bounds[i]) {
      h->counts[i]++;
      break;
    }
  h->count++;
  h->sum += value;
}

void metrics_session_created(struct metrics *m, const char *backend) {
  pthread_mutex_lock(&m->lock);
  int b = backend_index(m, backend);
  if (b >= 0)
    m->backends[b].created++;
  pthread_mutex_unlock(&m->lock);
}

void metrics_session_destroyed(struct metrics *m, const char *backend, double lifetime_seconds) {
  pthread_mutex_lock(&m->lock);
  int b = backend_index(m, backend);
  if (b >= 0) {
    m->backends[b].destroyed++;
    if (lifetime_seconds >= 0 && isfinite(lifetime_seconds))
      observe(&m->backends[b].session_duration, session_buckets, lifetime_seconds);
  }
  pthread_mutex_unlock(&m->lock);
}

void metrics_exec(struct metrics *m, const char *backend, int exit_code, double seconds) {
  pthread_mutex_lock(&m->lock);
  int b = backend_index(m, backend);
  if (b >= 0) {
    if (seconds >= 0 && isfinite(seconds))
      observe(&m->backends[b].exec_duration, exec_buckets, seconds);
    size_t i = 0;
    while (i < m->n_execs && (m->execs[i].backend != b || m->execs[i].exit_code != exit_code))
      i++;
    if (i == m->n_execs && m->n_execs < METRICS_MAX_EXEC_SERIES)
      m->execs[m->n_execs++] = (struct exec_series){.backend = b, .exit_code = exit_code};
    if (i < m->n_execs)
      m->execs[i].count++;
  }
  pthread_mutex_unlock(&m->lock);
}

bool metrics_apply_event(struct metrics *m, const char *line, size_t length) {
  json_t *e = json_loadb(line, length, 0, NULL);
  const char *verb = json_string_value(json_object_get(e, "verb"));
  const char *backend = json_string_value(json_object_get(e, "backend"));
  json_t *duration = json_object_get(e, "duration_seconds");
  double seconds = json_is_number(duration) ? json_number_value(duration) : -1;
  bool applied = verb && backend;
  if (applied && !strcmp(verb, "create")) {
    metrics_session_created(m, backend);
  } else if (applied && !strcmp(verb, "destroy")) {
    metrics_session_destroyed(m, backend, seconds);
  } else if (applied && !strcmp(verb, "exec")) {
    json_t *code = json_object_get(e, "exit_code");
    if (json_is_integer(code))
      metrics_exec(m, backend, (int)json_integer_value(code), seconds);
    else
      applied = false;
  } else {
    applied = false;
  }
  json_decref(e);
  return applied;
}

/* ---- rendering ---------------------------------------------------------------------------- */

struct text {
  char *data;
  size_t length, capacity;
  bool failed;
};

__attribute__((format(printf, 2, 3))) static void put(struct text *t, const char *fmt, ...) {
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    size_t room = t->capacity - t->length;
    int n = t->data ? vsnprintf(t->data + t->length, room, fmt, ap) : -1;
    va_end(ap);
    if (n >= 0 && (size_t)n < room) {
      t->length += (size_t)n;
      return;
    }
    size_t want = t->capacity ? 2 * t->capacity : 4096;
    while (n >= 0 && want < t->length + (size_t)n + 1)
      want *= 2;
    char *grown = realloc(t->data, want);
    if (!grown) {
      t->failed = true;
      return;
    }
    t->data = grown;
    t->capacity = want;
  }
}

/* A label value with \, " and newline escaped. */
static void label(const char *value, char *out, size_t size) {
  size_t at = 0;
  for (const char *p = value; *p && at + 3 < size; p++) {
    if (*p == '\\' || *p == '"') {
      out[at++] = '\\';
      out[at++] = *p;
    } else if (*p == '\n') {
      out[at++] = '\\';
      out[at++] = 'n';
    } else {
      out[at++] = *p;
    }
  }
  out[at] = 0;
}

static void put_histogram(struct text *t, const char *name, const char *backend,
                          const struct histogram *h, const double *bounds) {
  uint64_t cumulative = 0;
  for (int i = 0; i < N_BUCKETS; i++) {
    cumulative += h->counts[i];
    put(t, "%s_bucket{backend=\"%s\",le=\"%g\"} %llu\n", name, backend, bounds[i],
        (unsigned long long)cumulative);
  }
  put(t, "%s_bucket{backend=\"%s\",le=\"+Inf\"} %llu\n", name, backend,
      (unsigned long long)h->count);
  put(t, "%s_sum{backend=\"%s\"} %.17g\n", name, backend, h->sum);
  put(t, "%s_count{backend=\"%s\"} %llu\n", name, backend, (unsigned long long)h->count);
}

char *metrics_render(struct metrics *m) {
  if (m->events) {
    pthread_mutex_lock(&m->reading);
    events_reader_poll(m->events, m);
    pthread_mutex_unlock(&m->reading);
  }
  struct text t = {0};
  char b[2 * METRICS_NAME_MAX + 1];
  pthread_mutex_lock(&m->lock);
  put(&t, "# HELP sandbox_session_created_total Sessions created.\n"
          "# TYPE sandbox_session_created_total counter\n");
  for (size_t i = 0; i < m->n_backends; i++) {
    label(m->backends[i].name, b, sizeof(b));
    put(&t, "sandbox_session_created_total{backend=\"%s\"} %llu\n", b,
        (unsigned long long)m->backends[i].created);
  }
  put(&t, "# HELP sandbox_session_destroyed_total Sessions destroyed.\n"
          "# TYPE sandbox_session_destroyed_total counter\n");
  for (size_t i = 0; i < m->n_backends; i++) {
    label(m->backends[i].name, b, sizeof(b));
    put(&t, "sandbox_session_destroyed_total{backend=\"%s\"} %llu\n", b,
        (unsigned long long)m->backends[i].destroyed);
  }
  put(&t, "# HELP sandbox_active_sessions Sessions created and not yet destroyed.\n"
          "# TYPE sandbox_active_sessions gauge\n");
  for (size_t i = 0; i < m->n_backends; i++) {
    const struct backend_series *s = &m->backends[i];
    label(s->name, b, sizeof(b));
    put(&t, "sandbox_active_sessions{backend=\"%s\"} %llu\n", b,
        (unsigned long long)(s->created > s->destroyed ? s->created - s->destroyed : 0));
  }
  put(&t, "# HELP sandbox_session_duration_seconds Lifetime of destroyed sessions.\n"
          "# TYPE sandbox_session_duration_seconds histogram\n");
  for (size_t i = 0; i < m->n_backends; i++) {
    label(m->backends[i].name, b, sizeof(b));
    put_histogram(&t, "sandbox_session_duration_seconds", b, &m->backends[i].session_duration,
                  session_buckets);
  }
  put(&t, "# HELP sandbox_exec_count_total Commands run, by exit code.\n"
          "# TYPE sandbox_exec_count_total counter\n");
  for (size_t i = 0; i < m->n_execs; i++) {
    label(m->backends[m->execs[i].backend].name, b, sizeof(b));
    put(&t, "sandbox_exec_count_total{backend=\"%s\",exit_code=\"%d\"} %llu\n", b,
        m->execs[i].exit_code, (unsigned long long)m->execs[i].count);
  }
  put(&t, "# HELP sandbox_exec_duration_seconds Duration of commands run.\n"
          "# TYPE sandbox_exec_duration_seconds histogram\n");
  for (size_t i = 0; i < m->n_backends; i++) {
    label(m->backends[i].name, b, sizeof(b));
    put_histogram(&t, "sandbox_exec_duration_seconds", b, &m->backends[i].exec_duration,
                  exec_buckets);
  }
  pthread_mutex_unlock(&m->lock);
  if (t.failed) {
    free(t.data);
    return NULL;
  }
  return t.data ? t.data : strdup("");
}
