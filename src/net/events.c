/* Egress event lines (events.h). */
#include "net/events.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static json_t *string_or_null(const char *text) {
  return text ? json_string(text) : json_null();
}

char *net_event_format(const struct net_event *event) {
  time_t seconds = (time_t)(event->time_ms / 1000);
  struct tm utc;
  char stamp[40];
  gmtime_r(&seconds, &utc);
  size_t n = strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &utc);
  snprintf(stamp + n, sizeof stamp - n, ".%03dZ", (int)(event->time_ms % 1000));
  json_t *o = json_object();
  if (!o)
    return NULL;
  json_object_set_new(o, "time", json_string(stamp));
  json_object_set_new(o, "kind", json_string("egress"));
  json_object_set_new(o, "protocol", string_or_null(event->protocol));
  /* A host as the client sent it may hold any byte: printable ASCII is kept, the rest is '?'. */
  char host[256];
  if (event->host) {
    size_t i = 0;
    for (; event->host[i] && i < sizeof host - 1; i++)
      host[i] = event->host[i] > ' ' && event->host[i] < 0x7f ? event->host[i] : '?';
    host[i] = 0;
  }
  json_object_set_new(o, "host", event->host ? json_string(host) : json_null());
  json_object_set_new(o, "port", event->port ? json_integer(event->port) : json_null());
  json_object_set_new(o, "address", string_or_null(event->address));
  json_object_set_new(o, "decision", json_string(event->rule ? "refused" : "allowed"));
  json_object_set_new(o, "rule", string_or_null(event->rule));
  json_object_set_new(o, "bytes_out", json_integer((json_int_t)event->bytes_out));
  json_object_set_new(o, "bytes_in", json_integer((json_int_t)event->bytes_in));
  char *text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
  json_decref(o);
  if (!text)
    return NULL;
  size_t length = strlen(text);
  char *line = realloc(text, length + 2);
  if (!line) {
    free(text);
    return NULL;
  }
  line[length] = '\n';
  line[length + 1] = 0;
  return line;
}

void net_event_write(int fd, const struct net_event *event) {
  if (fd < 0)
    return;
  char *line = net_event_format(event);
  if (!line)
    return;
  ssize_t ignored = write(fd, line, strlen(line));
  (void)ignored;
  free(line);
}

/* A rule as the proxy writes it: a short word of [a-z0-9:-] (rules.h); anything else is data
 * nobody should find as a label, and counts as "other". */
static bool rule_word(const char *rule) {
  size_t n = strlen(rule);
  if (n == 0 || n >= NET_SUMMARY_RULE_MAX)
    return false;
  for (const char *p = rule; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == ':'))
      return false;
  return true;
}

static struct net_summary_kind *summary_kind(struct net_summary *summary, bool refused,
                                             const char *rule) {
  for (size_t i = 0; i < summary->count; i++)
    if (summary->kinds[i].refused == refused && !strcmp(summary->kinds[i].rule, rule))
      return &summary->kinds[i];
  /* The last slot is kept for "other", where every kind past the others goes. */
  bool other = !strcmp(rule, "other");
  if (summary->count >= (other ? NET_SUMMARY_MAX : NET_SUMMARY_MAX - 1))
    return other ? NULL : summary_kind(summary, refused, "other");
  struct net_summary_kind *k = &summary->kinds[summary->count++];
  memset(k, 0, sizeof *k);
  k->refused = refused;
  snprintf(k->rule, sizeof k->rule, "%s", rule);
  return k;
}

int net_summary_add_line(struct net_summary *summary, const char *line, size_t length) {
  json_t *o = json_loadb(line, length, 0, NULL);
  if (!o)
    return 0;
  const char *kind = json_string_value(json_object_get(o, "kind"));
  const char *decision = json_string_value(json_object_get(o, "decision"));
  json_t *rule = json_object_get(o, "rule");
  json_t *out = json_object_get(o, "bytes_out"), *in = json_object_get(o, "bytes_in");
  bool refused = decision && !strcmp(decision, "refused");
  int r = 0;
  if (kind && !strcmp(kind, "egress") && decision && (refused || !strcmp(decision, "allowed")) &&
      json_is_integer(out) && json_is_integer(in) && json_integer_value(out) >= 0 &&
      json_integer_value(in) >= 0 && (refused ? json_is_string(rule) : json_is_null(rule))) {
    const char *name = refused ? json_string_value(rule) : "";
    struct net_summary_kind *k =
        summary_kind(summary, refused, !refused || rule_word(name) ? name : "other");
    if (!k) /* the table is full and "other" of this decision is not in it: the last slot */
      k = &summary->kinds[NET_SUMMARY_MAX - 1];
    k->count++;
    k->bytes_out += (uint64_t)json_integer_value(out);
    k->bytes_in += (uint64_t)json_integer_value(in);
    r = 1;
  }
  json_decref(o);
  return r;
}
