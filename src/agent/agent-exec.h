/* What the landlock and gvisor mechanisms share to start a program and wait for it: finding a
 * program on the agent's own PATH (not cordon's: the agent must run what its environment
 * names), and turning a wait status into the exit code `cordon agent` returns. */
#ifndef CORDON_AGENT_AGENT_EXEC_H
#define CORDON_AGENT_AGENT_EXEC_H

#include <sys/types.h>

#include <cordon/error.h>

/* name itself when it holds a '/', else the first executable regular file NAME in the
 * colon-separated search_path (NULL: "/usr/local/bin:/usr/bin:/bin"); CORDON_ERR_NOT_FOUND
 * naming it when there is none. *out is malloc'd. */
int agent_exec_resolve(const char *name, const char *search_path, char **out,
                       struct cordon_error **err);

/* Wait for pid (retrying EINTR) while SIGINT and SIGQUIT are ignored here: a Ctrl-C at the
 * terminal reaches the agent, which decides; cordon outlives it to clean up. *exit_code is
 * the exit status, or 128+signal. */
int agent_exec_wait(pid_t pid, int *exit_code, struct cordon_error **err);

#endif
