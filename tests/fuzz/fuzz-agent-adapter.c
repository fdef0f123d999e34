/* libFuzzer target for the agent CLI adapter files (src/agent/adapter.c through yaml-read.c).
 * The files are compiled in, but they are data a contributor edits, and the checks on them are
 * what stand between a typo and a grant: every state directory stays under ~/ without "." or
 * "..", every flag starts with '-', every variable is a name. What parses obeys those rules, and
 * its state directories under a HOME stay beneath it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/adapter.h"
#include "base/strv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct agent_adapter *a = NULL;
  struct cordon_error *err = NULL;
  if (agent_adapter_parse("fuzz", (const char *)data, size, &a, &err) < 0) {
    if (a || !err || !err->message)
      abort();
    cordon_error_free(err);
    return 0;
  }
  if (!a || !a->disable_flags || !a->state_dirs || !a->env)
    abort();
  for (char **f = a->disable_flags; *f; f++)
    if ((*f)[0] != '-' || !(*f)[1])
      abort();
  for (char **e = a->env; *e; e++)
    if (!**e || strchr(*e, '='))
      abort();
  char **dirs = NULL;
  if (agent_adapter_state_dirs(a, "/home/fuzz", &dirs, NULL) < 0)
    abort();
  for (char **d = dirs; *d; d++)
    if (strncmp(*d, "/home/fuzz/", 11) || strstr(*d, "/../") || strstr(*d, "/./") ||
        strstr(*d, "//"))
      abort(); /* a grant that leaves HOME */
  strv_free(dirs);
  const char *argv[] = {"agent", "--", "x", NULL};
  char **with = NULL;
  if (agent_adapter_argv(a, argv, true, &with, NULL) < 0)
    abort();
  size_t n = strv_length((const char *const *)with);
  if (n < 3 || strcmp(with[0], "agent") || strcmp(with[n - 1], "x") || strcmp(with[n - 2], "--"))
    abort(); /* flags go after argv[0], never after "--" */
  strv_free(with);
  agent_adapter_free(a);
  return 0;
}
