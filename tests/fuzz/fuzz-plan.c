/* libFuzzer target for plan.yaml (src/plan/parse.c) and the event log's lines
 * (src/obs/events.c): neither parser crashes or leaks on any input; a plan either parses
 * whole or is refused with FILE:LINE:COLUMN; an event that parses formats to a line that
 * parses back to the same event. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "obs/events.h"
#include "plan/plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct plan *p = NULL;
  struct cordon_error *err = NULL;
  if (plan_parse("fuzz.yaml", (const char *)data, size, &p, &err) < 0) {
    if (!err || !err->message || strncmp(err->message, "fuzz.yaml:", 10) != 0)
      abort(); /* every refusal names the place */
    cordon_error_free(err);
  } else {
    for (size_t i = 0; i < p->n_stages; i++)
      if (!p->stages[i].name || !p->stages[i].backend || !p->stages[i].n_steps)
        abort();
    plan_free(p);
  }
  struct obs_event e, back;
  if (obs_event_parse((const char *)data, size, &e) == 0) {
    char line[OBS_EVENT_LINE_MAX];
    int n = obs_event_format(&e, line, sizeof(line));
    if (n > 0 && (obs_event_parse(line, (size_t)n - 1, &back) < 0 || strcmp(back.verb, e.verb) ||
                  strcmp(back.session, e.session) || back.exit_code != e.exit_code ||
                  back.failed != e.failed))
      abort();
  }
  return 0;
}
