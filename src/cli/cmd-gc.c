/* `cordon gc`: remove what killed cordon processes (or deleted projects) left behind: the ns
 * sessions of a `cordon run` (or race) whose process is gone and the cgroups of ns sessions whose
 * directory is gone (backends/ns/ns.h), and the docker backend's containers whose session is gone
 * (backends/docker/docker.h has the rules). */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "backends/docker/docker.h"
#include "backends/ns/ns.h"
#include "base/cleanup.h"
#include "base/fs.h"
#include "cli/cli.h"
#include "confine/private.h"

int cmd_gc(int argc, char **argv);

static const char gc_usage[] =
    "usage: cordon gc [--dry-run] [--all-projects] [--json]\n"
    "\n"
    "Remove what killed cordon processes and deleted projects left behind:\n"
    "  - in this project, the ns sessions made for one command (`cordon run`, race candidates)\n"
    "    whose cordon process is gone (killed with SIGKILL: nothing could clean up);\n"
    "  - the empty cgroups of ns sessions of any project whose directory was deleted without\n"
    "    `session destroy` (such a sandbox ends by itself within 5 s), and the private\n"
    "    runtime directories (control socket, secret, --env values) of such sessions;\n"
    "  - in this project, the directories of destroyed sessions whose removal, left to a\n"
    "    process of its own as `cordon run` exits, was cut short (.cordon/trash);\n"
    "  - the entries of the registry of projects (in the per-user state directory; every\n"
    "    sandbox hides the .cordon/ of each project it names) whose .cordon/ is gone;\n"
    "  - the Docker containers that cordon made for sessions that no longer exist: the\n"
    "    session's state is gone (a crash between creating the container and recording the\n"
    "    session), or the session belonged to a `cordon run` whose process died (its state is\n"
    "    removed too).\n"
    "Sessions in use, and sessions kept for more than one command, are never touched. Prints\n"
    "one line per session, cgroup or container removed, with the reason.\n"
    "\n"
    "options:\n"
    "  --dry-run        list what would be removed, remove nothing\n"
    "  --all-projects   consider the containers of every project, not only this one's\n"
    "  --json           machine-readable output\n"
    "\n"
    "The Docker engine is the one DOCKER_HOST names (unix:///path; default\n"
    "/var/run/docker.sock); when it is not running, gc says so in one note and checks no\n"
    "containers. Exit codes: 0 ok (also when nothing was found or Docker is not running),\n"
    "1 a removal failed or the engine answered with an error.\n";

int cmd_gc(int argc, char **argv) {
  bool dry_run = false, all_projects = false, json = false;
  static const struct option opts[] = {{"dry-run", no_argument, NULL, 'n'},
                                       {"all-projects", no_argument, NULL, 'a'},
                                       {"json", no_argument, NULL, 'j'},
                                       {"help", no_argument, NULL, 'h'},
                                       {0}};
  int c;
  optind = 0;
  while ((c = cli_getopt(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case 'n': dry_run = true; break;
    case 'a': all_projects = true; break;
    case 'j': json = true; break;
    case 'h': fputs(gc_usage, stdout); return EXIT_OK;
    default: return cli_option_error("gc");
    }
  }
  if (optind < argc)
    return cli_usage_error("gc", "unexpected argument '%s'", argv[optind]);

  struct cordon_error *err = NULL;
  struct cordon_context *ctx = NULL;
  struct cordon_registry *reg = NULL;
  struct ns_gc_entry *sessions = NULL;
  size_t n_sessions = 0;
  struct docker_gc_entry *entries = NULL;
  size_t count = 0;
  if (cordon_context_open(NULL, &ctx, &err) < 0 || cordon_registry_load(&reg, &err) < 0 ||
      ns_gc(ctx, reg, dry_run, &sessions, &n_sessions, &err) < 0) {
    cordon_registry_free(reg);
    cordon_context_free(ctx);
    return cli_fail(err);
  }
  /* What ns removed is reported even when the engine cannot be reached. */
  struct cordon_error *docker_err = NULL;
  docker_gc(ctx, all_projects, dry_run, &entries, &count, &docker_err);
  /* No engine means no containers of ours can be running: nothing to collect, so a host
   * without Docker is not a failure (one note says what was skipped). Other engine errors
   * (a refused call, a malformed answer) still fail. */
  bool docker_absent = docker_err && docker_err->kind == CORDON_ERR_UNAVAILABLE;
  /* Best effort: a stale entry only costs a failed open per sandbox plan. */
  size_t pruned = 0;
  if (!dry_run)
    confine_projects_prune(&pruned, NULL);
  /* The directories of destroyed sessions whose detached removal was cut short
   * (base/remove-detached.h): nothing refers to them any more. Best effort too. */
  _cleanup_free_ char *trash = NULL;
  if (!dry_run && asprintf(&trash, "%s/trash", cordon_context_state_dir(ctx)) >= 0) {
    struct cordon_error *ignored = NULL;
    fs_remove_tree(trash, &ignored);
    cordon_error_free(ignored);
  }
  int code = EXIT_OK;
  json_t *session_list = json_array();
  for (size_t i = 0; i < n_sessions; i++) {
    const struct ns_gc_entry *g = &sessions[i];
    if (g->error)
      code = EXIT_FAILURE_;
    if (json) {
      json_t *o = json_pack("{s:s, s:s, s:b}", "session", g->session, "reason",
                            g->reason ? g->reason : "", "removed", g->removed);
      if (g->error)
        json_object_set_new(o, "error", json_string(g->error));
      json_array_append_new(session_list, o);
    } else if (g->error) {
      cli_error("cannot remove session %s: %s", g->session, g->error);
    } else {
      printf("%s session %s: %s\n", dry_run ? "would remove" : "removed", g->session,
             g->reason ? g->reason : "");
    }
  }
  json_t *list = json_array();
  for (size_t i = 0; i < count; i++) {
    const struct docker_gc_entry *g = &entries[i];
    if (g->error)
      code = EXIT_FAILURE_;
    if (json) {
      json_t *o =
          json_pack("{s:s, s:s, s:s, s:s, s:b}", "container", g->container, "session", g->session,
                    "project", g->project, "reason", g->reason, "removed", g->removed);
      if (g->error)
        json_object_set_new(o, "error", json_string(g->error));
      json_array_append_new(list, o);
    } else if (g->error) {
      cli_error("cannot remove container %s (session %s): %s", g->container, g->session, g->error);
    } else {
      printf("%s container %s (session %s%s%s): %s\n", dry_run ? "would remove" : "removed",
             g->container, g->session, all_projects ? ", project " : "",
             all_projects ? g->project : "", g->reason);
    }
  }
  if (json) {
    json_t *doc = json_pack("{s:o, s:o, s:b, s:I}", "sessions", session_list, "containers", list,
                            "dry_run", dry_run, "registry_entries_removed", (json_int_t)pruned);
    if (docker_err)
      json_object_set_new(doc, "docker_error", json_string(docker_err->message));
    json_object_set_new(doc, "docker_checked", json_boolean(!docker_err));
    json_dumpf(doc, stdout, JSON_INDENT(2));
    putchar('\n');
    json_decref(doc);
  } else {
    json_decref(session_list);
    json_decref(list);
    if (pruned)
      printf("removed %zu registry entries of deleted projects\n", pruned);
    if (count == 0 && n_sessions == 0 && !pruned && (!docker_err || docker_absent))
      printf("nothing to remove\n");
  }
  if (docker_absent) {
    fprintf(stderr, "%s: docker: engine not running, no containers checked\n", cli_program);
    cordon_error_free(docker_err);
  } else if (docker_err) {
    int docker_code = cli_exit_code_for(docker_err);
    if (json)
      cordon_error_free(docker_err);
    else
      cli_fail(docker_err);
    code = docker_code;
  }
  ns_gc_entries_free(sessions, n_sessions);
  docker_gc_entries_free(entries, count);
  cordon_registry_free(reg);
  cordon_context_free(ctx);
  return code;
}
