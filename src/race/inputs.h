/* A race's inputs: the manifest every candidate shares and each candidate's own files,
 * environment and patch. Placing them in a candidate's session, sealing them in the receipt by
 * digest, and checking the form of what a receipt says about them. */
#ifndef CORDON_RACE_INPUTS_H
#define CORDON_RACE_INPUTS_H

#include <jansson.h>

#include <cordon/backend.h>
#include <cordon/race.h>
#include <cordon/session.h>

/* Write candidate's files into its session, then apply its patch. Returns 0, 1 when the
 * candidate fails (the patch does not apply: *reason a CORDON_RACE_FAILURE_*, detail one line),
 * or -1 with err. */
int race_inputs_place(struct cordon_session *s, const struct cordon_race_inputs *in,
                      const char **reason, char *detail, size_t detail_size,
                      struct cordon_error **err);

/* The receipt's "manifest": what every session of the race started from, by digest (env values,
 * file contents, granted host paths), with its limits, network class and image. Nothing of the
 * host or the clock. NULL on ENOMEM. */
json_t *race_manifest_receipt(const struct cordon_manifest *m);
/* The receipt's "inputs": {task_id: {env, files, patch}} for the candidates that have any;
 * *out NULL when none has. -1 on ENOMEM. */
int race_inputs_receipt(const struct cordon_race_inputs *inputs, size_t k, json_t **out);
/* The form of a receipt's "manifest" and "inputs" (each optional); NULL or why not. */
const char *race_inputs_check(const json_t *root);

#endif
