/* `cordon race`'s inputs: run's manifest options for every candidate (--env, --file,
 * --allow-ro, --net, --memory, --pids, --cpus, --image, parsed by cmd-manifest.c's
 * manifest_option) and each candidate's own (--candidate, --candidate-env, --patch). */
#ifndef CORDON_CLI_RACE_INPUTS_H
#define CORDON_CLI_RACE_INPUTS_H

#include <cordon/backend.h>
#include <cordon/race.h>

struct cli_race_inputs;

/* The race's option table rows for these options, every one with the value val: the option's
 * name tells them apart (cli_race_inputs_option). */
#define RACE_INPUT_OPTIONS(val)                                                                  \
  {"env", required_argument, NULL, val}, {"file", required_argument, NULL, val},                 \
      {"allow-ro", required_argument, NULL, val}, {"net", required_argument, NULL, val},         \
      {"memory", required_argument, NULL, val}, {"pids", required_argument, NULL, val},          \
      {"cpus", required_argument, NULL, val}, {"image", required_argument, NULL, val},           \
      {"candidate", required_argument, NULL, val},                                               \
      {"candidate-env", required_argument, NULL, val},                                           \
      {"allow-domain", required_argument, NULL, val},                                            \
      {"allow-cidr", required_argument, NULL, val}, {"resolve", required_argument, NULL, val}, { \
    "patch", required_argument, NULL, val                                                        \
  }

#define RACE_INPUT_HELP                                                                          \
  "  --env KEY=VALUE --file PATH=SRC --allow-ro HOSTPATH --net CLASS --memory SIZE --pids N\n"   \
  "  --cpus X --image IMAGE --allow-domain NAME --allow-cidr CIDR --resolve NAME:ADDR\n"         \
  "                     as for 'cordon run', for every candidate and judge (repeatable where\n"  \
  "                     run's are); the receipt's manifest binds --net restricted's rules,\n"    \
  "                     canonical and sorted\n"                                                  \
  "  --candidate I:FILE=SRC\n"                                                                   \
  "                     host file SRC placed at workspace path FILE in candidate I only\n"       \
  "  --candidate-env I:KEY=VALUE\n"                                                              \
  "                     KEY=VALUE in candidate I's command only (not its judge's)\n"             \
  "  --patch I:PATCHFILE\n"                                                                      \
  "                     a unified diff applied to candidate I's workspace before its command,\n" \
  "                     strictly (exact context at its line numbers, no fuzz; it cannot\n"       \
  "                     delete a file); one that does not apply fails that candidate only\n"     \
  "                     Candidates are 0..K-1. The receipt binds all of these by sha256\n"       \
  "                     (\"manifest\", \"inputs\"), never a value, host path or time.\n"

/* One option of RACE_INPUT_OPTIONS by name; *in is made on first use. Returns 0, or an exit
 * code. */
int cli_race_inputs_option(const char *name, const char *arg, struct cli_race_inputs **in);
/* After parsing, K known: check every candidate index and read every file and patch, so
 * that any mistake is a usage error before a session starts. Returns 0 or an exit code. */
int cli_race_inputs_prepare(struct cli_race_inputs *in, unsigned k);
/* With the backend chosen: the shared manifest (NULL when no manifest option was given) and
 * the per-candidate inputs (NULL when none), owned by in; a backend that does not enforce what
 * is asked refuses it (as for run). Returns 0, or an exit code after saying why. */
int cli_race_inputs_resolve(struct cli_race_inputs *in, const struct cordon_backend *backend,
                            const struct cordon_manifest **manifest,
                            const struct cordon_race_inputs **per);
void cli_race_inputs_free(struct cli_race_inputs *in);

#endif
