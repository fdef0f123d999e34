/* Agent CLI adapters (adapter.h): parsing the embedded data files, the rule for dropping a
 * CLI's own sandbox, and the argv, variables and state directories an adapter adds. Pure:
 * the data is compiled in (adapter-data.c), HOME is handed in; only the last function touches the
 * host (it creates missing state directories). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/adapter.h"
#include "agent/yaml-read.h"
#include "base/cleanup.h"
#include "base/fs.h"
#include "base/strv.h"

void agent_adapter_free(struct agent_adapter *adapter) {
  if (!adapter)
    return;
  free(adapter->name);
  strv_free(adapter->disable_flags);
  strv_free(adapter->state_dirs);
  strv_free(adapter->env);
  free(adapter);
}

static void adapter_freep(struct agent_adapter **adapter) {
  agent_adapter_free(*adapter);
}

static bool is_env_name(const char *s) {
  if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_'))
    return false;
  for (s++; *s; s++)
    if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ||
          *s == '_'))
      return false;
  return true;
}

/* "~/REL" with REL relative, free of empty, "." and ".." components: the grant must stay
 * beneath HOME whatever HOME is. */
static bool is_home_path(const char *s) {
  if (strncmp(s, "~/", 2) || !s[2])
    return false;
  for (const char *c = s + 2; *c;) {
    size_t n = strcspn(c, "/");
    if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
      return false;
    c += n;
    if (*c == '/' && !*++c)
      return false; /* a trailing slash */
  }
  return true;
}

/* Each entry of a list checked by one predicate; bad names the entry. */
static int check_list(char **list, bool (*ok)(const char *), const char *what, const char *key,
                      const char *expected, struct cordon_error **err) {
  for (char **e = list; e && *e; e++)
    if (!ok(*e))
      return cordon_error_set(err, CORDON_ERR_INVALID, 0, "%s: '%s' entry '%s' is not %s", what,
                              key, *e, expected);
  return 0;
}

static bool is_flag(const char *s) {
  return s[0] == '-' && s[1];
}

/* One key of the file into the adapter; an unknown key is refused (the files are ours, so a
 * misspelt key is a bug to catch, never a setting to skip). */
static int read_key(yaml_document_t *doc, const char *key, yaml_node_t *value, const char *what,
                    struct agent_adapter *a, bool *seen_sandbox, struct cordon_error **err) {
  if (!strcmp(key, "name")) {
    const char *name = NULL;
    if (agent_yaml_string(value, what, key, &name, err) < 0)
      return -1;
    if (strcmp(name, a->name))
      return cordon_error_set(err, CORDON_ERR_INVALID, 0, "%s: 'name' is '%s', not '%s'", what,
                              name, a->name);
    return 0;
  }
  if (!strcmp(key, "own_sandbox")) {
    *seen_sandbox = true;
    return agent_yaml_bool(value, what, key, &a->own_sandbox, err);
  }
  char ***list = !strcmp(key, "disable_flags") ? &a->disable_flags
                 : !strcmp(key, "state_dirs")  ? &a->state_dirs
                 : !strcmp(key, "env")         ? &a->env
                                               : NULL;
  if (!list)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                            "%s: unknown key '%s' (accepted: name, own_sandbox, disable_flags, "
                            "state_dirs, env)",
                            what, key);
  strv_free(*list);
  *list = NULL;
  return agent_yaml_string_list(doc, value, what, key, list, err);
}

int agent_adapter_parse(const char *name, const char *text, size_t length,
                        struct agent_adapter **out, struct cordon_error **err) {
  _cleanup_free_ char *what = NULL;
  _cleanup_(adapter_freep) struct agent_adapter *a = calloc(1, sizeof(*a));
  if (!a || !(a->name = strdup(name)) || asprintf(&what, "adapter %s", name) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "adapter %s", name);
  yaml_document_t doc;
  if (agent_yaml_load(text, length, what, &doc, err) < 0)
    return -1;
  yaml_node_t *top = NULL;
  bool seen_sandbox = false;
  int r = agent_yaml_top(&doc, what, &top, err);
  for (yaml_node_pair_t *p = top ? top->data.mapping.pairs.start : NULL;
       r == 0 && p && p < top->data.mapping.pairs.top; p++)
    r = read_key(&doc, (const char *)yaml_document_get_node(&doc, p->key)->data.scalar.value,
                 yaml_document_get_node(&doc, p->value), what, a, &seen_sandbox, err);
  yaml_document_delete(&doc);
  if (r < 0)
    return -1;
  /* own_sandbox decides what the audit says was dropped: it must be said, never assumed. */
  if (!seen_sandbox)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "%s: 'own_sandbox' is missing", what);
  char ***lists[] = {&a->disable_flags, &a->state_dirs, &a->env};
  for (size_t i = 0; i < ARRAY_SIZE(lists); i++)
    if (!*lists[i] && !(*lists[i] = strv_copy(NULL)))
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "%s", what);
  if (check_list(a->disable_flags, is_flag, what, "disable_flags", "a flag (-...)", err) < 0 ||
      check_list(a->state_dirs, is_home_path, what, "state_dirs", "a path ~/... without . or ..",
                 err) < 0 ||
      check_list(a->env, is_env_name, what, "env", "a variable name", err) < 0)
    return -1;
  *out = steal_ptr(&a);
  return 0;
}

const char *agent_adapter_names(void) {
  static char names[256];
  if (!names[0]) {
    size_t at = 0;
    for (size_t i = 0; i < agent_adapter_file_count; i++)
      at += (size_t)snprintf(names + at, sizeof(names) - at, "%s%s", i ? ", " : "",
                             agent_adapter_files[i].name);
  }
  return names;
}

int agent_adapter_load(const char *name, struct agent_adapter **out, struct cordon_error **err) {
  for (size_t i = 0; name && i < agent_adapter_file_count; i++)
    if (!strcmp(name, agent_adapter_files[i].name))
      return agent_adapter_parse(name, agent_adapter_files[i].text, agent_adapter_files[i].length,
                                 out, err);
  return cordon_error_set(err, CORDON_ERR_USAGE, 0, "unknown adapter '%s' (accepted: %s)",
                          name ? name : "", agent_adapter_names());
}

enum cordon_isolation_tier agent_mechanism_tier(enum agent_mechanism_kind kind) {
  switch (kind) {
  case AGENT_MECHANISM_NS:
  case AGENT_MECHANISM_BWRAP:
  case AGENT_MECHANISM_GVISOR: return CORDON_TIER_CONTAINER;
  case AGENT_MECHANISM_LANDLOCK:
  case AGENT_MECHANISM_SEATBELT: return CORDON_TIER_PROCESS;
  default: return CORDON_TIER_NONE;
  }
}

bool agent_adapter_drops_sandbox(const struct agent_adapter *adapter,
                                 enum cordon_isolation_tier confinement,
                                 enum cordon_isolation_tier host) {
  enum cordon_isolation_tier strongest = confinement > host ? confinement : host;
  return adapter && strv_length((const char *const *)adapter->disable_flags) > 0 &&
         strongest >= CORDON_TIER_CONTAINER;
}

static bool has_arg(const char *const *argv, const char *arg) {
  for (size_t i = 1; argv[i]; i++)
    if (!strcmp(argv[i], "--"))
      return false; /* what follows "--" is the CLI's operands, not its flags */
    else if (!strcmp(argv[i], arg))
      return true;
  return false;
}

int agent_adapter_argv(const struct agent_adapter *adapter, const char *const *argv, bool drop,
                       char ***out, struct cordon_error **err) {
  if (!argv || !argv[0])
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "no command to run");
  _cleanup_(strv_freep) char **result = NULL;
  if (strv_push(&result, argv[0]) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "argv");
  for (char **f = drop && adapter ? adapter->disable_flags : NULL; f && *f; f++)
    if (!has_arg(argv, *f) && strv_push(&result, *f) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "argv");
  for (size_t i = 1; argv[i]; i++)
    if (strv_push(&result, argv[i]) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "argv");
  *out = steal_ptr(&result);
  return 0;
}

int agent_adapter_state_dirs(const struct agent_adapter *adapter, const char *home, char ***out,
                             struct cordon_error **err) {
  if (!home || home[0] != '/')
    return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                            "adapter %s: HOME must be an absolute path to place its state "
                            "directories",
                            adapter->name);
  size_t home_length = strlen(home);
  while (home_length > 1 && home[home_length - 1] == '/')
    home_length--;
  _cleanup_(strv_freep) char **dirs = strv_copy(NULL);
  if (!dirs)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "state dirs");
  for (char **d = adapter->state_dirs; d && *d; d++) {
    char *path = NULL;
    /* "~/x" under "/" is "/x", not "//x". */
    if (asprintf(&path, "%.*s/%s", home_length == 1 ? 0 : (int)home_length, home, *d + 2) < 0 ||
        strv_push_take(&dirs, path) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "state dirs");
  }
  *out = steal_ptr(&dirs);
  return 0;
}

/* ---- effects: the state directories on the host ------------------------------------------ */

int agent_adapter_prepare_state_dirs(const struct agent_adapter *adapter, const char *home,
                                     char ***out, struct cordon_error **err) {
  _cleanup_(strv_freep) char **dirs = NULL;
  if (agent_adapter_state_dirs(adapter, home, &dirs, err) < 0)
    return -1;
  _cleanup_(strv_freep) char **canonical = strv_copy(NULL);
  if (!canonical)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "state dirs");
  for (char **d = dirs; *d; d++) {
    if (fs_mkdir_p(*d, 0700, err) < 0)
      return cordon_error_prefix(err, "adapter %s: state directory", adapter->name);
    char *real = realpath(*d, NULL);
    if (!real)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "adapter %s: state directory %s",
                              adapter->name, *d);
    if (strv_push_take(&canonical, real) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "state dirs");
  }
  *out = steal_ptr(&canonical);
  return 0;
}
