/* The entry of `cordon serve` (src/cli/cmd-serve.c parses the options and calls server_run,
 * declared for it in cli/cli.h: the two modules sit on one floor and share no header). */
#ifndef CORDON_SERVER_SERVE_H
#define CORDON_SERVER_SERVE_H

#include <stdio.h>

#include <cordon/error.h>

#define SERVE_DEFAULT_SOCKET "serve.sock"
/* A connection idle this long (seconds) is closed; a request being answered (an exec, a
 * stream) is not idle. */
#define SERVE_IDLE_TIMEOUT 600
/* How long the --token-file token lives: a day, then the client asks for a new server. */
#define SERVE_TOKEN_FILE_TTL (24 * 3600)

/* Serve until SIGINT, SIGTERM or SIGHUP. listen ADDR:PORT: TCP with bearer tokens; NULL: a unix
 * socket at socket_path (NULL: .cordon/serve.sock of the project). token_file: write an admin
 * token there at start. The address goes to announce as one line ("cordon serve: listening on
 * unix:PATH" or "... on http://ADDR:PORT"). */
int server_run(const char *listen_spec, const char *socket_path, const char *token_file,
               FILE *announce, struct cordon_error **err);

#endif
