#include "cli/cli.h"
int cmd_plan(int argc, char **argv) {
  (void)argc, (void)argv;
  return EXIT_USAGE;
}
