/* How `cordon run` and `cordon session exec` connect a command to cordon's own stdio: without
 * --json the command writes straight to cordon's stdout and stderr (streaming, no size cap),
 * reads cordon's stdin under -i, and gets a pseudo-terminal under -t (relayed by exec/pty.c,
 * the window size following cordon's terminal on SIGWINCH). With --json the output is captured
 * as before; -i then feeds cordon's stdin like `--stdin -`, and -t is refused. */
#ifndef CORDON_CLI_STREAM_H
#define CORDON_CLI_STREAM_H

#include <stdbool.h>

#include <cordon/cordon.h>

#define STREAM_SHORT_OPTIONS "it"
#define STREAM_OPTIONS                       \
  {"interactive", no_argument, NULL, 'i'}, { \
    "tty", no_argument, NULL, 't'            \
  }
#define STREAM_HELP                                                                         \
  "  -i, --interactive     the command reads cordon's stdin (default: /dev/null)\n"         \
  "  -t, --tty             give the command a pseudo-terminal (TERM and the window size\n"  \
  "                        passed on; given even when cordon's stdin is no terminal, as\n"  \
  "                        docker does); -it for a shell: cordon's terminal goes raw and\n" \
  "                        Ctrl-C reaches the command\n"                                    \
  "  Without --json the command's output streams to cordon's stdout and stderr as it is\n"  \
  "  written, with no size cap; --json captures it (16 MiB per stream) into the result.\n"

struct cli_stream {
  bool interactive, tty, json;
  const char *stdin_file; /* --stdin */
  char **env;             /* the request's environment, TERM added under -t (owned) */
  struct exec_pty *pty;
};

/* Check the flags together (a usage error message on failure, returns -1). Under --json, -i
 * becomes `--stdin -`: *stdin_file is updated. */
int cli_stream_check(struct cli_stream *st, const char *verb, const char **stdin_file);
/* Set req's stdio for streaming (nothing under --json) and its environment from env (TERM
 * added under -t); opens the pty. */
int cli_stream_prepare(struct cli_stream *st, const char *const *env,
                       struct cordon_exec_request *req, struct cordon_error **err);
/* Start relaying the pty (raw mode, SIGWINCH): right before the exec. */
int cli_stream_start(struct cli_stream *st, struct cordon_error **err);
/* After the exec (whatever happened): stop relaying, restore cordon's terminal, free. */
void cli_stream_end(struct cli_stream *st);

#endif
