/* `cordon volume`: the project's persistent volumes (.cordon/volumes/NAME), which `-v` on
 * `run` and `session create` mounts: list them with their sizes, remove those no session
 * uses. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cordon/session.h>
#include <cordon/volume.h>

#include "cli/cli.h"

static const char volume_usage[] =
    "usage: cordon volume list [--json]\n"
    "       cordon volume remove NAME...\n"
    "\n"
    "Persistent volumes of the project: directories in .cordon/volumes/, made the first time\n"
    "`cordon run -v NAME:/PATH` or `cordon session create -v NAME:/PATH` mounts one. They\n"
    "outlive every session and are never part of a workspace snapshot.\n"
    "\n"
    "  list [--json]    name, size in bytes (regular files) and host path of each volume\n"
    "  remove NAME...   remove volumes and their contents; a volume that a session (live,\n"
    "                   not destroyed) mounts is refused, naming the session\n"
    "\n"
    "Exit codes: 0 ok, 1 failed or in use, 2 usage, 3 no such volume.\n";

/* [--json] [--help]; returns -1 after printing help, > 0 an exit code. */
static int parse_flags(const char *verb, int argc, char **argv, bool *json) {
  static const struct option opts[] = {
      {"json", no_argument, NULL, 'j'}, {"help", no_argument, NULL, 'h'}, {0}};
  optind = 0;
  int c;
  while ((c = cli_getopt(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case 'j':
      if (!json)
        return cli_usage_error(verb, "--json is not an option here");
      *json = true;
      break;
    case 'h': fputs(volume_usage, stdout); return -1;
    default: return cli_option_error(verb);
    }
  }
  return 0;
}

static int volume_list(int argc, char **argv) {
  bool json = false;
  int r = parse_flags("volume list", argc, argv, &json);
  if (r)
    return r < 0 ? EXIT_OK : r;
  if (optind < argc)
    return cli_usage_error("volume list", "unexpected argument '%s'", argv[optind]);
  struct cordon_error *err = NULL;
  struct cordon_context *ctx = NULL;
  struct cordon_volume_info *infos = NULL;
  size_t n = 0;
  if (cordon_context_open(NULL, &ctx, &err) < 0 || cordon_volume_list(ctx, &infos, &n, &err) < 0) {
    cordon_context_free(ctx);
    return cli_fail(err);
  }
  if (json) {
    json_t *list = json_array();
    for (size_t i = 0; list && i < n; i++)
      json_array_append_new(list, json_pack("{s:s, s:I, s:s}", "name", infos[i].name, "size",
                                            (json_int_t)infos[i].size, "path", infos[i].path));
    cli_print_json(list);
  } else {
    for (size_t i = 0; i < n; i++)
      printf("%s\t%llu\t%s\n", infos[i].name, (unsigned long long)infos[i].size, infos[i].path);
  }
  cordon_volume_infos_free(infos, n);
  cordon_context_free(ctx);
  return EXIT_OK;
}

static int volume_remove(int argc, char **argv) {
  int r = parse_flags("volume remove", argc, argv, NULL);
  if (r)
    return r < 0 ? EXIT_OK : r;
  if (optind >= argc)
    return cli_usage_error("volume remove", "name at least one volume");
  struct cordon_error *err = NULL;
  struct cordon_context *ctx = NULL;
  if (cordon_context_open(NULL, &ctx, &err) < 0)
    return cli_fail(err);
  int code = EXIT_OK;
  for (int i = optind; i < argc; i++) {
    if (cordon_volume_remove(ctx, argv[i], &err) == 0)
      continue;
    /* In use is a failure of this remove (1), not a refusal of policy. */
    bool in_use = err->kind == CORDON_ERR_DENIED;
    int c = cli_fail(err);
    err = NULL;
    c = in_use ? EXIT_FAILURE_ : c;
    if (code == EXIT_OK)
      code = c;
  }
  cordon_context_free(ctx);
  return code;
}

int cmd_volume(int argc, char **argv) {
  static const struct cli_subverb subs[] = {{"list", volume_list}, {"remove", volume_remove}};
  return CLI_DISPATCH("volume", volume_usage, subs, argc, argv);
}
