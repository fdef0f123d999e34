/* The seatbelt profile: the agent's policy in macOS's sandbox profile language (SBPL), for
 * `sandbox-exec -f PROFILE`. It never runs here; it is generated (pure) so the same policy
 * confines the agent on a Mac. The profile allows by default and denies what the policy
 * closes: reads of the trees above the project (the user's home and its neighbours), writes
 * anywhere outside the project, allow_rw and the temporary directories, every access to hidden
 * paths, writes to read-only ones, and the network unless it is open. SBPL's later rules win,
 * so the order of the sections below is part of the policy. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/mechanism.h"
#include "base/cleanup.h"

/* macOS's temporary directories (/tmp and $TMPDIR live there), writable by every program. */
static const char *const temp_trees[] = {"/private/tmp", "/private/var/folders"};
static const char *const writable_devices[] = {"/dev/null", "/dev/zero", "/dev/tty",
                                               "/dev/dtracehelper"};

/* Refuse what a quoted SBPL string cannot hold faithfully: control characters (a newline would
 * end a comment or split a rule). Quotes and backslashes are escaped, not refused. */
static int check_path(const char *path, struct cordon_error **err) {
  for (const unsigned char *c = (const unsigned char *)path; *c; c++)
    if (*c < 0x20 || *c == 0x7f)
      return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                              "seatbelt: the path %s holds a control character", path);
  return 0;
}

/* A string literal of SBPL: "..." with \ and " escaped. */
static void put_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\')
      fputc('\\', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

/* " (KIND "BASE/REL")": REL NULL for BASE itself. */
static void put_filter(FILE *f, const char *kind, const char *base, const char *rel) {
  fprintf(f, "\n  (%s ", kind);
  if (rel) {
    _cleanup_free_ char *joined = NULL;
    if (asprintf(&joined, "%s/%s", base, rel) >= 0)
      put_string(f, joined);
  } else {
    put_string(f, base);
  }
  fputc(')', f);
}

/* Each path of list, beneath base (project-relative paths) or as it is (base NULL). */
static void put_filters(FILE *f, const char *kind, const char *base, char *const *list) {
  for (; list && *list; list++)
    put_filter(f, kind, base ? base : *list, base ? *list : NULL);
}

static void put_writes(FILE *f, const struct agent_policy *policy) {
  fputs("\n;; Writes: only the project, allow_rw, the temporary trees and harmless devices.\n"
        "(deny file-write*)\n(allow file-write*",
        f);
  put_filter(f, "subpath", policy->project, NULL);
  put_filters(f, "subpath", NULL, policy->allow_rw);
  for (size_t i = 0; i < ARRAY_SIZE(temp_trees); i++)
    put_filter(f, "subpath", temp_trees[i], NULL);
  for (size_t i = 0; i < ARRAY_SIZE(writable_devices); i++)
    put_filter(f, "literal", writable_devices[i], NULL);
  fputs(")\n", f);
}

/* The project's ancestors below "/" (for /Users/me/p: /Users and /Users/me): their trees are
 * closed for reading, their own entries stay visible so lookups and getcwd work. */
static void put_reads(FILE *f, const struct agent_policy *policy) {
  fputs("\n;; Reads: the trees above the project are closed, except what the policy grants.\n", f);
  _cleanup_free_ char *ancestor = strdup(policy->project);
  if (!ancestor)
    return;
  char *slash = ancestor;
  size_t denied = 0;
  _cleanup_free_ char *literals = NULL;
  size_t literals_len = 0;
  FILE *lit = open_memstream(&literals, &literals_len);
  while (lit && (slash = strchr(slash + 1, '/'))) {
    *slash = '\0';
    fputs(denied++ ? "" : "(deny file-read*", f);
    put_filter(f, "subpath", ancestor, NULL);
    put_filter(lit, "literal", ancestor, NULL);
    *slash = '/';
  }
  if (lit)
    fclose(lit);
  if (denied)
    fprintf(f, ")\n(allow file-read-metadata%s)\n", literals ? literals : "");
  fputs("(allow file-read*", f);
  put_filter(f, "subpath", policy->project, NULL);
  put_filters(f, "subpath", NULL, policy->allow_ro);
  put_filters(f, "subpath", NULL, policy->allow_rw);
  for (size_t i = 0; i < ARRAY_SIZE(temp_trees); i++)
    put_filter(f, "subpath", temp_trees[i], NULL);
  fputs(")\n", f);
}

static void put_project_paths(FILE *f, const struct agent_policy *policy) {
  fputs("\n;; Hidden paths: neither read nor written (.cordon/ is cordon's state).\n"
        "(deny file-read* file-write*",
        f);
  put_filters(f, "subpath", policy->project, policy->hidden_dirs);
  put_filters(f, "literal", policy->project, policy->hidden_files);
  fputs(")\n", f);
  if (policy->read_only && policy->read_only[0]) {
    fputs("\n;; Read-only paths.\n(deny file-write*", f);
    put_filters(f, "subpath", policy->project, policy->read_only);
    fputs(")\n", f);
  }
  if (policy->agent_visible) {
    fputs("\n;; Documents the orchestrator leaves for the agent: readable, never written.\n"
          "(allow file-read*",
          f);
    put_filter(f, "subpath", policy->project, policy->agent_visible);
    fputs(")\n", f);
  }
}

static void put_network(FILE *f, const char *net) {
  if (net && !strcmp(net, "open"))
    return;
  fputs("\n;; Network.\n(deny network*)\n", f);
  if (net && !strcmp(net, "loopback"))
    fputs("(allow network* (remote ip \"localhost:*\"))\n"
          "(allow network* (local ip \"localhost:*\"))\n",
          f);
}

static int check_policy_paths(const struct agent_policy *policy, struct cordon_error **err) {
  if (!policy->project || policy->project[0] != '/')
    return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                            "seatbelt: the project must be an absolute path");
  char *const *lists[] = {policy->read_only, policy->hidden_dirs, policy->hidden_files,
                          policy->allow_ro, policy->allow_rw};
  if (check_path(policy->project, err) < 0 ||
      (policy->agent_visible && check_path(policy->agent_visible, err) < 0))
    return -1;
  for (size_t i = 0; i < ARRAY_SIZE(lists); i++)
    for (char *const *p = lists[i]; p && *p; p++)
      if (check_path(*p, err) < 0)
        return -1;
  return 0;
}

int agent_seatbelt_profile(const struct agent_policy *policy, char **out,
                           struct cordon_error **err) {
  if (check_policy_paths(policy, err) < 0)
    return -1;
  char *text = NULL;
  size_t length = 0;
  FILE *f = open_memstream(&text, &length);
  if (!f)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "seatbelt: the profile");
  fputs("(version 1)\n;; cordon agent: the agent's policy for sandbox-exec (generated).\n"
        "(allow default)\n",
        f);
  put_writes(f, policy);
  put_reads(f, policy);
  put_project_paths(f, policy);
  put_network(f, policy->net);
  if (fclose(f) != 0 || !text) {
    free(text);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "seatbelt: the profile");
  }
  *out = text;
  return 0;
}
