/* Reading the small YAML files that belong to src/agent (the host isolation config, the adapter
 * data files) through libyaml's document API: one document whose top is a mapping of scalar keys
 * to scalars, booleans or sequences of scalars. Every error names the file (what) and the key,
 * and the line where libyaml knows it. Pure: the text is handed in. */
#ifndef CORDON_AGENT_YAML_READ_H
#define CORDON_AGENT_YAML_READ_H

#include <stdbool.h>
#include <stddef.h>

#include <yaml.h>

#include <cordon/error.h>

/* Parse text as one YAML document into *doc (freed with yaml_document_delete, also on error).
 * An empty text gives a document with no root node. */
int agent_yaml_load(const char *text, size_t length, const char *what, yaml_document_t *doc,
                    struct cordon_error **err);

/* The top mapping, or NULL for an empty document; anything else at the top is refused. A key
 * that is not a scalar, or that appears twice, is refused naming it. */
int agent_yaml_top(yaml_document_t *doc, const char *what, yaml_node_t **out,
                   struct cordon_error **err);

/* The value of a pair as a non-empty string (a plain or quoted scalar). */
int agent_yaml_string(yaml_node_t *value, const char *what, const char *key, const char **out,
                      struct cordon_error **err);
/* The value as a boolean: true/false (YAML 1.2 core spelling) only. */
int agent_yaml_bool(yaml_node_t *value, const char *what, const char *key, bool *out,
                    struct cordon_error **err);
/* The value as a sequence of non-empty strings (an empty sequence is fine); *out is a
 * NULL-terminated vector (strv_free). */
int agent_yaml_string_list(yaml_document_t *doc, yaml_node_t *value, const char *what,
                           const char *key, char ***out, struct cordon_error **err);

#endif
