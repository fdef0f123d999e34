/* The textual forms of a race's own options (forms.h). Pure: strings in, parts and an argv out;
 * reading the files they name is the CLI's. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/cleanup.h"
#include "base/strv.h"
#include "race/forms.h"

static const char *const form_option[] = {"--candidate", "--candidate-env", "--patch"};
static const char *const form_shape[] = {"I:FILE=SRC", "I:KEY=VALUE", "I:PATCHFILE"};

/* "I:REST" with I in 0..k-1, decimal: *rest after the colon. */
static int candidate_of(const char *option, const char *arg, unsigned k, unsigned *index,
                        const char **rest, struct cordon_error **err) {
  char *end = NULL;
  errno = 0;
  unsigned long i = arg[0] >= '0' && arg[0] <= '9' ? strtoul(arg, &end, 10) : 0;
  if (!end || *end != ':' || errno)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                            "%s expects I:..., a candidate index, a colon, then its value, "
                            "got '%s'",
                            option, arg);
  if (k == 0 || i >= k)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                            "%s '%s': there is no candidate %lu (candidates are 0..%u)", option,
                            arg, i, k ? k - 1 : 0);
  *index = (unsigned)i;
  *rest = end + 1;
  return 0;
}

int race_form_parse(enum race_form form, const char *arg, unsigned k, struct race_form_value *out,
                    struct cordon_error **err) {
  memset(out, 0, sizeof(*out));
  const char *option = form_option[form], *rest = NULL;
  if (candidate_of(option, arg, k, &out->index, &rest, err) < 0)
    return -1;
  out->name = out->value = rest;
  out->name_length = strlen(rest);
  bool well_formed = false;
  switch (form) {
  case RACE_FORM_FILE: {
    const char *eq = strchr(rest, '=');
    well_formed = eq && eq != rest && eq[1];
    if (well_formed) {
      out->name_length = (size_t)(eq - rest);
      out->value = eq + 1;
    }
    break;
  }
  case RACE_FORM_ENV: well_formed = strchr(rest, '=') && rest[0] != '='; break;
  case RACE_FORM_PATCH: well_formed = rest[0] != 0; break;
  }
  if (!well_formed)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "%s expects %s, got '%s'", option,
                            form_shape[form], arg);
  return 0;
}

int race_judge_cmd_parse(const char *text, char ***argv, struct cordon_error **err) {
  *argv = NULL;
  json_error_t jerr;
  json_t *v = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
  _cleanup_(strv_freep) char **words = NULL;
  int r = 0;
  if (!json_is_array(v) || json_array_size(v) == 0) {
    r = cordon_error_set(err, CORDON_ERR_USAGE, 0,
                         "--judge-cmd needs a JSON array of strings such as "
                         "'[\"sh\", \"-c\", \"make test\"]', not '%s'",
                         text);
    goto out;
  }
  for (size_t i = 0; i < json_array_size(v); i++) {
    json_t *word = json_array_get(v, i);
    const char *s = json_string_value(word);
    if (!s || strlen(s) != json_string_length(word) || (i == 0 && !*s)) {
      r = cordon_error_set(err, CORDON_ERR_USAGE, 0,
                           "--judge-cmd: word %zu is not a string (non-empty first, no NUL) in "
                           "'%s'",
                           i, text);
      goto out;
    }
    if (strv_push(&words, s) < 0) {
      r = cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "--judge-cmd");
      goto out;
    }
  }
  *argv = steal_ptr(&words);
out:
  json_decref(v);
  return r;
}
