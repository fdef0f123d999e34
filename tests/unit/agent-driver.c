/* A test-only driver of the agent mechanisms, for runs that need a terminal or a shell around
 * them before `cordon agent` exists on this branch:
 *   agent-driver MECHANISM PROJECT [--hide REL]... [--ro REL]... -- ARGV...
 * The policy is built by hand (PATH, TERM and HOME only; the network none; .cordon hidden,
 * .cordon/agent-visible read-only when it exists); its
 * unenforced lines go to stderr; the exit code is the agent's, or 125 when the mechanism
 * refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/mechanism.h"
#include "base/strv.h"

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: agent-driver MECHANISM PROJECT [--hide REL] [--ro REL] -- ARGV\n");
    return 2;
  }
  enum agent_mechanism_kind kind;
  struct cordon_error *err = NULL;
  if (agent_mechanism_parse(argv[1], &kind, &err) < 0 || !agent_mechanism_of(kind)) {
    fprintf(stderr, "agent-driver: %s\n", err ? err->message : "no such mechanism");
    cordon_error_free(err);
    return 2;
  }
  const struct agent_mechanism *m = agent_mechanism_of(kind);
  char *read_only[16] = {0}, *hidden_dirs[16] = {".cordon"}, *hidden_files[16] = {0};
  size_t n_ro = 0, n_dirs = 1, n_files = 0;
  int i = 3;
  for (; i + 1 < argc && strcmp(argv[i], "--") != 0 && n_ro < 15 && n_dirs < 15 && n_files < 15;
       i += 2) {
    char path[4096];
    struct stat st;
    snprintf(path, sizeof(path), "%s/%s", argv[2], argv[i + 1]);
    if (!strcmp(argv[i], "--ro"))
      read_only[n_ro++] = argv[i + 1];
    else if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
      hidden_dirs[n_dirs++] = argv[i + 1];
    else
      hidden_files[n_files++] = argv[i + 1];
  }
  if (i >= argc || strcmp(argv[i], "--") != 0 || i + 1 >= argc) {
    fprintf(stderr, "agent-driver: no -- ARGV\n");
    return 2;
  }
  char term[256];
  snprintf(term, sizeof(term), "TERM=%s", getenv("TERM") ? getenv("TERM") : "dumb");
  char *env[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/nonexistent", term, NULL};
  struct agent_policy policy = {
      .project = argv[2],
      .cwd = argv[2],
      .read_only = read_only,
      .hidden_dirs = hidden_dirs,
      .hidden_files = hidden_files,
      .env = env,
      .net = "none",
      .tmp_bytes = 64 << 20,
  };
  char visible[4096];
  struct stat vst;
  snprintf(visible, sizeof(visible), "%s/%s", argv[2], AGENT_VISIBLE_DIR);
  if (stat(visible, &vst) == 0 && S_ISDIR(vst.st_mode))
    policy.agent_visible = AGENT_VISIBLE_DIR;
  char **lines = NULL;
  if (m->preflight(&policy, &err) < 0 || m->unenforced(&policy, &lines, &err) < 0) {
    fprintf(stderr, "agent-driver: %s\n", err->message);
    cordon_error_free(err);
    return 125;
  }
  for (char **l = lines; l && *l; l++)
    fprintf(stderr, "cordon: %s\n", *l);
  strv_free(lines);
  struct agent_launch launch = {
      .policy = &policy,
      .argv = (const char *const *)&argv[i + 1],
      .tty = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO) && !getenv("AGENT_DRIVER_NO_TTY"),
  };
  int code = 0;
  if (m->run(&launch, &code, &err) < 0) {
    fprintf(stderr, "agent-driver: %s\n", err->message);
    cordon_error_free(err);
    return 125;
  }
  return code;
}
