/* The server's Prometheus metrics (metrics.h): a few families kept in small arrays under one
 * lock, rendered in text format 0.0.4. Labels are escaped: a backend name read from the event
 * log is data, not trusted text. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "obs/events.h"
#include "server/metrics.h"

#define METRICS_MAX_BACKENDS 32
#define METRICS_MAX_EXEC_SERIES 512
#define METRICS_MAX_EGRESS_SERIES 256
#define METRICS_NAME_MAX 64
/* The exit code the log gives an exec that did not run (as `cordon run` reports it). */
#define METRICS_EXEC_FAILED_CODE 125

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
  uint64_t egress_bytes_out, egress_bytes_in; /* through the egress proxy, summed */
  uint64_t active; /* the live sessions of this backend (struct metrics' live) */
  struct histogram session_duration;
  struct histogram exec_duration;
};

struct exec_series {
  int backend; /* index into backends */
  int exit_code;
  uint64_t count;
};

/* One kind of egress decision of a backend's sessions (verb "egress"). */
struct egress_series {
  int backend;
  char decision[OBS_EVENT_DECISION_MAX + 1];
  char rule[OBS_EVENT_NAME_MAX + 1];
  uint64_t count;
};

/* A session alive as far as the server knows: present at its start, or created since, and no
 * destroy of it seen. Kept by id so that sandbox_active_sessions is what exists, whatever the
 * order in which the listing at the start and the log saw it. */
struct live_session {
  char id[OBS_EVENT_NAME_MAX + 1];
  int backend;
};

struct metrics {
  pthread_mutex_t lock;
  pthread_mutex_t reading; /* one reader of the event log at a time */
  struct backend_series backends[METRICS_MAX_BACKENDS];
  size_t n_backends;
  struct exec_series execs[METRICS_MAX_EXEC_SERIES];
  size_t n_execs;
  struct egress_series egress[METRICS_MAX_EGRESS_SERIES];
  size_t n_egress;
  struct live_session *live;
  size_t n_live, live_capacity;
  struct obs_events_follower *events;
};

int metrics_new(const char *state_dir, struct metrics **out, struct cordon_error **err) {
  struct metrics *m = calloc(1, sizeof(*m));
  if (!m)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "metrics");
  pthread_mutex_init(&m->lock, NULL);
  pthread_mutex_init(&m->reading, NULL);
  if (state_dir && obs_events_follow_new(state_dir, false, &m->events, err) < 0) {
    metrics_free(m);
    return -1;
  }
  *out = m;
  return 0;
}

void metrics_free(struct metrics *m) {
  if (!m)
    return;
  obs_events_follow_free(m->events);
  free(m->live);
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
  if (value < 0 || !isfinite(value))
    return;
  for (int i = 0; i < N_BUCKETS; i++)
    if (value <= bounds[i]) {
      h->counts[i]++;
      break;
    }
  h->count++;
  h->sum += value;
}

static ssize_t live_find(const struct metrics *m, const char *id) {
  for (size_t i = 0; i < m->n_live; i++)
    if (!strcmp(m->live[i].id, id))
      return (ssize_t)i;
  return -1;
}

/* Lock held. A session already known is not added again; without memory it goes uncounted. */
static void live_add(struct metrics *m, const char *id, int backend) {
  if (!*id || live_find(m, id) >= 0)
    return;
  if (m->n_live == m->live_capacity) {
    size_t want = m->live_capacity ? 2 * m->live_capacity : 16;
    struct live_session *grown = realloc(m->live, want * sizeof(*grown));
    if (!grown)
      return;
    m->live = grown;
    m->live_capacity = want;
  }
  struct live_session *l = &m->live[m->n_live++];
  snprintf(l->id, sizeof(l->id), "%s", id);
  l->backend = backend;
  m->backends[backend].active++;
}

/* Lock held. A session not known (destroyed before the listing at the start) changes nothing. */
static void live_remove(struct metrics *m, const char *id) {
  ssize_t i = live_find(m, id);
  if (i < 0)
    return;
  m->backends[m->live[i].backend].active--;
  m->live[i] = m->live[--m->n_live];
}

void metrics_session_present(struct metrics *m, const char *session, const char *backend) {
  pthread_mutex_lock(&m->lock);
  int b = backend_index(m, backend);
  if (b >= 0)
    live_add(m, session, b);
  pthread_mutex_unlock(&m->lock);
}

/* Lock held. */
static void count_exec(struct metrics *m, int b, int exit_code, double seconds) {
  observe(&m->backends[b].exec_duration, exec_buckets, seconds);
  size_t i = 0;
  while (i < m->n_execs && (m->execs[i].backend != b || m->execs[i].exit_code != exit_code))
    i++;
  if (i == m->n_execs && m->n_execs < METRICS_MAX_EXEC_SERIES)
    m->execs[m->n_execs++] = (struct exec_series){.backend = b, .exit_code = exit_code};
  if (i < m->n_execs)
    m->execs[i].count++;
}

/* Lock held. */
static void count_egress(struct metrics *m, int b, const struct obs_event *e) {
  m->backends[b].egress_bytes_out += e->bytes_out;
  m->backends[b].egress_bytes_in += e->bytes_in;
  size_t i = 0;
  while (i < m->n_egress &&
         (m->egress[i].backend != b || strcmp(m->egress[i].decision, e->decision) ||
          strcmp(m->egress[i].rule, e->rule)))
    i++;
  if (i == m->n_egress && m->n_egress < METRICS_MAX_EGRESS_SERIES) {
    struct egress_series *series = &m->egress[m->n_egress++];
    series->backend = b;
    snprintf(series->decision, sizeof(series->decision), "%s", e->decision);
    snprintf(series->rule, sizeof(series->rule), "%s", e->rule);
    series->count = 0;
  }
  if (i < m->n_egress)
    m->egress[i].count += e->count;
}

void metrics_apply(struct metrics *m, const struct obs_event *e) {
  if (!strcmp(e->verb, "egress")) {
    if (!e->has_egress)
      return;
    pthread_mutex_lock(&m->lock);
    int b = backend_index(m, e->backend);
    if (b >= 0)
      count_egress(m, b, e);
    pthread_mutex_unlock(&m->lock);
    return;
  }
  bool create = !strcmp(e->verb, "create"), destroy = !strcmp(e->verb, "destroy");
  bool exec = !strcmp(e->verb, "exec");
  if (((create || destroy) && e->failed) || !(create || destroy || exec) ||
      (exec && !e->has_exit_code && !e->failed))
    return;
  pthread_mutex_lock(&m->lock);
  int b = backend_index(m, e->backend);
  if (b >= 0 && create) {
    m->backends[b].created++;
    live_add(m, e->session, b);
  } else if (b >= 0 && destroy) {
    m->backends[b].destroyed++;
    observe(&m->backends[b].session_duration, session_buckets, e->duration_seconds);
    live_remove(m, e->session);
  } else if (b >= 0) {
    count_exec(m, b, e->has_exit_code ? e->exit_code : METRICS_EXEC_FAILED_CODE,
               e->duration_seconds);
  }
  pthread_mutex_unlock(&m->lock);
}

static int apply_event(void *data, const struct obs_event *e) {
  metrics_apply(data, e);
  return 0;
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

/* Lock held. Whether a backend has any egress series (its bytes are shown, even 0). */
static bool backend_has_egress(const struct metrics *m, int b) {
  for (size_t i = 0; i < m->n_egress; i++)
    if (m->egress[i].backend == b)
      return true;
  return false;
}

char *metrics_render(struct metrics *m) {
  if (m->events) {
    /* A log that cannot be read leaves the counters where they were: /metrics still answers. */
    struct cordon_error *err = NULL;
    pthread_mutex_lock(&m->reading);
    obs_events_follow_poll(m->events, apply_event, m, &err);
    pthread_mutex_unlock(&m->reading);
    cordon_error_free(err);
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
  put(&t, "# HELP sandbox_active_sessions Sessions that exist: those at the server's start and "
          "those created since, less those destroyed.\n"
          "# TYPE sandbox_active_sessions gauge\n");
  for (size_t i = 0; i < m->n_backends; i++) {
    label(m->backends[i].name, b, sizeof(b));
    put(&t, "sandbox_active_sessions{backend=\"%s\"} %llu\n", b,
        (unsigned long long)m->backends[i].active);
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
  put(&t, "# HELP sandbox_egress_decisions_total Egress proxy decisions (--net restricted), by "
          "decision and the rule that refused (\"\" when allowed), counted when a session "
          "ends.\n"
          "# TYPE sandbox_egress_decisions_total counter\n");
  for (size_t i = 0; i < m->n_egress; i++) {
    char d[2 * sizeof(m->egress[i].decision)], r[2 * sizeof(m->egress[i].rule)];
    label(m->backends[m->egress[i].backend].name, b, sizeof(b));
    label(m->egress[i].decision, d, sizeof(d));
    label(m->egress[i].rule, r, sizeof(r));
    put(&t, "sandbox_egress_decisions_total{backend=\"%s\",decision=\"%s\",rule=\"%s\"} %llu\n", b,
        d, r, (unsigned long long)m->egress[i].count);
  }
  put(&t, "# HELP sandbox_egress_bytes_total Bytes relayed by the egress proxy: out (client to "
          "destination) and in, counted when a session ends.\n"
          "# TYPE sandbox_egress_bytes_total counter\n");
  for (size_t i = 0; i < m->n_backends; i++) {
    if (!backend_has_egress(m, (int)i))
      continue;
    label(m->backends[i].name, b, sizeof(b));
    put(&t, "sandbox_egress_bytes_total{backend=\"%s\",direction=\"out\"} %llu\n", b,
        (unsigned long long)m->backends[i].egress_bytes_out);
    put(&t, "sandbox_egress_bytes_total{backend=\"%s\",direction=\"in\"} %llu\n", b,
        (unsigned long long)m->backends[i].egress_bytes_in);
  }
  pthread_mutex_unlock(&m->lock);
  if (t.failed) {
    free(t.data);
    return NULL;
  }
  return t.data ? t.data : strdup("");
}
