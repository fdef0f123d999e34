/* The textual forms of a race's own options (pure: nothing is read or opened here): each
 * candidate's --candidate I:FILE=SRC, --candidate-env I:KEY=VALUE and --patch I:PATCHFILE, and
 * the judge's --judge-cmd JSON. The CLI (cli/race-inputs.c, cli/cmd-race.c) parses them through
 * these, and the fuzz targets reach them without a command line. */
#ifndef CORDON_RACE_FORMS_H
#define CORDON_RACE_FORMS_H

#include <stddef.h>

#include <cordon/error.h>

enum race_form {
  RACE_FORM_FILE,  /* --candidate I:FILE=SRC */
  RACE_FORM_ENV,   /* --candidate-env I:KEY=VALUE */
  RACE_FORM_PATCH, /* --patch I:PATCHFILE */
};

/* One option's value, its parts pointing into the argument. */
struct race_form_value {
  unsigned index;   /* the candidate, below k */
  const char *name; /* FILE for a file (name_length bytes), else the whole rest after "I:" */
  size_t name_length;
  const char *value; /* SRC for a file, the rest after "I:" otherwise */
};

/* Parse arg as the form (k candidates, 0..k-1). CORDON_ERR_USAGE saying what the option expects,
 * naming the option and arg. */
int race_form_parse(enum race_form form, const char *arg, unsigned k, struct race_form_value *out,
                    struct cordon_error **err);

/* --judge-cmd: strictly a non-empty JSON array of strings, the first non-empty, none holding a
 * NUL (it becomes an argv). *argv is NULL-terminated (strv_free). CORDON_ERR_USAGE naming text. */
int race_judge_cmd_parse(const char *text, char ***argv, struct cordon_error **err);

#endif
