/* Caller stdio for a runner that can only capture: the command's stdin is read from the
 * caller's fd up front, its output captured (bounded) and copied to the caller's fds once it
 * has ended. The library uses it for backends without CORDON_CAP_CALLER_STDIO (plugins built
 * before the field), and the docker engine exec-API path for itself. No output appears while
 * the command runs, and no terminal can be given (a tty request is refused). */
#ifndef CORDON_EXEC_STDIO_H
#define CORDON_EXEC_STDIO_H

#include <cordon/backend.h>
#include <cordon/error.h>

/* The most stdin read from the caller's fd into memory. */
#define EXEC_STDIO_STDIN_MAX ((size_t)1 << 30)

typedef int (*exec_capture_fn)(void *data, const struct cordon_exec_request *req,
                               struct cordon_exec_result *res, struct cordon_error **err);

/* req->caller_stdio is set. Runs `run_captured` with a capturing copy of req, then writes the
 * captured bytes to req->stdio_fds[1] and [2]; res then holds no output (totals and truncation
 * stay). */
int exec_emulate_caller_stdio(const struct cordon_exec_request *req, exec_capture_fn run_captured,
                              void *data, struct cordon_exec_result *res,
                              struct cordon_error **err);

#endif
