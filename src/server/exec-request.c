/* An exec request from the API's JSON body (POST /v1/sessions/ID/exec): {"argv": [..],
 * "cwd", "env": {K: V}, "clear_env", "timeout_seconds", "stdin" (base64), "max_output"};
 * strict, pure. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/exec-json.h"
#include "server/manifest-json.h"
#include "server/server.h"

void exec_request_clear(struct cordon_exec_request *x) {
  free((void *)x->argv);
  size_t n = 0;
  while (x->env && x->env[n])
    n++;
  json_env_free((const char **)x->env, n);
  free((void *)x->stdin_data);
  memset(x, 0, sizeof(*x));
}

static int refuse(char **why, const char *message) {
  *why = strdup(message);
  return -1;
}

static int parse_argv(json_t *doc, struct cordon_exec_request *x, char **why) {
  json_t *argv = json_object_get(doc, "argv");
  if (!json_is_array(argv) || json_array_size(argv) == 0)
    return refuse(why, "'argv' must be a non-empty list of strings (never a shell line)");
  const char **list = calloc(json_array_size(argv) + 1, sizeof(*list));
  if (!list)
    return refuse(why, "out of memory");
  x->argv = list;
  size_t i;
  json_t *item;
  json_array_foreach(argv, i, item) {
    if (!json_is_string(item))
      return refuse(why, "'argv' must be a list of strings");
    list[i] = json_string_value(item);
  }
  return 0;
}

int exec_request_parse(json_t *doc, struct cordon_exec_request *x, char **why) {
  static const char *const keys[] = {"argv",  "cwd",        "env", "clear_env", "timeout_seconds",
                                     "stdin", "max_output", NULL};
  memset(x, 0, sizeof(*x));
  x->stdio_fds[0] = x->stdio_fds[1] = x->stdio_fds[2] = -1;
  if (json_only_keys(doc, "", keys, why) < 0)
    return -1;
  const char **env = NULL;
  size_t n_env = 0;
  if (parse_argv(doc, x, why) < 0 || json_env_parse(doc, &env, &n_env, why) < 0)
    return -1;
  x->env = env;
  json_t *cwd = json_object_get(doc, "cwd");
  if (cwd && !json_is_null(cwd) && !json_is_string(cwd))
    return refuse(why, "'cwd' must be a string");
  x->cwd = json_string_value(cwd);
  json_t *clear = json_object_get(doc, "clear_env");
  if (clear && !json_is_boolean(clear))
    return refuse(why, "'clear_env' must be true or false");
  x->clear_env = json_is_true(clear);
  json_t *timeout = json_object_get(doc, "timeout_seconds");
  if (timeout && !json_is_null(timeout)) {
    if (!json_is_number(timeout) || !isfinite(json_number_value(timeout)))
      return refuse(why, "'timeout_seconds' must be a number (0: the session's, < 0: none)");
    x->timeout = json_number_value(timeout);
  }
  json_t *max = json_object_get(doc, "max_output");
  if (max && !json_is_null(max)) {
    if (!json_is_integer(max) || json_integer_value(max) <= 0)
      return refuse(why, "'max_output' must be a positive integer");
    x->max_output = (size_t)json_integer_value(max);
  }
  json_t *in = json_object_get(doc, "stdin");
  if (in && !json_is_null(in)) {
    unsigned char *data = NULL;
    size_t length = 0;
    if (!json_is_string(in) || exec_base64_decode(json_string_value(in), &data, &length) < 0)
      return refuse(why, "'stdin' must be base64");
    x->stdin_data = data;
    x->stdin_length = length;
  }
  return 0;
}
