/* libyaml's document API behind a few calls that refuse what src/agent's files must not hold
 * (yaml-read.h). The files are small and trusted no more than their owner: every value is
 * checked for its type here, so no caller reads a node it did not expect. */
#include <errno.h>
#include <string.h>

#include "agent/yaml-read.h"
#include "base/cleanup.h"
#include "base/strv.h"

int agent_yaml_load(const char *text, size_t length, const char *what, yaml_document_t *doc,
                    struct cordon_error **err) {
  yaml_parser_t parser;
  memset(doc, 0, sizeof(*doc));
  if (!yaml_parser_initialize(&parser))
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "%s", what);
  yaml_parser_set_input_string(&parser, (const unsigned char *)text, length);
  int loaded = yaml_parser_load(&parser, doc);
  int r = 0;
  if (!loaded)
    r = cordon_error_set(err, CORDON_ERR_INVALID, 0, "%s: line %zu: not valid YAML: %s", what,
                         (size_t)parser.problem_mark.line + 1,
                         parser.problem ? parser.problem : "parse error");
  yaml_parser_delete(&parser);
  if (r < 0)
    memset(doc, 0, sizeof(*doc)); /* a failed load leaves nothing to delete */
  return r;
}

/* A scalar's text (libyaml keeps it NUL-terminated), or NULL for any other node. */
static const char *scalar_of(yaml_node_t *node) {
  return node && node->type == YAML_SCALAR_NODE ? (const char *)node->data.scalar.value : NULL;
}

int agent_yaml_top(yaml_document_t *doc, const char *what, yaml_node_t **out,
                   struct cordon_error **err) {
  yaml_node_t *root = yaml_document_get_root_node(doc);
  *out = NULL;
  /* A file holding only comments is a document with an empty plain scalar at the top. */
  if (!root || (root->type == YAML_SCALAR_NODE && root->data.scalar.length == 0))
    return 0;
  if (root->type != YAML_MAPPING_NODE)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "%s: line %zu: expected a mapping of keys",
                            what, (size_t)root->start_mark.line + 1);
  for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top;
       p++) {
    yaml_node_t *key = yaml_document_get_node(doc, p->key);
    const char *name = scalar_of(key);
    if (!name)
      return cordon_error_set(err, CORDON_ERR_INVALID, 0, "%s: line %zu: a key is not a string",
                              what, key ? (size_t)key->start_mark.line + 1 : 0);
    for (yaml_node_pair_t *q = root->data.mapping.pairs.start; q < p; q++) {
      const char *earlier = scalar_of(yaml_document_get_node(doc, q->key));
      if (earlier && !strcmp(earlier, name))
        return cordon_error_set(err, CORDON_ERR_INVALID, 0, "%s: line %zu: key '%s' appears twice",
                                what, (size_t)key->start_mark.line + 1, name);
    }
  }
  *out = root;
  return 0;
}

int agent_yaml_string(yaml_node_t *value, const char *what, const char *key, const char **out,
                      struct cordon_error **err) {
  const char *text = scalar_of(value);
  if (!text || !*text)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                            "%s: line %zu: '%s' must be a non-empty string", what,
                            value ? (size_t)value->start_mark.line + 1 : 0, key);
  if (strlen(text) != value->data.scalar.length)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "%s: '%s' holds a NUL byte", what, key);
  *out = text;
  return 0;
}

int agent_yaml_bool(yaml_node_t *value, const char *what, const char *key, bool *out,
                    struct cordon_error **err) {
  const char *text = scalar_of(value);
  bool plain = value && value->type == YAML_SCALAR_NODE &&
               value->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
  if (plain && !strcmp(text, "true"))
    *out = true;
  else if (plain && !strcmp(text, "false"))
    *out = false;
  else
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "%s: line %zu: '%s' must be true or false",
                            what, value ? (size_t)value->start_mark.line + 1 : 0, key);
  return 0;
}

int agent_yaml_string_list(yaml_document_t *doc, yaml_node_t *value, const char *what,
                           const char *key, char ***out, struct cordon_error **err) {
  if (!value || value->type != YAML_SEQUENCE_NODE)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                            "%s: line %zu: '%s' must be a list of strings", what,
                            value ? (size_t)value->start_mark.line + 1 : 0, key);
  _cleanup_(strv_freep) char **list = strv_copy(NULL);
  if (!list)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "%s", what);
  for (yaml_node_item_t *i = value->data.sequence.items.start; i < value->data.sequence.items.top;
       i++) {
    const char *text = NULL;
    if (agent_yaml_string(yaml_document_get_node(doc, *i), what, key, &text, err) < 0)
      return -1;
    if (strv_push(&list, text) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "%s", what);
  }
  *out = steal_ptr(&list);
  return 0;
}
