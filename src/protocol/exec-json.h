/* An exec's result as JSON, the one shape `cordon session exec --json`, `cordon run --json` and
 * the HTTP API (`cordon serve`) give, so the two surfaces cannot disagree. Pure. */
#ifndef CORDON_PROTOCOL_EXEC_JSON_H
#define CORDON_PROTOCOL_EXEC_JSON_H

#include <stdbool.h>

#include <jansson.h>

#include <cordon/backend.h>

/* {"exit_code", "signal", "timed_out", "stdout", "stderr", "stdout_bytes", "stderr_bytes",
 * "stdout_truncated", "stderr_truncated", "duration_seconds", "oom_killed"[, "exec_failure"]}.
 * base64 false: stdout and stderr as UTF-8 strings (null when not UTF-8); true: standard
 * base64 (RFC 4648 §4, padded), which carries any bytes. NULL on ENOMEM. */
json_t *exec_result_json(const struct cordon_exec_result *r, bool base64);

/* Standard padded base64 of data as a JSON string; NULL on ENOMEM. */
json_t *exec_base64_json(const void *data, size_t length);
/* Decode standard padded base64 (whitespace refused); malloc'd; -1 when malformed. */
int exec_base64_decode(const char *text, unsigned char **out, size_t *length);

#endif
