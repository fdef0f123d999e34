/* The qemu monitor (monitor.h): preflight, boot, attach, exec and shutdown of a
 * qemu-system-x86_64 -M microvm guest whose pid 1 is cordon-guest. This file is the host side
 * of the agent's wire (guest-wire.h): one connection to qemu's chardev socket per exec (the
 * chardev takes one client at a time; execs are serialised by a lock in the control dir), a
 * PING/PONG that both proves the agent is there and skips whatever an earlier connection left
 * in the line, then the request, stdin, and output until the agent's status record. The
 * status comes from that record only, never from the VMM. qemu-vmm.c starts the VMM. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backends/microvm/guest-wire.h"
#include "backends/microvm/qemu.h"
#include "base/cleanup.h"
#include "base/fs.h"
#include "base/proc.h"

/* A TCG boot of Debian's generic kernel takes seconds on a loaded machine: a generous bound. */
#define QEMU_BOOT_TIMEOUT_DEFAULT 60.0
/* How long an exec waits for the line (the lock, the connection, the agent's PONG). */
#define QEMU_CONNECT_TIMEOUT 30.0
#define QEMU_PING_INTERVAL 0.5
/* During an exec, once answered: a PING this often says the host is still there. */
#define QEMU_KEEPALIVE_INTERVAL 0.5
/* While the guest boots the PING waits in the socket until the agent opens its port; a PING
 * sent soon after that is answered at once, so the boot wait ends within this of the agent's
 * start (a stale PONG of an earlier PING is skipped by its id). */
#define QEMU_BOOT_PING_INTERVAL 0.05
/* After the command's own timeout, the agent kills its tree; the host waits this long for the
 * record, then sends KILL, then gives up the same time later. */
#define QEMU_EXEC_GRACE 5.0

struct qemu_vm {
  char *control_dir;
  uint32_t next_id;
};

/* ---- preflight ------------------------------------------------------------------------------ */

static int qemu_preflight(const struct microvm_config *cfg, struct microvm_preflight *out,
                          struct cordon_error **err) {
  memset(out, 0, sizeof(*out));
  int r = 0;
  _cleanup_free_ char *binary = qemu_binary_path();
  r = binary ? microvm_preflight_add(out, "binary", NULL)
             : microvm_preflight_add(out, "binary", "no %s in PATH", QEMU_BINARY);
  _cleanup_free_ char *agent = qemu_agent_path();
  if (r == 0)
    r = agent ? microvm_preflight_add(out, "agent", NULL)
              : microvm_preflight_add(out, "agent", "no cordon-guest agent binary (set %s)",
                                      QEMU_GUEST_AGENT_ENV);
  _cleanup_free_ char *guest = qemu_guest_check(qemu_guest_dir(cfg));
  if (r == 0 && !guest)
    r = -ENOMEM;
  if (r == 0)
    r = guest[0] ? microvm_preflight_add(out, "kernel", "%s", guest)
                 : microvm_preflight_add(out, "kernel", NULL);
  _cleanup_free_ char *why = NULL;
  int kvm = microvm_kvm_probe(&why);
  enum microvm_accel accel = cfg ? cfg->accel : MICROVM_ACCEL_AUTO;
  if (r == 0 && accel == MICROVM_ACCEL_KVM)
    /* Asked for KVM: where it does not work that is a refusal, never TCG instead. */
    r = kvm ? microvm_preflight_add(out, "kvm", NULL)
            : microvm_preflight_add(out, "kvm", "KVM was asked for but %s",
                                    why ? why : "is not usable");
  out->accel = accel == MICROVM_ACCEL_AUTO ? (kvm ? MICROVM_ACCEL_KVM : MICROVM_ACCEL_TCG) : accel;
  if (r < 0) {
    microvm_preflight_clear(out);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, -r, "qemu: preflight");
  }
  return 0;
}

/* ---- the line to the agent ----------------------------------------------------------------- */

static double remaining_ms(double deadline) {
  double left = (deadline - fs_now()) * 1000.0;
  return left < 0 ? 0 : left;
}

static int agent_connect(const char *control_dir, struct cordon_error **err) {
  _cleanup_close_ int dirfd = open(control_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dirfd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "qemu: %s", control_dir);
  /* Through the directory's fd: a control dir path may exceed sun_path. */
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/%s", dirfd, QEMU_AGENT_SOCKET);
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "qemu: socket");
  if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
    int e = errno;
    close(s);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "qemu: cannot reach the guest agent");
  }
  return s;
}

static int send_all(int s, const void *data, size_t length, double deadline,
                    struct cordon_error **err) {
  const unsigned char *p = data;
  while (length > 0) {
    ssize_t w = send(s, p, length, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      p += w, length -= (size_t)w;
      continue;
    }
    if (w < 0 && errno != EAGAIN && errno != EINTR)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "qemu: the guest agent hung up");
    struct pollfd pf = {s, POLLOUT, 0};
    if (poll(&pf, 1, (int)remaining_ms(deadline) + 1) == 0 && fs_now() >= deadline)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ETIMEDOUT, "qemu: the guest agent");
  }
  return 0;
}

static int send_frame(int s, enum guest_wire_type type, uint32_t id, const void *data,
                      size_t length, double deadline, struct cordon_error **err) {
  unsigned char h[sizeof(struct guest_wire_header)];
  guest_wire_header_encode(type, id, (uint32_t)length, h);
  if (send_all(s, h, sizeof(h), deadline, err) < 0)
    return -1;
  return length ? send_all(s, data, length, deadline, err) : 0;
}

/* What arrives from the guest, buffered until whole frames. */
struct inbox {
  unsigned char *data;
  size_t length, capacity;
};

/* Read what the socket has (it is readable). 0 at EOF, 1 when bytes came, -1 on error. */
static int inbox_fill(struct inbox *in, int s) {
  size_t want = sizeof(struct guest_wire_header) + GUEST_WIRE_MAX_DATA;
  if (in->capacity - in->length < want) {
    size_t cap = in->length + want * 2;
    unsigned char *grown = realloc(in->data, cap);
    if (!grown)
      return -1;
    in->data = grown, in->capacity = cap;
  }
  ssize_t n = recv(s, in->data + in->length, in->capacity - in->length, MSG_DONTWAIT);
  if (n < 0)
    return errno == EAGAIN || errno == EINTR ? 1 : -1;
  in->length += (size_t)n;
  return n > 0;
}

static void inbox_drop(struct inbox *in, size_t n) {
  memmove(in->data, in->data + n, in->length - n);
  in->length -= n;
}

/* Connect, PING with a fresh id, and wait for its PONG: frames of other ids and bytes that
 * start no frame (left by an earlier connection) are skipped. Returns the socket. */
/* Connect to qemu's chardev, retrying until the deadline (it takes one client at a time). */
static int line_connect(struct qemu_vm *q, double deadline, struct cordon_error **err) {
  for (;;) {
    struct cordon_error *e = NULL;
    int s = agent_connect(q->control_dir, &e);
    if (s >= 0)
      return s;
    if (fs_now() >= deadline) {
      if (err && !*err)
        *err = e;
      else
        cordon_error_free(e);
      return -1;
    }
    cordon_error_free(e);
    usleep(20000);
  }
}

static int line_open(struct qemu_vm *q, uint32_t id, double deadline, double ping_interval,
                     struct inbox *in, struct cordon_error **err) {
  int s = line_connect(q, deadline, err);
  if (s < 0)
    return -1;
  /* PING again now and then: the agent drops a PONG when it believes no host is there, which
   * a connection's stale close event can make it believe for a moment. */
  double next_ping = 0;
  for (;;) {
    if (fs_now() >= next_ping) {
      if (send_frame(s, GUEST_WIRE_PING, id, NULL, 0, deadline, err) < 0)
        goto fail;
      next_ping = fs_now() + ping_interval;
    }
    struct guest_wire_header h;
    int r = guest_wire_parse(GUEST_WIRE_TO_HOST, in->data, in->length, &h, NULL);
    if (r < 0) {
      inbox_drop(in, 1);
      continue;
    }
    if (r == 1) {
      inbox_drop(in, sizeof(h) + h.length);
      if (h.type == GUEST_WIRE_PONG && h.exec_id == id)
        return s;
      continue;
    }
    struct pollfd pf = {s, POLLIN, 0};
    double wait = remaining_ms(deadline < next_ping ? deadline : next_ping);
    int pr = poll(&pf, 1, (int)wait + 1);
    if (pr == 0 && fs_now() >= deadline) {
      cordon_error_set(err, CORDON_ERR_SYSTEM, ETIMEDOUT, "qemu: the guest agent does not answer");
      goto fail;
    }
    if (pr > 0 && inbox_fill(in, s) <= 0) {
      cordon_error_set(err, CORDON_ERR_SYSTEM, ECONNRESET, "qemu: the guest agent hung up");
      goto fail;
    }
  }
fail:
  close(s);
  return -1;
}

/* ---- boot, attach, shutdown ---------------------------------------------------------------- */

static char *state_json(pid_t pid, unsigned long long start, const char *control_dir, bool kvm) {
  json_t *o = json_pack("{s:I, s:I, s:s, s:s}", "pid", (json_int_t)pid, "start", (json_int_t)start,
                        "control_dir", control_dir, "accel", kvm ? "kvm" : "tcg");
  char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
  json_decref(o);
  return text;
}

static int vm_adopt(struct microvm_vm *vm, const char *control_dir, struct cordon_error **err) {
  struct qemu_vm *q = calloc(1, sizeof(*q));
  if (!q || !(q->control_dir = strdup(control_dir))) {
    free(q);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "qemu");
  }
  fs_random_bytes(&q->next_id, sizeof(q->next_id));
  vm->monitor = &microvm_monitor_qemu;
  vm->impl = q;
  return 0;
}

static void qemu_release(struct microvm_vm *vm) {
  struct qemu_vm *q = vm->impl;
  if (q)
    free(q->control_dir);
  free(q);
  vm->impl = NULL;
}

static int vmm_stop(struct microvm_vm *vm) {
  if (vm->vmm_pid > 0 && proc_start_time(vm->vmm_pid) == vm->vmm_start && vm->vmm_start) {
    kill(vm->vmm_pid, SIGKILL);
    /* Our child only when this process booted it (the middle process exited): reap if so,
     * else wait for it to go. */
    for (int i = 0; i < 500 && proc_start_time(vm->vmm_pid) == vm->vmm_start; i++) {
      waitpid(vm->vmm_pid, NULL, WNOHANG);
      usleep(10000);
    }
  }
  vm->vmm_pid = 0;
  vm->vmm_start = 0;
  return 0;
}

static int qemu_shutdown(struct microvm_vm *vm, struct cordon_error **err) {
  return vmm_stop(vm);
}

static int qemu_boot(const struct microvm_config *cfg, struct microvm_vm *vm,
                     struct cordon_error **err) {
  struct microvm_preflight pf;
  if (qemu_preflight(cfg, &pf, err) < 0)
    return -1;
  _cleanup_free_ char *missing = microvm_preflight_describe(&microvm_monitor_qemu, &pf);
  bool kvm = pf.accel == MICROVM_ACCEL_KVM;
  microvm_preflight_clear(&pf);
  if (missing)
    return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0, "%s", missing);
  memset(vm, 0, sizeof(*vm));
  if (vm_adopt(vm, cfg->control_dir, err) < 0)
    return -1;
  double started = fs_now();
  pid_t pid = 0;
  if (qemu_vmm_spawn(cfg, kvm, &pid, err) < 0) {
    qemu_release(vm);
    return -1;
  }
  vm->vmm_pid = pid;
  vm->vmm_start = proc_start_time(pid);
  double bound = cfg->boot_timeout > 0 ? cfg->boot_timeout : QEMU_BOOT_TIMEOUT_DEFAULT;
  struct qemu_vm *q = vm->impl;
  struct inbox in = {0};
  int s = -1;
  /* Until the PONG: each attempt bounded, the VMM's death ends the wait at once. */
  while (s < 0 && fs_now() - started < bound) {
    if (!vm->vmm_start || proc_start_time(pid) != vm->vmm_start)
      break;
    double attempt = fs_now() + 1.0;
    s = line_open(q, q->next_id++, attempt < started + bound ? attempt : started + bound,
                  QEMU_BOOT_PING_INTERVAL, &in, NULL);
  }
  free(in.data);
  if (s < 0) {
    bool died = !vm->vmm_start || proc_start_time(pid) != vm->vmm_start;
    vmm_stop(vm);
    _cleanup_free_ char *tail = qemu_log_tail(cfg->control_dir, QEMU_CONSOLE_LOG, 12);
    _cleanup_free_ char *vmm = qemu_log_tail(cfg->control_dir, QEMU_VMM_LOG, 4);
    cordon_error_set(err, CORDON_ERR_SYSTEM, died ? 0 : ETIMEDOUT,
                     "qemu: the guest %s (console: %s; qemu: %s)",
                     died ? "stopped before its agent answered" : "agent did not answer in time",
                     tail && tail[0] ? tail : "empty", vmm && vmm[0] ? vmm : "nothing");
    qemu_release(vm);
    return -1;
  }
  close(s);
  vm->state = state_json(pid, vm->vmm_start, cfg->control_dir, kvm);
  if (!vm->state) {
    vmm_stop(vm);
    qemu_release(vm);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "qemu: state");
  }
  return 0;
}

static int qemu_attach(const struct microvm_config *cfg, const char *state, struct microvm_vm *vm,
                       struct cordon_error **err) {
  json_error_t je;
  json_t *o = json_loads(state, 0, &je);
  json_int_t pid = 0, start = 0;
  const char *dir = NULL;
  if (!o ||
      json_unpack(o, "{s:I, s:I, s:s}", "pid", &pid, "start", &start, "control_dir", &dir) < 0 ||
      pid <= 0) {
    json_decref(o);
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "qemu: malformed VM state");
  }
  memset(vm, 0, sizeof(*vm));
  int r = vm_adopt(vm, cfg && cfg->control_dir ? cfg->control_dir : dir, err);
  vm->vmm_pid = (pid_t)pid;
  vm->vmm_start = (unsigned long long)start;
  json_decref(o);
  if (r < 0)
    return -1;
  if (proc_start_time(vm->vmm_pid) != vm->vmm_start) {
    qemu_release(vm);
    return cordon_error_set(err, CORDON_ERR_NOT_FOUND, 0, "qemu: the session's VM is gone");
  }
  vm->state = strdup(state);
  return 0;
}

/* ---- exec ---------------------------------------------------------------------------------- */

struct capture {
  unsigned char *data;
  size_t length, max;
  uint64_t total;
  bool truncated;
  int fd; /* caller_stdio: copied here as it arrives; -1: captured */
};

static void capture_add(struct capture *c, const unsigned char *p, size_t n) {
  c->total += n;
  if (c->fd >= 0) {
    fs_write_all(c->fd, p, n);
    return;
  }
  size_t room = c->max > c->length ? c->max - c->length : 0;
  size_t take = n < room ? n : room;
  if (take < n)
    c->truncated = true;
  if (take) {
    memcpy(c->data + c->length, p, take);
    c->length += take;
  }
}

/* The stdin side of an exec: from the caller's fd or buffer, as STDIN frames, then EOF. */
struct feeder {
  int fd;
  const unsigned char *data;
  size_t length, offset;
  bool done;
};

static int feed_some(int s, uint32_t id, struct feeder *f, double deadline,
                     struct cordon_error **err) {
  unsigned char buf[GUEST_WIRE_MAX_DATA];
  size_t n = 0;
  if (f->fd >= 0) {
    ssize_t r = read(f->fd, buf, sizeof(buf));
    if (r < 0 && (errno == EAGAIN || errno == EINTR))
      return 0;
    n = r > 0 ? (size_t)r : 0;
  } else {
    n = f->length - f->offset < sizeof(buf) ? f->length - f->offset : sizeof(buf);
    if (n)
      memcpy(buf, f->data + f->offset, n);
    f->offset += n;
  }
  if (n == 0) {
    f->done = true;
    return send_frame(s, GUEST_WIRE_STDIN_EOF, id, NULL, 0, deadline, err);
  }
  return send_frame(s, GUEST_WIRE_STDIN, id, buf, n, deadline, err);
}

/* A command's result from its status record (parsed: every value in range). Only X, E and T
 * are results; anything else is an error, never an exit code of 0. */
static int result_from_reply(const struct exec_wire_reply *r, bool kill_sent,
                             struct cordon_exec_result *res, struct cordon_error **err) {
  /* The host's KILL goes out only past the command's timeout: what ended it then was that. */
  if (kill_sent && (r->type == EXEC_WIRE_TIMED_OUT ||
                    (r->type == EXEC_WIRE_FAILED && r->a == EXEC_WIRE_STAGE_LOST))) {
    res->timed_out = true;
    res->exit_code = 128 + SIGKILL;
    res->term_signal = SIGKILL;
    return 0;
  }
  switch (r->type) {
  case EXEC_WIRE_EXITED:
    res->exit_code = r->a;
    res->term_signal = r->b;
    break;
  case EXEC_WIRE_EXEC_FAILED:
    res->exit_code = r->a;
    res->exec_failure = r->a;
    break;
  case EXEC_WIRE_TIMED_OUT:
    res->timed_out = true;
    res->exit_code = 128 + SIGKILL;
    res->term_signal = SIGKILL;
    break;
  default:
    return cordon_error_set(err, CORDON_ERR_SYSTEM, EPROTO,
                            "qemu: the guest agent's status record (type 0x%x) is no result",
                            r->type);
  }
  return 0;
}

/* Frames until the REPLY; stdin fed as the line takes it. The PING went out with the request
 * (one round trip less than waiting for its PONG before sending it): until a frame of this
 * exec's id comes, bytes that start no frame (left in the line by an earlier connection) are
 * skipped, the PING is repeated now and then (see line_open), and an agent silent past
 * answer_deadline is an error. Returns 1 with *reply, -1 on error. */
static int exec_pump(int s, uint32_t id, struct inbox *in, struct feeder *f, struct capture *out,
                     struct capture *errc, double timeout, double answer_deadline,
                     struct exec_wire_reply *reply, bool *kill_sent_out,
                     struct cordon_error **err) {
  double start = fs_now();
  double kill_at = timeout > 0 ? start + timeout + QEMU_EXEC_GRACE : 0;
  bool kill_sent = false, answered = false;
  *kill_sent_out = false;
  double next_ping = start + QEMU_PING_INTERVAL;
  for (;;) {
    struct guest_wire_header h;
    int r = guest_wire_parse(GUEST_WIRE_TO_HOST, in->data, in->length, &h, answered ? err : NULL);
    if (r < 0 && !answered) {
      inbox_drop(in, 1);
      continue;
    }
    if (r < 0)
      return cordon_error_prefix(err, "qemu: from the guest agent");
    if (r == 1) {
      const unsigned char *payload = in->data + sizeof(h);
      answered |= h.exec_id == id;
      if (h.exec_id == id && h.type == GUEST_WIRE_STDOUT)
        capture_add(out, payload, h.length);
      else if (h.exec_id == id && h.type == GUEST_WIRE_STDERR)
        capture_add(errc, payload, h.length);
      else if (h.exec_id == id && h.type == GUEST_WIRE_REPLY) {
        int pr = exec_wire_reply_parse(&guest_wire_exec_protocol, payload, h.length, reply, err);
        inbox_drop(in, sizeof(h) + h.length);
        return pr < 0 ? -1 : 1;
      }
      inbox_drop(in, sizeof(h) + h.length);
      continue;
    }
    double now = fs_now();
    if (!answered && now >= answer_deadline)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ETIMEDOUT,
                              "qemu: the guest agent does not answer");
    /* Answered, the PING goes on as a keepalive: bytes from the host tell the agent it is
     * still there when the guest sees the connection's events late (a stale close, an open
     * delayed past HOST_GONE_GRACE in a guest stalled near OOM), where it would otherwise end
     * the command as given up. */
    if (now >= next_ping) {
      if (send_frame(s, GUEST_WIRE_PING, id, NULL, 0,
                     answered ? now + QEMU_EXEC_GRACE : answer_deadline, err) < 0)
        return -1;
      next_ping = now + (answered ? QEMU_KEEPALIVE_INTERVAL : QEMU_PING_INTERVAL);
    }
    if (kill_at > 0 && now >= kill_at && !kill_sent) {
      /* The agent's own timeout should have answered by now: ask it to kill the tree. */
      if (send_frame(s, GUEST_WIRE_KILL, id, NULL, 0, now + QEMU_EXEC_GRACE, err) < 0)
        return -1;
      kill_sent = *kill_sent_out = true;
    }
    if (kill_sent && now >= kill_at + QEMU_EXEC_GRACE)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ETIMEDOUT,
                              "qemu: the guest agent did not end the command after its timeout");
    struct pollfd p[2] = {{s, POLLIN, 0}, {-1, 0, 0}};
    bool feeding = !f->done;
    if (feeding)
      p[1] = f->fd >= 0 ? (struct pollfd){f->fd, POLLIN, 0} : (struct pollfd){s, POLLOUT, 0};
    double wake = kill_at > 0 ? (kill_sent ? kill_at + QEMU_EXEC_GRACE : kill_at) : now + 1.0;
    if (next_ping < wake)
      wake = next_ping;
    if (poll(p, feeding ? 2 : 1, (int)remaining_ms(wake) + 1) < 0 && errno != EINTR)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "qemu: poll");
    if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      int fr = inbox_fill(in, s);
      if (fr < 0)
        return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "qemu: the guest agent's line");
      if (fr == 0)
        return cordon_error_set(err, CORDON_ERR_SYSTEM, ECONNRESET,
                                "qemu: the guest agent hung up before the command's status");
    }
    if (feeding && p[1].revents && feed_some(s, id, f, fs_now() + QEMU_CONNECT_TIMEOUT, err) < 0)
      return -1;
  }
}

/* Execs take turns: qemu's chardev serves one client, and the agent one exec. */
static int lock_line(const char *control_dir, double deadline, struct cordon_error **err) {
  _cleanup_free_ char *path = NULL;
  if (asprintf(&path, "%s/agent.lock", control_dir) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "qemu");
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "qemu: %s", path);
  while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
    if (fs_now() >= deadline) {
      close(fd);
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ETIMEDOUT, "qemu: another exec holds the VM");
    }
    usleep(5000);
  }
  return fd;
}

static char *guest_cwd(const struct microvm_config *cfg, const char *cwd) {
  const char *root = cfg->root && cfg->root[0] == '/' ? cfg->root : MICROVM_DEFAULT_ROOT;
  char *out = NULL;
  if (!cwd || !cwd[0] || strcmp(cwd, ".") == 0)
    return strdup(root);
  if (cwd[0] == '/')
    return strdup(cwd);
  return asprintf(&out, "%s/%s", root, cwd) < 0 ? NULL : out;
}

static int qemu_exec(struct microvm_vm *vm, const struct microvm_config *cfg,
                     const struct cordon_exec_request *req, struct cordon_exec_result *res,
                     struct cordon_error **err) {
  struct qemu_vm *q = vm->impl;
  memset(res, 0, sizeof(*res));
  double start = fs_now();
  _cleanup_free_ char *cwd = guest_cwd(cfg, req->cwd);
  _cleanup_free_ unsigned char *request = NULL, *first = NULL;
  size_t request_length = 0;
  uint32_t timeout_ms = exec_wire_timeout_ms(req->timeout);
  if (!cwd)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "qemu: exec");
  if (exec_wire_encode(&guest_wire_exec_protocol, cwd, req->argv, req->env, timeout_ms, &request,
                       &request_length, err) < 0)
    return -1;
  _cleanup_close_ int lock = lock_line(q->control_dir, start + QEMU_CONNECT_TIMEOUT, err);
  if (lock < 0)
    return -1;
  uint32_t id = q->next_id++;
  struct inbox in = {0};
  size_t max = req->max_output ? req->max_output : CORDON_EXEC_DEFAULT_MAX_OUTPUT;
  struct capture out = {.max = max, .fd = req->caller_stdio ? req->stdio_fds[1] : -1};
  struct capture errc = {.max = max, .fd = req->caller_stdio ? req->stdio_fds[2] : -1};
  struct feeder f = {.fd = req->caller_stdio && req->stdio_fds[0] >= 0 ? req->stdio_fds[0] : -1,
                     .data = req->stdin_data,
                     .length = req->stdin_data ? req->stdin_length : 0};
  struct exec_wire_reply reply = {0};
  bool kill_sent = false;
  int r = -1;
  if ((out.fd < 0 && !(out.data = malloc(max + 1))) ||
      (errc.fd < 0 && !(errc.data = malloc(max + 1)))) {
    cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "qemu: exec output");
    goto done;
  }
  double answer_deadline = start + QEMU_CONNECT_TIMEOUT;
  int s = line_connect(q, answer_deadline, err);
  if (s < 0)
    goto done;
  /* The PING and the request in one write: the agent answers the PING first, and a stale
   * close event it sees meanwhile does not cost the request (see HOST_GONE_GRACE there). */
  size_t header = sizeof(struct guest_wire_header);
  first = malloc(2 * header + request_length);
  if (!first) {
    close(s);
    cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "qemu: exec");
    goto done;
  }
  guest_wire_header_encode(GUEST_WIRE_PING, id, 0, first);
  guest_wire_header_encode(GUEST_WIRE_REQUEST, id, (uint32_t)request_length, first + header);
  memcpy(first + 2 * header, request, request_length);
  if (send_all(s, first, 2 * header + request_length, answer_deadline, err) == 0)
    r = exec_pump(s, id, &in, &f, &out, &errc, req->timeout, answer_deadline, &reply, &kill_sent,
                  err);
  close(s);
  if (r < 0)
    goto done;
  if (reply.type == EXEC_WIRE_FAILED && !(kill_sent && reply.a == EXEC_WIRE_STAGE_LOST)) {
    if (reply.a == EXEC_WIRE_STAGE_CHDIR)
      r = cordon_error_set(err, CORDON_ERR_SYSTEM, reply.b, "cannot run %s in %s", req->argv[0],
                           cwd);
    else if (reply.a != EXEC_WIRE_STAGE_LOST)
      r = cordon_error_set(err, CORDON_ERR_SYSTEM, reply.b, "the guest could not set up %s",
                           req->argv[0]);
    else if (reply.b == ECONNABORTED)
      r = cordon_error_set(err, CORDON_ERR_SYSTEM, 0,
                           "the guest agent ended %s, taking the host for gone: no exit status "
                           "of it exists",
                           req->argv[0]);
    else
      r = cordon_error_set(err, CORDON_ERR_SYSTEM, 0,
                           "no exit status of %s from the guest: its keeper died without one "
                           "(the guest's OOM killer, or a kill from inside)",
                           req->argv[0]);
    goto done;
  }
  r = result_from_reply(&reply, kill_sent, res, err);
done:
  free(in.data);
  if (r < 0) {
    free(out.data);
    free(errc.data);
    return -1;
  }
  if (out.data)
    out.data[out.length] = '\0';
  if (errc.data)
    errc.data[errc.length] = '\0';
  res->stdout_data = out.data, res->stdout_length = out.length;
  res->stdout_total = out.total, res->stdout_truncated = out.truncated;
  res->stderr_data = errc.data, res->stderr_length = errc.length;
  res->stderr_total = errc.total, res->stderr_truncated = errc.truncated;
  res->duration = fs_now() - start;
  return 0;
}

const struct microvm_monitor microvm_monitor_qemu = {
    .name = "qemu",
    .summary = "qemu-system-x86_64 -M microvm (KVM where it works, else TCG); the guest agent "
               "over virtio-serial, the workspace over 9p",
    .preflight = qemu_preflight,
    .boot = qemu_boot,
    .attach = qemu_attach,
    .exec = qemu_exec,
    .shutdown = qemu_shutdown,
    .release = qemu_release,
};
