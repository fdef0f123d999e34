/* Pipes of our own between a program and the caller's stdio, relayed while it runs.
 *
 * For a program that must never be handed the caller's own fds: runsc changes the owner of the
 * stdio it gives a new sandbox to the sandbox's user (fchown), so the caller's /dev/null, a
 * file its output was redirected to, or a named pipe would change owner on the host. Here the
 * program gets the ends of three pipes made for it, and a thread copies the caller's input into
 * the first and the program's output from the other two to the caller's fds as it comes.
 * Input that the program does not take yet waits in a small buffer, and meanwhile no more is
 * read, so output keeps flowing while the program does not read. A seekable input (a file) is
 * left where the program stopped reading: what the relay read ahead goes back when the program
 * ends. Read-ahead from a pipe or terminal is consumed, as with ssh(1). */
#ifndef CORDON_EXEC_PIPE_RELAY_H
#define CORDON_EXEC_PIPE_RELAY_H

#include <cordon/error.h>

struct exec_pipe_relay;

/* in_fd: the caller's input (-1: none, the program reads end of input at once); out_fd and
 * err_fd: where the program's stdout and stderr go (-1: dropped). The caller keeps its fds. */
int exec_pipe_relay_open(int in_fd, int out_fd, int err_fd, struct exec_pipe_relay **out,
                         struct cordon_error **err);
/* The program's ends, for its fds 0, 1 and 2 (O_CLOEXEC here: dup2 them in the child). */
void exec_pipe_relay_child_fds(const struct exec_pipe_relay *r, int fds[3]);
/* In the parent, once the program is started: close its ends here and start relaying. */
int exec_pipe_relay_start(struct exec_pipe_relay *r, struct cordon_error **err);
/* The program has ended: stop taking input, relay what is left of its output (until every
 * holder of its pipes is gone, or after a quiet while when something that outlived it keeps
 * them open), stop. Idempotent. */
void exec_pipe_relay_finish(struct exec_pipe_relay *r);
/* Finish (when started) and close everything. NULL is fine. */
void exec_pipe_relay_free(struct exec_pipe_relay *r);

#endif
