/* `cordon serve`: the options; the server itself is src/server/ (server_run). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"

static const char serve_usage[] =
    "usage: cordon serve [--listen ADDR:PORT | --socket PATH] [--token-file FILE]\n"
    "\n"
    "Serve the HTTP API (docs/api.md) over the library: sessions, exec (also streamed),\n"
    "files, snapshots, receipt and audit verification, /metrics (Prometheus), the install\n"
    "key's JWKS (/.well-known/jwks.json) and /healthz. Prints one line with the address,\n"
    "then serves until SIGINT, SIGTERM or SIGHUP.\n"
    "\n"
    "  --socket PATH       a unix socket (default: .cordon/serve.sock of the project), mode\n"
    "                      0600, answering only its owner's uid (SO_PEERCRED); no token\n"
    "  --listen ADDR:PORT  TCP instead (port 0: a free one, printed): every route but\n"
    "                      /healthz and the JWKS needs 'Authorization: Bearer TOKEN', a token\n"
    "                      of 'cordon token create' (the install key is made if missing)\n"
    "  --token-file FILE   write an admin token (valid 24 hours) to FILE (0600) at start,\n"
    "                      for the client that started the server\n"
    "\n"
    "/metrics counts what the project's event log records from the server's start on: every\n"
    "create, destroy and exec, the server's and the CLI's, each once.\n"
    "Request bodies are bounded at 64 MiB. Exit codes: 0 stopped by a signal, 1 failed,\n"
    "2 usage, 4 unavailable (another server answers on the socket).\n";

int cmd_serve(int argc, char **argv) {
  enum { OPT_LISTEN = 1, OPT_SOCKET, OPT_TOKEN_FILE };
  static const struct option opts[] = {{"listen", required_argument, NULL, OPT_LISTEN},
                                       {"socket", required_argument, NULL, OPT_SOCKET},
                                       {"token-file", required_argument, NULL, OPT_TOKEN_FILE},
                                       {"help", no_argument, NULL, 'h'},
                                       {0}};
  const char *listen_spec = NULL, *socket_path = NULL, *token_file = NULL;
  int c;
  optind = 0;
  while ((c = cli_getopt(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case OPT_LISTEN: listen_spec = optarg; break;
    case OPT_SOCKET: socket_path = optarg; break;
    case OPT_TOKEN_FILE: token_file = optarg; break;
    case 'h': fputs(serve_usage, stdout); return EXIT_OK;
    default: return cli_option_error("serve");
    }
  }
  if (optind < argc)
    return cli_usage_error("serve", "unexpected argument '%s'", argv[optind]);
  if (listen_spec && socket_path)
    return cli_usage_error("serve", "--listen and --socket exclude each other");
  struct cordon_error *err = NULL;
  /* Tokens are checked against the install key: a TCP server needs one. */
  if ((listen_spec || token_file) && cli_ensure_install_key(&err) < 0)
    return cli_fail(err);
  if (server_run(listen_spec, socket_path, token_file, stdout, &err) < 0)
    return cli_fail(err);
  return EXIT_OK;
}
