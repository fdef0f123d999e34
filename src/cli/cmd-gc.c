/* `cordon gc`: remove what crashed cordon processes left behind. Today that is the docker
 * backend's containers whose session is gone (see backends/docker/docker.h for the rules). */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "backends/docker/docker.h"
#include "cli/cli.h"

int cmd_gc(int argc, char **argv);

static const char gc_usage[] =
    "usage: cordon gc [--dry-run] [--all-projects] [--json]\n"
    "\n"
    "Remove Docker containers that cordon made for sessions that no longer exist: the session's\n"
    "state is gone (a crash between creating the container and recording the session), or the\n"
    "session belonged to a `cordon run` whose process died (its state is removed too). Running\n"
    "sessions are never touched. Prints one line per container removed, with the reason.\n"
    "\n"
    "options:\n"
    "  --dry-run        list what would be removed, remove nothing\n"
    "  --all-projects   consider the containers of every project, not only this one's\n"
    "  --json           machine-readable output\n"
    "\n"
    "The Docker engine is the one DOCKER_HOST names (unix:///path; default\n"
    "/var/run/docker.sock). Exit codes: 0 ok (also when nothing was found), 1 a removal\n"
    "failed, 4 the engine cannot be reached.\n";

int cmd_gc(int argc, char **argv) {
  bool dry_run = false, all_projects = false, json = false;
  static const struct option opts[] = {{"dry-run", no_argument, NULL, 'n'},
                                       {"all-projects", no_argument, NULL, 'a'},
                                       {"json", no_argument, NULL, 'j'},
                                       {"help", no_argument, NULL, 'h'},
                                       {0}};
  int c;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
    switch (c) {
    case 'n': dry_run = true; break;
    case 'a': all_projects = true; break;
    case 'j': json = true; break;
    case 'h': fputs(gc_usage, stdout); return EXIT_OK;
    default: return cli_usage_error("gc", "unknown option '%s'", argv[optind - 1]);
    }
  }
  if (optind < argc)
    return cli_usage_error("gc", "unexpected argument '%s'", argv[optind]);

  struct cordon_error *err = NULL;
  struct cordon_context *ctx = NULL;
  struct docker_gc_entry *entries = NULL;
  size_t count = 0;
  if (cordon_context_open(NULL, &ctx, &err) < 0 ||
      docker_gc(ctx, all_projects, dry_run, &entries, &count, &err) < 0) {
    cordon_context_free(ctx);
    return cli_fail(err);
  }
  int code = EXIT_OK;
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
    json_t *doc = json_pack("{s:o, s:b}", "containers", list, "dry_run", dry_run);
    json_dumpf(doc, stdout, JSON_INDENT(2));
    putchar('\n');
    json_decref(doc);
  } else {
    json_decref(list);
    if (count == 0)
      printf("nothing to remove\n");
  }
  docker_gc_entries_free(entries, count);
  cordon_context_free(ctx);
  return code;
}
