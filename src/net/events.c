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
