/* The agent's policy (policy.h): parsing the policy file, the environment allowlist (both pure),
 * and building the one validated struct agent_policy from the flags, the file and the caller's
 * environment. Path rules are confine/policy.c's and paths are resolved by confine/resolve.c, so
 * `cordon agent` and `cordon run` judge a path the same way. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cordon/backend.h>

#include "agent/policy.h"
#include "agent/yaml-read.h"
#include "base/cleanup.h"
#include "base/strv.h"
#include "confine/policy.h"
#include "confine/resolve.h"

void agent_policy_free(struct agent_policy *policy) {
  if (!policy)
    return;
  free(policy->project);
  free(policy->cwd);
  strv_free(policy->read_only);
  strv_free(policy->hidden_dirs);
  strv_free(policy->hidden_files);
  free(policy->agent_visible);
  strv_free(policy->allow_ro);
  strv_free(policy->allow_rw);
  strv_free(policy->env);
  free(policy->net);
  strv_free(policy->allow_domains);
  strv_free(policy->allow_cidrs);
  strv_free(policy->resolve);
  free(policy);
}

void agent_policy_file_clear(struct agent_policy_file *file) {
  strv_free(file->read_only);
  strv_free(file->hidden);
  strv_free(file->allow_ro);
  strv_free(file->allow_rw);
  strv_free(file->env_allow);
  free(file->net);
  strv_free(file->allow_domains);
  strv_free(file->allow_cidrs);
  strv_free(file->resolve);
  memset(file, 0, sizeof(*file));
}

/* ---- the policy file (pure) ---- */

/* The policy file is the caller's input, named on the command line: a fault in it is a usage
 * error (exit 2), where yaml-read.c calls it invalid data (the adapter files are cordon's). */
static int as_usage(struct cordon_error **err) {
  if (err && *err && (*err)->kind == CORDON_ERR_INVALID)
    (*err)->kind = CORDON_ERR_USAGE;
  return -1;
}

/* One key of the file; agent_yaml_top has refused repeated keys already. */
static int parse_entry(yaml_document_t *doc, const char *key, yaml_node_t *value, const char *name,
                       struct agent_policy_file *out, struct cordon_error **err) {
  struct {
    const char *key;
    char ***list;
  } lists[] = {{"read_only", &out->read_only},     {"hidden", &out->hidden},
               {"allow_ro", &out->allow_ro},       {"allow_rw", &out->allow_rw},
               {"env_allow", &out->env_allow},     {"allow_domains", &out->allow_domains},
               {"allow_cidrs", &out->allow_cidrs}, {"resolve", &out->resolve}};
  for (size_t i = 0; i < ARRAY_SIZE(lists); i++) {
    if (strcmp(key, lists[i].key))
      continue;
    /* `key:` with nothing after it reads as an empty list, as a person writing one expects. */
    if (value && value->type == YAML_SCALAR_NODE && value->data.scalar.length == 0 &&
        value->data.scalar.style == YAML_PLAIN_SCALAR_STYLE)
      return (*lists[i].list = strv_copy(NULL))
                 ? 0
                 : cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "%s", name);
    return agent_yaml_string_list(doc, value, name, key, lists[i].list, err);
  }
  if (!strcmp(key, "net")) {
    const char *net = NULL;
    if (agent_yaml_string(value, name, key, &net, err) < 0)
      return -1;
    out->net = strdup(net);
    return out->net ? 0 : cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "%s", name);
  }
  return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                          "%s: unknown key '%s' (known: read_only, hidden, allow_ro, allow_rw, "
                          "env_allow, net, allow_domains, allow_cidrs, resolve)",
                          name, key);
}

int agent_policy_file_parse(const char *text, size_t length, const char *name,
                            struct agent_policy_file *out, struct cordon_error **err) {
  memset(out, 0, sizeof(*out));
  if (length > AGENT_POLICY_FILE_MAX)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "%s: larger than %u bytes", name,
                            AGENT_POLICY_FILE_MAX);
  yaml_document_t doc;
  if (agent_yaml_load(text, length, name, &doc, err) < 0)
    return as_usage(err);
  yaml_node_t *top = NULL;
  int r = agent_yaml_top(&doc, name, &top, err);
  for (yaml_node_pair_t *p = top ? top->data.mapping.pairs.start : NULL;
       r == 0 && p && p < top->data.mapping.pairs.top; p++)
    r = parse_entry(&doc, (const char *)yaml_document_get_node(&doc, p->key)->data.scalar.value,
                    yaml_document_get_node(&doc, p->value), name, out, err);
  yaml_document_delete(&doc);
  if (r < 0) {
    agent_policy_file_clear(out);
    return as_usage(err);
  }
  return 0;
}

/* ---- the environment allowlist (pure) ---- */

bool agent_env_name_allowed(const char *name, size_t length, const char *const *extra) {
  static const char *const exact[] = {"PATH", "HOME", "USER", "LANG", "TERM", "TZ"};
  for (size_t i = 0; i < ARRAY_SIZE(exact); i++)
    if (length == strlen(exact[i]) && !memcmp(name, exact[i], length))
      return true;
  if (length > 3 && !memcmp(name, "LC_", 3))
    return true;
  if (length >= 14 && !memcmp(name, "CORDON_SANDBOX", 14))
    return true;
  for (size_t i = 0; extra && extra[i]; i++)
    if (length == strlen(extra[i]) && !memcmp(name, extra[i], length))
      return true;
  return false;
}

int agent_env_filter(const char *const *environ, const char *const *extra, char ***out,
                     struct cordon_error **err) {
  _cleanup_(strv_freep) char **env = calloc(1, sizeof(char *));
  if (!env)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "environment");
  /* Where temporary files go is the sandbox's private /tmp, whatever the caller's was. */
  static const char *const temp_names[] = {"TMPDIR", "TMP", "TEMP"};
  for (size_t i = 0; environ && environ[i]; i++) {
    const char *eq = strchr(environ[i], '=');
    if (!eq || eq == environ[i])
      continue;
    size_t len = (size_t)(eq - environ[i]);
    bool temp = false;
    for (size_t j = 0; j < ARRAY_SIZE(temp_names); j++)
      temp |= len == strlen(temp_names[j]) && !memcmp(environ[i], temp_names[j], len);
    if (temp || !agent_env_name_allowed(environ[i], len, extra))
      continue;
    if (strv_push(&env, environ[i]) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "environment");
  }
  for (size_t j = 0; j < ARRAY_SIZE(temp_names); j++) {
    char *entry = NULL;
    if (asprintf(&entry, "%s=/tmp", temp_names[j]) < 0 || strv_push_take(&env, entry) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "environment");
  }
  *out = steal_ptr(&env);
  return 0;
}

/* ---- building the policy (reads the file system) ---- */

static int read_policy_file(const char *path, struct agent_policy_file *out,
                            struct cordon_error **err) {
  _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) < 0)
    return cordon_error_set(err, errno == ENOENT ? CORDON_ERR_NOT_FOUND : CORDON_ERR_SYSTEM, errno,
                            "policy file %s", path);
  if (!S_ISREG(st.st_mode) || st.st_size > (off_t)AGENT_POLICY_FILE_MAX)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                            "policy file %s: not a regular file of at most %u bytes", path,
                            AGENT_POLICY_FILE_MAX);
  _cleanup_free_ char *text = malloc((size_t)st.st_size + 1);
  if (!text)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "policy file %s", path);
  size_t got = 0;
  while (got < (size_t)st.st_size) {
    ssize_t n = read(fd, text + got, (size_t)st.st_size - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "policy file %s", path);
    if (n == 0)
      break;
    got += (size_t)n;
  }
  return agent_policy_file_parse(text, got, path, out, err);
}

/* Add the project-relative paths of `given` (flags, then the file's) to `out`, normalised. */
static int add_workspace_paths(const char *const *given, const char *what, char ***out,
                               struct cordon_error **err) {
  for (size_t i = 0; given && given[i]; i++) {
    char *norm = NULL;
    if (confine_normalize_workspace_path(given[i], what, &norm, err) < 0)
      return -1;
    if (strv_push_take(out, norm) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "policy");
  }
  return 0;
}

/* A host path granted to the agent: absolute, existing, canonical, outside the project and
 * outside every .cordon/. */
static int add_host_path(const char *given, const char *what, const char *project, char ***out,
                         struct cordon_error **err) {
  _cleanup_free_ char *norm = NULL;
  if (confine_normalize_host_path(given, what, &norm, err) < 0)
    return -1;
  _cleanup_free_ char *real = realpath(norm, NULL);
  if (!real)
    return cordon_error_set(err, errno == ENOENT ? CORDON_ERR_NOT_FOUND : CORDON_ERR_SYSTEM, errno,
                            "%s %s", what, given);
  if (confine_path_covers(real, project) || confine_path_covers(project, real))
    return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                            "%s %s overlaps the project %s (use --ro for project paths)", what,
                            given, project);
  const char *const none[] = {NULL};
  if (confine_check_not_private(real, what, none, err) < 0)
    return -1;
  for (size_t i = 0; *out && (*out)[i]; i++)
    if (!strcmp((*out)[i], real))
      return 0;
  return strv_push(out, real) < 0 ? cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "policy") : 0;
}

static int add_host_paths(const char *const *given, const char *what, const char *project,
                          char ***out, struct cordon_error **err) {
  for (size_t i = 0; given && given[i]; i++)
    if (add_host_path(given[i], what, project, out, err) < 0)
      return -1;
  return 0;
}

static int add_sandbox_allow(const char *list, const char *project, char ***out,
                             struct cordon_error **err) {
  if (!list || !*list)
    return 0;
  _cleanup_free_ char *copy = strdup(list);
  if (!copy)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "CORDON_SANDBOX_ALLOW");
  char *save = NULL;
  for (char *p = strtok_r(copy, ":", &save); p; p = strtok_r(NULL, ":", &save))
    if (add_host_path(p, "CORDON_SANDBOX_ALLOW entry", project, out, err) < 0)
      return -1;
  return 0;
}

/* Resolve each project path (it must exist, stay in the project and be a file or directory)
 * and sort the hidden ones into directories and files. */
static int resolve_project_paths(int project_fd, struct agent_policy *p, char **read_only,
                                 char **hidden, struct cordon_error **err) {
  for (size_t i = 0; read_only && read_only[i]; i++) {
    struct confine_path rp = {0};
    if (confine_resolve_workspace_path(project_fd, p->project, read_only[i], "read-only path", &rp,
                                       err) < 0)
      return -1;
    int r = strv_push(&p->read_only, rp.path);
    confine_path_clear(&rp);
    if (r < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "policy");
  }
  for (size_t i = 0; hidden && hidden[i]; i++) {
    /* .cordon/ is hidden already; what lies in it needs nothing more. */
    if (confine_path_covers(AGENT_STATE_DIR, hidden[i]))
      continue;
    struct confine_path rp = {0};
    if (confine_resolve_workspace_path(project_fd, p->project, hidden[i], "hidden path", &rp, err) <
        0)
      return -1;
    int r =
        confine_path_covers(AGENT_STATE_DIR, rp.path)
            ? 0
            : strv_push(rp.kind == CONFINE_KIND_DIR ? &p->hidden_dirs : &p->hidden_files, rp.path);
    confine_path_clear(&rp);
    if (r < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "policy");
  }
  _cleanup_(strv_freep) char **all_hidden = strv_copy((const char *const *)p->hidden_dirs);
  for (size_t i = 0; all_hidden && p->hidden_files && p->hidden_files[i]; i++)
    if (strv_push(&all_hidden, p->hidden_files[i]) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "policy");
  if (!all_hidden || (!p->read_only && !(p->read_only = calloc(1, sizeof(char *)))))
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "policy");
  return confine_check_workspace_lists((const char *const *)p->read_only,
                                       (const char *const *)all_hidden, err);
}

/* .cordon/ is always hidden: made when missing (so the mechanisms have a directory to mask,
 * and the agent cannot create one the orchestrator would later trust), never a symlink. Its
 * agent-visible/ is the one part the agent sees, read-only, when it is a real directory. */
static int state_dir(int project_fd, struct agent_policy *p, struct cordon_error **err) {
  if (mkdirat(project_fd, AGENT_STATE_DIR, 0755) < 0 && errno != EEXIST)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "%s/%s", p->project, AGENT_STATE_DIR);
  struct stat st;
  if (fstatat(project_fd, AGENT_STATE_DIR, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
    return cordon_error_set(err, CORDON_ERR_DENIED, 0, "%s/%s is not a directory", p->project,
                            AGENT_STATE_DIR);
  if (strv_push(&p->hidden_dirs, AGENT_STATE_DIR) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "policy");
  if (fstatat(project_fd, AGENT_VISIBLE_DIR, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
      S_ISDIR(st.st_mode) && !(p->agent_visible = strdup(AGENT_VISIBLE_DIR)))
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "policy");
  return 0;
}

static int set_cwd(const struct agent_policy_input *in, struct agent_policy *p,
                   struct cordon_error **err) {
  _cleanup_free_ char *real = in->cwd ? realpath(in->cwd, NULL) : NULL;
  /* Outside the project (or gone), the agent starts at the project's root. */
  const char *cwd = real && confine_path_covers(p->project, real) ? real : p->project;
  if (!(p->cwd = strdup(cwd)))
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "policy");
  return 0;
}

/* One rule list of net restricted: the flags' entries, then the file's. */
static int join_rules(const char *const *flags, char *const *file, char ***out) {
  if (!flags && !file)
    return 0;
  *out = strv_copy(flags);
  for (size_t i = 0; *out && file && file[i]; i++)
    if (strv_push(out, file[i]) < 0)
      return -1;
  return *out ? 0 : -1;
}

static int set_net(const char *net, const struct agent_policy_input *in,
                   const struct agent_policy_file *file, struct agent_policy *p,
                   struct cordon_error **err) {
  if (!net)
    net = "loopback";
  if (strcmp(net, "none") && strcmp(net, "loopback") && strcmp(net, "restricted") &&
      strcmp(net, "open"))
    return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                            "net must be none, loopback, restricted or open, not '%s'", net);
  if (!(p->net = strdup(net)) ||
      join_rules(in->allow_domains, file->allow_domains, &p->allow_domains) < 0 ||
      join_rules(in->allow_cidrs, file->allow_cidrs, &p->allow_cidrs) < 0 ||
      join_rules(in->resolve, file->resolve, &p->resolve) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "policy");
  /* The rules shape restricted and nothing else: with another class they would be ignored. */
  const char *given = p->allow_domains ? "--allow-domain (allow_domains)"
                      : p->allow_cidrs ? "--allow-cidr (allow_cidrs)"
                      : p->resolve     ? "--resolve (resolve)"
                                       : NULL;
  if (given && strcmp(net, "restricted"))
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "%s needs --net restricted (net is %s)",
                            given, net);
  return 0;
}

static int build(const struct agent_policy_input *in, const struct agent_policy_file *file,
                 struct agent_policy *p, struct cordon_error **err) {
  if (!in->project || !(p->project = realpath(in->project, NULL)))
    return cordon_error_set(err, CORDON_ERR_NOT_FOUND, errno, "project %s",
                            in->project ? in->project : "(none)");
  if (confine_check_workspace_dir(p->project, err) < 0)
    return -1;
  _cleanup_close_ int project_fd = open(p->project, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (project_fd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "project %s", p->project);
  _cleanup_(strv_freep) char **read_only = NULL;
  _cleanup_(strv_freep) char **hidden = NULL;
  if (add_workspace_paths(in->read_only, "read-only path", &read_only, err) < 0 ||
      add_workspace_paths((const char *const *)file->read_only, "read-only path", &read_only, err) <
          0 ||
      add_workspace_paths(in->hidden, "hidden path", &hidden, err) < 0 ||
      add_workspace_paths((const char *const *)file->hidden, "hidden path", &hidden, err) < 0)
    return -1;
  for (size_t i = 0; read_only && read_only[i]; i++)
    if (confine_path_covers(AGENT_STATE_DIR, read_only[i]))
      return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                              "read-only path %s lies in %s, which the agent never sees",
                              read_only[i], AGENT_STATE_DIR);
  if (state_dir(project_fd, p, err) < 0 ||
      resolve_project_paths(project_fd, p, read_only, hidden, err) < 0 || set_cwd(in, p, err) < 0)
    return -1;
  if (!(p->allow_ro = calloc(1, sizeof(char *))) || !(p->allow_rw = calloc(1, sizeof(char *))))
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "policy");
  if (add_host_paths(in->allow_ro, "read-only grant", p->project, &p->allow_ro, err) < 0 ||
      add_host_paths((const char *const *)file->allow_ro, "read-only grant", p->project,
                     &p->allow_ro, err) < 0 ||
      add_sandbox_allow(in->sandbox_allow, p->project, &p->allow_ro, err) < 0 ||
      add_host_paths((const char *const *)file->allow_rw, "read-write grant", p->project,
                     &p->allow_rw, err) < 0 ||
      add_host_paths(in->extra_allow_rw, "read-write grant", p->project, &p->allow_rw, err) < 0)
    return -1;
  _cleanup_(strv_freep) char **names = strv_copy(in->env_allow);
  for (size_t i = 0; names && file->env_allow && file->env_allow[i]; i++)
    if (strv_push(&names, file->env_allow[i]) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "policy");
  for (size_t i = 0; names && in->extra_env && in->extra_env[i]; i++)
    if (strv_push(&names, in->extra_env[i]) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "policy");
  if (!names)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "policy");
  if (agent_env_filter(in->environ, (const char *const *)names, &p->env, err) < 0 ||
      set_net(in->net ? in->net : file->net, in, file, p, err) < 0)
    return -1;
  p->tmp_bytes = in->tmp_bytes ? in->tmp_bytes : CORDON_DEFAULT_TMP_BYTES;
  return 0;
}

int agent_policy_build(const struct agent_policy_input *in, struct agent_policy **out,
                       struct cordon_error **err) {
  *out = NULL;
  struct agent_policy_file file = {0};
  if (in->policy_file && read_policy_file(in->policy_file, &file, err) < 0)
    return -1;
  struct agent_policy *p = calloc(1, sizeof(*p));
  if (!p) {
    agent_policy_file_clear(&file);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "policy");
  }
  int r = build(in, &file, p, err);
  agent_policy_file_clear(&file);
  if (r < 0) {
    agent_policy_free(p);
    return -1;
  }
  *out = p;
  return 0;
}
