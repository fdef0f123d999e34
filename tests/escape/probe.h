/* What the escape probe's files share (probe.c says what the probe is and lists its verbs): the
 * exit codes, the verdict line every verb ends with, and the verbs main() in probe.c calls. Each
 * verb returns its exit code: ESCAPED, BLOCKED or BROKEN. */
#ifndef CORDON_TESTS_ESCAPE_PROBE_H
#define CORDON_TESTS_ESCAPE_PROBE_H

#include <errno.h>
#include <string.h>
#include <sys/types.h>

enum { ESCAPED = 0, BLOCKED = 1, BROKEN = 2 };

/* Print "VERB: ESCAPED|blocked|BROKEN: ..." (one line, flushed) and return code. */
int verdict(int code, const char *verb, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#define BLOCK_ERRNO(verb, what) verdict(BLOCKED, verb, "%s: %s", what, strerror(errno))

/* probe-fs.c: attacks through paths */
int read_file(const char *path);
int list_dir(const char *path);
int write_file(const char *path);
int link_out(const char *target, const char *name);
int write_exe(const char *path);
int do_mknod(const char *path);
int replace_parent(const char *dir, const char *file);
int exchange_parent(const char *dir, const char *file);
int setid(const char *base);
int modes(const char *base);
int big_file(const char *path, long gib);
int fill_file(const char *path, long mib);
int rewrite_file(const char *path, int n_pairs, char **pairs);
int set_xattr(const char *path, const char *name, const char *value);

/* probe-process.c: attacks on processes, kernel interfaces, limits and sockets */
int tiocsti(void);
int do_ptrace(pid_t pid);
int do_signal(pid_t pid);
int see_pid(pid_t pid);
int see_host(void);
int proc_fds(void);
int fd_chdir(void);
int holder_environ(void);
int proc_holder(void);
int kill_holder(void);
int idle_pairs(void);
int kill_all(const char *file);
/* mount, unshare, setns, keyctl, bpf, ...: BROKEN (printing nothing) for any other verb */
int syscalls(const char *verb);
int suid(void);
int tcp_connect(const char *host, const char *port);
int connect_abstract(const char *name);
int dns(const char *server);
int loopback_self(void);
int forkbomb(int n);
int memory(long mib);
int daemonise(const char *file, int seconds);
int sysctl_write(void);
int hijack_holder(int n, char **dirs);
int plant_listener(const char *path, const char *out, int seconds);

#endif
