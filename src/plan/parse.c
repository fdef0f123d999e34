/* plan.yaml's parser (plan.h): libyaml's document API, and every node checked for its type
 * before it is read, so a plan either parses whole or is refused at one place, FILE:LINE:COLUMN,
 * before anything runs. Pure but for plan_load's read. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/strv.h"
#include "plan/plan.h"

/* Bounds against a small file that says much through aliases. */
#define PLAN_MAX_STAGES 256
#define PLAN_MAX_STEPS 1024
#define PLAN_MAX_LIST 4096

struct parser {
  const char *file;
  yaml_document_t *doc;
  struct cordon_error **err;
};

static struct plan_mark mark_of(const yaml_node_t *node) {
  return (struct plan_mark){node ? (unsigned)node->start_mark.line + 1 : 1,
                            node ? (unsigned)node->start_mark.column + 1 : 1};
}

static int __attribute__((format(printf, 3, 4)))
refuse(struct parser *p, const yaml_node_t *node, const char *fmt, ...) {
  char message[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message, sizeof(message), fmt, ap);
  va_end(ap);
  struct plan_mark at = mark_of(node);
  return cordon_error_set(p->err, CORDON_ERR_INVALID, 0, "%s:%u:%u: %s", p->file, at.line,
                          at.column, message);
}

static int no_memory(struct parser *p) {
  return cordon_error_set(p->err, CORDON_ERR_SYSTEM, ENOMEM, "%s", p->file);
}

static yaml_node_t *node_at(struct parser *p, int index) {
  return yaml_document_get_node(p->doc, index);
}

static const char *scalar_of(const yaml_node_t *node) {
  return node && node->type == YAML_SCALAR_NODE ? (const char *)node->data.scalar.value : NULL;
}

static const char *type_name(const yaml_node_t *node) {
  if (!node)
    return "nothing";
  return node->type == YAML_MAPPING_NODE    ? "a mapping"
         : node->type == YAML_SEQUENCE_NODE ? "a list"
                                            : "a scalar";
}

/* A mapping whose keys are all scalars, each once, each one of allowed. */
static int check_mapping(struct parser *p, yaml_node_t *node, const char *what,
                         const char *const *allowed, const char *expected) {
  if (!node || node->type != YAML_MAPPING_NODE)
    return refuse(p, node, "%s must be a mapping (%s), not %s", what, expected, type_name(node));
  for (yaml_node_pair_t *i = node->data.mapping.pairs.start; i < node->data.mapping.pairs.top;
       i++) {
    yaml_node_t *key = node_at(p, i->key);
    const char *name = scalar_of(key);
    if (!name)
      return refuse(p, key, "a key of %s is not a string", what);
    bool known = false;
    for (size_t k = 0; allowed[k]; k++)
      known = known || !strcmp(allowed[k], name);
    if (!known)
      return refuse(p, key, "unknown key '%s' in %s (expected %s)", name, what, expected);
    for (yaml_node_pair_t *j = node->data.mapping.pairs.start; j < i; j++)
      if (!strcmp(scalar_of(node_at(p, j->key)), name))
        return refuse(p, key, "key '%s' appears twice in %s", name, what);
  }
  return 0;
}

static yaml_node_t *lookup(struct parser *p, yaml_node_t *map, const char *key) {
  for (yaml_node_pair_t *i = map->data.mapping.pairs.start; i < map->data.mapping.pairs.top; i++)
    if (!strcmp(scalar_of(node_at(p, i->key)), key))
      return node_at(p, i->value);
  return NULL;
}

/* A non-empty string: any scalar (a number in an argv is its text), without NUL bytes. */
static int get_string(struct parser *p, yaml_node_t *node, const char *what, char **out) {
  const char *text = scalar_of(node);
  if (!text || !*text)
    return refuse(p, node, "%s must be a non-empty string, not %s", what,
                  text ? "an empty one" : type_name(node));
  if (strlen(text) != node->data.scalar.length)
    return refuse(p, node, "%s holds a NUL byte", what);
  free(*out);
  *out = strdup(text);
  return *out ? 0 : no_memory(p);
}

static bool plain(const yaml_node_t *node) {
  return node && node->type == YAML_SCALAR_NODE &&
         node->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
}

static int get_positive_integer(struct parser *p, yaml_node_t *node, const char *what, uint64_t max,
                                uint64_t *out) {
  const char *text = scalar_of(node);
  char *end = NULL;
  errno = 0;
  unsigned long long v =
      plain(node) && text[0] >= '0' && text[0] <= '9' ? strtoull(text, &end, 10) : 0;
  if (!end || *end || errno || v == 0 || v > max)
    return refuse(p, node, "%s must be a whole number from 1 to %llu", what,
                  (unsigned long long)max);
  *out = v;
  return 0;
}

static int get_positive_number(struct parser *p, yaml_node_t *node, const char *what, double *out) {
  const char *text = scalar_of(node);
  char *end = NULL;
  double v = plain(node) && ((text[0] >= '0' && text[0] <= '9') || text[0] == '.')
                 ? strtod(text, &end)
                 : 0;
  if (!end || *end || !isfinite(v) || v <= 0 || v > 1e9)
    return refuse(p, node, "%s must be a positive number of seconds", what);
  *out = v;
  return 0;
}

static int get_string_list(struct parser *p, yaml_node_t *node, const char *what, bool non_empty,
                           char ***out) {
  if (!node || node->type != YAML_SEQUENCE_NODE)
    return refuse(p, node, "%s must be a list of strings, not %s", what, type_name(node));
  size_t n = (size_t)(node->data.sequence.items.top - node->data.sequence.items.start);
  if (non_empty && n == 0)
    return refuse(p, node, "%s must not be empty", what);
  if (n > PLAN_MAX_LIST)
    return refuse(p, node, "%s holds more than %d entries", what, PLAN_MAX_LIST);
  _cleanup_(strv_freep) char **list = strv_copy(NULL);
  if (!list)
    return no_memory(p);
  for (yaml_node_item_t *i = node->data.sequence.items.start; i < node->data.sequence.items.top;
       i++) {
    _cleanup_free_ char *text = NULL;
    if (get_string(p, node_at(p, *i), what, &text) < 0)
      return -1;
    if (strv_push(&list, text) < 0)
      return no_memory(p);
  }
  strv_free(*out);
  *out = steal_ptr(&list);
  return 0;
}

/* env: a mapping of NAME: value (scalars), kept as "NAME=value". */
static int get_env(struct parser *p, yaml_node_t *node, char ***out) {
  if (!node || node->type != YAML_MAPPING_NODE)
    return refuse(p, node, "env must be a mapping of NAME: value, not %s", type_name(node));
  _cleanup_(strv_freep) char **list = strv_copy(NULL);
  if (!list)
    return no_memory(p);
  for (yaml_node_pair_t *i = node->data.mapping.pairs.start; i < node->data.mapping.pairs.top;
       i++) {
    yaml_node_t *key = node_at(p, i->key), *value = node_at(p, i->value);
    const char *name = scalar_of(key), *text = scalar_of(value);
    if (!name || !*name || strchr(name, '=') || strlen(name) != key->data.scalar.length)
      return refuse(p, key, "an env name must be a non-empty string without '='");
    for (yaml_node_pair_t *j = node->data.mapping.pairs.start; j < i; j++)
      if (!strcmp(scalar_of(node_at(p, j->key)), name))
        return refuse(p, key, "env name '%s' appears twice", name);
    if (!text || strlen(text) != value->data.scalar.length)
      return refuse(p, value, "the value of env %s must be a string, not %s", name,
                    text ? "one with a NUL byte" : type_name(value));
    char *entry = NULL;
    if (asprintf(&entry, "%s=%s", name, text) < 0 || strv_push_take(&list, entry) < 0)
      return no_memory(p);
  }
  *out = steal_ptr(&list);
  return 0;
}

static int parse_options(struct parser *p, yaml_node_t *node, struct plan_options *o) {
  static const char *const keys[] = {
      "image", "memory_mb", "timeout_seconds", "net", "read_only", "hidden", "env", NULL};
  if (check_mapping(p, node, "options", keys,
                    "image, memory_mb, timeout_seconds, net, read_only, hidden, env") < 0)
    return -1;
  yaml_node_t *v;
  if ((v = lookup(p, node, "image")) && get_string(p, v, "image", &o->image) < 0)
    return -1;
  if ((v = lookup(p, node, "memory_mb")) &&
      get_positive_integer(p, v, "memory_mb", 1u << 30, &o->memory_mb) < 0)
    return -1;
  if ((v = lookup(p, node, "timeout_seconds")) &&
      get_positive_number(p, v, "timeout_seconds", &o->timeout_seconds) < 0)
    return -1;
  if ((v = lookup(p, node, "net"))) {
    const char *text = scalar_of(v);
    if (!text || cordon_egress_parse(text, &o->net) < 0)
      return refuse(p, v, "net must be one of none, loopback, restricted, open");
    o->net_set = true;
  }
  if ((v = lookup(p, node, "read_only")) &&
      get_string_list(p, v, "read_only", false, &o->read_only) < 0)
    return -1;
  if ((v = lookup(p, node, "hidden")) && get_string_list(p, v, "hidden", false, &o->hidden) < 0)
    return -1;
  if ((v = lookup(p, node, "env")) && get_env(p, v, &o->env) < 0)
    return -1;
  return 0;
}

static int parse_sandbox(struct parser *p, yaml_node_t *node, struct plan_stage *st) {
  static const char *const keys[] = {"backend", "options", NULL};
  if (check_mapping(p, node, "sandbox", keys, "backend, options") < 0)
    return -1;
  yaml_node_t *backend = lookup(p, node, "backend");
  if (!backend)
    return refuse(p, node, "sandbox needs a backend");
  if (get_string(p, backend, "backend", &st->backend) < 0)
    return -1;
  st->backend_at = mark_of(backend);
  yaml_node_t *options = lookup(p, node, "options");
  return options ? parse_options(p, options, &st->options) : 0;
}

/* A step: a list (the argv), or a mapping of exactly one of argv: LIST or run: LINE. */
static int parse_step(struct parser *p, yaml_node_t *node, struct plan_step *step) {
  step->at = mark_of(node);
  if (node && node->type == YAML_SEQUENCE_NODE)
    return get_string_list(p, node, "a step's argv", true, &step->argv);
  static const char *const keys[] = {"argv", "run", NULL};
  if (node && node->type == YAML_SCALAR_NODE)
    return refuse(p, node,
                  "a step is an argv list ([make, test]), argv: [...] or run: \"shell "
                  "line\", not a bare string");
  if (check_mapping(p, node, "a step", keys, "argv or run") < 0)
    return -1;
  yaml_node_t *argv = lookup(p, node, "argv"), *run = lookup(p, node, "run");
  if (!argv == !run)
    return refuse(p, node, "a step has either argv or run, %s", argv ? "not both" : "none here");
  if (argv)
    return get_string_list(p, argv, "argv", true, &step->argv);
  _cleanup_free_ char *line = NULL;
  if (get_string(p, run, "run", &line) < 0)
    return -1;
  step->shell = true;
  step->argv = strv_copy((const char *const[]){PLAN_SHELL, "-c", line, NULL});
  return step->argv ? 0 : no_memory(p);
}

static int parse_stage(struct parser *p, yaml_node_t *node, struct plan_stage *st) {
  static const char *const keys[] = {"name", "sandbox", "steps", NULL};
  st->at = mark_of(node);
  if (check_mapping(p, node, "a stage", keys, "name, sandbox, steps") < 0)
    return -1;
  yaml_node_t *name = lookup(p, node, "name"), *sandbox = lookup(p, node, "sandbox"),
              *steps = lookup(p, node, "steps");
  if (!name)
    return refuse(p, node, "a stage needs a name");
  if (get_string(p, name, "name", &st->name) < 0)
    return -1;
  if (sandbox) {
    st->has_sandbox = true;
    if (parse_sandbox(p, sandbox, st) < 0)
      return -1;
  } else if (!(st->backend = strdup(PLAN_DEFAULT_BACKEND))) {
    return no_memory(p);
  }
  if (!steps)
    return refuse(p, node, "stage %s has no steps", st->name);
  if (steps->type != YAML_SEQUENCE_NODE)
    return refuse(p, steps, "steps must be a list, not %s", type_name(steps));
  size_t n = (size_t)(steps->data.sequence.items.top - steps->data.sequence.items.start);
  if (n == 0)
    return refuse(p, steps, "stage %s has no steps", st->name);
  if (n > PLAN_MAX_STEPS)
    return refuse(p, steps, "stage %s has more than %d steps", st->name, PLAN_MAX_STEPS);
  if (!(st->steps = calloc(n, sizeof(*st->steps))))
    return no_memory(p);
  for (size_t i = 0; i < n; i++, st->n_steps++)
    if (parse_step(p, node_at(p, steps->data.sequence.items.start[i]), &st->steps[i]) < 0) {
      st->n_steps++; /* what it holds is freed with the rest */
      return -1;
    }
  return 0;
}

static int parse_document(struct parser *p, struct plan *plan) {
  yaml_node_t *root = yaml_document_get_root_node(p->doc);
  if (!root || (root->type == YAML_SCALAR_NODE && root->data.scalar.length == 0))
    return refuse(p, root, "the plan is empty: it needs stages:");
  static const char *const keys[] = {"stages", NULL};
  if (check_mapping(p, root, "the plan", keys, "stages") < 0)
    return -1;
  yaml_node_t *stages = lookup(p, root, "stages");
  if (!stages)
    return refuse(p, root, "the plan needs stages:");
  if (stages->type != YAML_SEQUENCE_NODE)
    return refuse(p, stages, "stages must be a list, not %s", type_name(stages));
  size_t n = (size_t)(stages->data.sequence.items.top - stages->data.sequence.items.start);
  if (n == 0)
    return refuse(p, stages, "stages is empty");
  if (n > PLAN_MAX_STAGES)
    return refuse(p, stages, "more than %d stages", PLAN_MAX_STAGES);
  if (!(plan->stages = calloc(n, sizeof(*plan->stages))))
    return no_memory(p);
  for (size_t i = 0; i < n; i++) {
    yaml_node_t *node = node_at(p, stages->data.sequence.items.start[i]);
    plan->n_stages++;
    if (parse_stage(p, node, &plan->stages[i]) < 0)
      return -1;
    for (size_t j = 0; j < i; j++)
      if (!strcmp(plan->stages[j].name, plan->stages[i].name))
        return refuse(p, lookup(p, node, "name"),
                      "stage name '%s' appears twice (first at line %u)", plan->stages[i].name,
                      plan->stages[j].at.line);
  }
  return 0;
}

int plan_parse(const char *file, const char *text, size_t length, struct plan **out,
               struct cordon_error **err) {
  *out = NULL;
  struct plan *plan = calloc(1, sizeof(*plan));
  if (!plan || !(plan->file = strdup(file))) {
    free(plan);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "%s", file);
  }
  yaml_parser_t parser;
  yaml_document_t doc;
  if (!yaml_parser_initialize(&parser)) {
    plan_free(plan);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "%s", file);
  }
  yaml_parser_set_input_string(&parser, (const unsigned char *)text, length);
  int r;
  if (!yaml_parser_load(&parser, &doc)) {
    r = cordon_error_set(err, CORDON_ERR_INVALID, 0, "%s:%zu:%zu: not valid YAML: %s", file,
                         (size_t)parser.problem_mark.line + 1,
                         (size_t)parser.problem_mark.column + 1,
                         parser.problem ? parser.problem : "parse error");
  } else {
    struct parser p = {.file = file, .doc = &doc, .err = err};
    r = parse_document(&p, plan);
    /* One document only: a second one would be silently ignored. */
    yaml_document_t next;
    if (r == 0 && yaml_parser_load(&parser, &next)) {
      yaml_node_t *second = yaml_document_get_root_node(&next);
      if (second)
        r = refuse(&p, second, "a plan is one YAML document; this is a second");
      yaml_document_delete(&next);
    }
    yaml_document_delete(&doc);
  }
  yaml_parser_delete(&parser);
  if (r < 0) {
    plan_free(plan);
    return -1;
  }
  *out = plan;
  return 0;
}

int plan_load(const char *path, struct plan **out, struct cordon_error **err) {
  _cleanup_free_ unsigned char *text = NULL;
  size_t length = 0;
  if (fs_read_file(path, PLAN_MAX_BYTES, &text, &length, err) < 0)
    return cordon_error_prefix(err, "plan %s", path);
  return plan_parse(path, (const char *)text, length, out, err);
}

static void options_clear(struct plan_options *o) {
  free(o->image);
  strv_free(o->read_only);
  strv_free(o->hidden);
  strv_free(o->env);
}

void plan_free(struct plan *p) {
  if (!p)
    return;
  for (size_t i = 0; i < p->n_stages; i++) {
    struct plan_stage *st = &p->stages[i];
    free(st->name);
    free(st->backend);
    options_clear(&st->options);
    for (size_t j = 0; j < st->n_steps; j++)
      strv_free(st->steps[j].argv);
    free(st->steps);
  }
  free(p->stages);
  free(p->file);
  free(p);
}
