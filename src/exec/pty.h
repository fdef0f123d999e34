/* A pseudo-terminal for a command, relayed to the caller's own fds (`cordon run -t`).
 *
 * The caller opens the pty here, hands the slave to the command as its fds 0-2 (the command
 * makes it its controlling terminal), and relays: bytes from in_fd go to the master, the
 * master's output goes to out_fd, on a thread of its own while the caller waits for the
 * command. When in_fd is a terminal it is put in raw mode for the relay (so Ctrl-C, Ctrl-Z
 * travel as bytes to the command's terminal, whose line discipline signals the command's
 * foreground group) and restored by exec_pty_finish/exec_pty_free. The window size is copied
 * from the caller's terminal at open and on every exec_pty_resize. Nothing here is specific to
 * the CLI: a server can relay a socket the same way. */
#ifndef CORDON_EXEC_PTY_H
#define CORDON_EXEC_PTY_H

#include <cordon/error.h>

struct exec_pty;

/* in_fd: what the user types (-1: nothing; the command reads from its terminal only what it
 * gets otherwise); out_fd: where the command's terminal output goes; size_fd: a terminal
 * whose window size the pty follows (-1: none). */
int exec_pty_open(int in_fd, int out_fd, int size_fd, struct exec_pty **out,
                  struct cordon_error **err);
/* The slave, for the command's fds 0-2 (owned by the pty; closed by exec_pty_finish). */
int exec_pty_slave(const struct exec_pty *p);
/* Start relaying; in_fd goes raw when it is a terminal. */
int exec_pty_start(struct exec_pty *p, struct cordon_error **err);
/* Copy the window size again. Async-signal-safe (it only wakes the relay): for SIGWINCH. */
void exec_pty_resize(struct exec_pty *p);
/* The command has ended: relay what is left of its output, stop the relay, restore in_fd's
 * terminal. Idempotent. */
void exec_pty_finish(struct exec_pty *p);
/* Finish (when started) and close everything. NULL is fine. */
void exec_pty_free(struct exec_pty *p);

#endif
