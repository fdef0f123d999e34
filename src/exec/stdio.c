/* Emulated caller stdio (see stdio.h): read stdin first, capture, copy afterwards. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "exec/stdio.h"

/* Hand the captured bytes to fd and leave an empty (NUL-terminated) buffer in their place, so
 * that no caller prints them a second time. */
static int deliver(int fd, unsigned char *data, size_t *length) {
  if (!data)
    return 0;
  int r = *length ? fs_write_all(fd, data, *length) : 0;
  data[0] = '\0';
  *length = 0;
  return r;
}

int exec_emulate_caller_stdio(const struct cordon_exec_request *req, exec_capture_fn run_captured,
                              void *data, struct cordon_exec_result *res,
                              struct cordon_error **err) {
  memset(res, 0, sizeof(*res));
  if (req->tty)
    return cordon_error_set(err, CORDON_ERR_UNSUPPORTED, 0,
                            "this backend cannot give the command a terminal (-t)");
  struct cordon_exec_request captured = *req;
  captured.caller_stdio = false;
  captured.tty = false;
  captured.stdio_fds[0] = captured.stdio_fds[1] = captured.stdio_fds[2] = 0;
  _cleanup_free_ unsigned char *input = NULL;
  if (req->stdio_fds[0] >= 0) {
    size_t length = 0;
    if (fs_read_fd(req->stdio_fds[0], EXEC_STDIO_STDIN_MAX, &input, &length, err) < 0)
      return cordon_error_prefix(err, "the command's standard input");
    captured.stdin_data = input ? (const void *)input : "";
    captured.stdin_length = length;
  }
  if (run_captured(data, &captured, res, err) < 0)
    return -1;
  if (deliver(req->stdio_fds[1], res->stdout_data, &res->stdout_length) < 0 ||
      deliver(req->stdio_fds[2], res->stderr_data, &res->stderr_length) < 0) {
    int e = errno;
    cordon_exec_result_clear(res);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "cannot write the command's output");
  }
  return 0;
}
