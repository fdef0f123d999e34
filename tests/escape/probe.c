/* The escape probe: one verb per attack, run inside a sandbox by tests/escape/escape.sh.
 *
 * Exit status: 0 the attack SUCCEEDED (an escape), 1 it was blocked, 2 the probe could not
 * even attempt it (a broken test, never a pass). Each verb prints one line saying what it did
 * and what the kernel answered. Built static, so it runs in any sandbox root.
 *
 *   probe read-file PATH          open and read one byte
 *   probe list-dir PATH           see any entry in a directory
 *   probe write-file PATH         create/append to a file
 *   probe link-out TARGET NAME    plant a hard link (and a symlink NAME.sym) to TARGET
 *   probe tiocsti                 inject a byte into a terminal (plain and high-bit ioctl)
 *   probe ptrace PID              attach to PID / read its memory (process_vm_readv)
 *   probe signal PID              signal a process by host pid (kill 0 and SIGCONT)
 *   probe see-pid PID             see /proc/PID
 *   probe see-host                scan every visible process for the host's marker
 *   probe proc-fds                find an fd other than 0, 1, 2 in /proc/self/fd
 *   probe fd-chdir                fchdir through any inherited fd
 *   probe write-exe PATH          open a runtime binary (or /proc/1/exe) for writing
 *   probe proc-holder             read the holder's memory, environment or fds (/proc/1); an
 *                                 environment holding only entries of our own tells nothing
 *   probe holder-environ          read an entry of pid 1's or pid 2's environment that we
 *                                 were not given
 *   probe kill-holder             signal pid 1 (SIGKILL, SIGTERM, ...: all must be ignored)
 *   probe idle-pairs              every other process of the session but pid 1 (the holder's
 *                                 idle workers and their waiting command processes, which
 *                                 share their worker's memory until they exec): attach, read
 *                                 their memory (process_vm_readv, /proc/PID/mem), then kill them
 *   probe kill-all FILE           kill(-1) (our own worker dies too, if there is one), then a
 *                                 child outlives the exec and writes FILE after 2 s (it must
 *                                 be killed first)
 *   probe mount | unshare | setns | keyctl | bpf | userfaultfd | io-uring | perf |
 *         open-by-handle | personality | chroot | raw-socket | clone-newuser | clone3
 *   probe suid                    succeed if running with an euid other than our uid
 *   probe mknod PATH              create a character device
 *   probe connect HOST PORT       TCP connect
 *   probe connect-abstract NAME   connect to an abstract unix socket
 *   probe dns SERVER              UDP DNS query (A example.com) to SERVER, wait 2 s
 *   probe loopback-self           listen on 127.0.0.1 and connect to ourselves
 *   probe forkbomb N              fork N sleeping children (success: all N started)
 *   probe memory MIB              allocate and touch MIB mebibytes
 *   probe daemon FILE SECONDS     daemonise (setsid, double fork); write FILE after SECONDS
 *   probe sysctl-write            write /proc/sys/kernel/hostname or sysrq-trigger
 *   probe replace-parent DIR FILE move DIR (a directory above a protected FILE) aside, recreate
 *                                 the path to FILE and write FILE (success: FILE written)
 *   probe exchange-parent DIR FILE build DIR.new with FILE in it, then swap it with DIR
 *                                 (renameat2 RENAME_EXCHANGE; success: the swap happened)
 *   probe setid PATH              leave a set-user-ID or set-group-ID file or directory at
 *                                 PATH.* by every way there is: chmod, fchmod, fchmodat,
 *                                 fchmodat2, chmod through the 32-bit (int 0x80) and x32
 *                                 entry points, open/openat/creat/openat2 with O_CREAT, O_TMPFILE
 *                                 then linkat, mknod/mknodat S_IFREG, and a directory's g+s;
 *                                 and file capabilities (setxattr security.capability)
 *   probe modes PATH              (a control for setid) every ordinary mode still works at
 *                                 PATH.*: create 0600, chmod 0755, mknod S_IFREG 0644, O_TMPFILE
 *                                 then linkat, a directory chmod 01777 (success: all did)
 *   probe big-file PATH GIB       make PATH a sparse file of GIB GiB (the default file size
 *                                 limit must refuse it)
 *   probe fill-file PATH MIB      write MIB mebibytes to PATH (tmpfs pages: no resident set of
 *                                 ours to speak of, so an OOM killer weighs everyone else)
 *   probe hijack-holder DIR...    find unix sockets under each DIR (another session's control
 *                                 socket) and send each a raw ns exec request for `true`;
 *                                 success: one answered 'R' (ran a command in that session)
 *   probe plant-listener PATH OUT SECONDS
 *                                 replace PATH with our own listening socket, take one
 *                                 connection within SECONDS, save what it sent in OUT, answer a
 *                                 forged 'R' and exit 42; success: it sent an exec request
 *   probe rewrite-file PATH OLD NEW [OLD NEW]...
 *                                 replace the first OLD in PATH by NEW, for each pair found (a
 *                                 state file rewritten from inside; escape.sh judges what the
 *                                 host then does)
 *   probe set-xattr PATH NAME VALUE
 *                                 set an extended attribute on PATH, not following a symlink
 *
 * This file holds the verdict every verb ends with and main(), the verb table. The attacks are
 * in probe-fs.c (paths: reading, writing, linking, renaming, set-id bits, big files, state files)
 * and probe-process.c (processes, terminals, /proc, namespaces and other kernel interfaces,
 * resource limits, the network and other sessions' control sockets); probe.h declares them.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "probe.h"

int verdict(int code, const char *verb, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("%s: %s: ", verb, code == ESCAPED ? "ESCAPED" : code == BLOCKED ? "blocked" : "BROKEN");
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  fflush(stdout);
  return code;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc < 2)
    return verdict(BROKEN, "probe", "usage: probe VERB [ARGS]");
  const char *v = argv[1];
  const char *a = argc > 2 ? argv[2] : NULL, *b = argc > 3 ? argv[3] : NULL;
  if (!strcmp(v, "read-file") && a)
    return read_file(a);
  if (!strcmp(v, "list-dir") && a)
    return list_dir(a);
  if (!strcmp(v, "write-file") && a)
    return write_file(a);
  if (!strcmp(v, "link-out") && a && b)
    return link_out(a, b);
  if (!strcmp(v, "tiocsti"))
    return tiocsti();
  if (!strcmp(v, "ptrace") && a)
    return do_ptrace((pid_t)atoi(a));
  if (!strcmp(v, "signal") && a)
    return do_signal((pid_t)atoi(a));
  if (!strcmp(v, "see-pid") && a)
    return see_pid((pid_t)atoi(a));
  if (!strcmp(v, "see-host"))
    return see_host();
  if (!strcmp(v, "proc-fds"))
    return proc_fds();
  if (!strcmp(v, "fd-chdir"))
    return fd_chdir();
  if (!strcmp(v, "write-exe") && a)
    return write_exe(a);
  if (!strcmp(v, "holder-environ"))
    return holder_environ();
  if (!strcmp(v, "proc-holder"))
    return proc_holder();
  if (!strcmp(v, "kill-holder"))
    return kill_holder();
  if (!strcmp(v, "idle-pairs"))
    return idle_pairs();
  if (!strcmp(v, "kill-all") && a)
    return kill_all(a);
  if (!strcmp(v, "suid"))
    return suid();
  if (!strcmp(v, "mknod") && a)
    return do_mknod(a);
  if (!strcmp(v, "connect") && a && b)
    return tcp_connect(a, b);
  if (!strcmp(v, "connect-abstract") && a)
    return connect_abstract(a);
  if (!strcmp(v, "dns") && a)
    return dns(a);
  if (!strcmp(v, "loopback-self"))
    return loopback_self();
  if (!strcmp(v, "forkbomb") && a)
    return forkbomb(atoi(a));
  if (!strcmp(v, "memory") && a)
    return memory(atol(a));
  if (!strcmp(v, "daemon") && a && b)
    return daemonise(a, atoi(b));
  if (!strcmp(v, "sysctl-write"))
    return sysctl_write();
  if (!strcmp(v, "replace-parent") && a && b)
    return replace_parent(a, b);
  if (!strcmp(v, "exchange-parent") && a && b)
    return exchange_parent(a, b);
  if (!strcmp(v, "setid") && a)
    return setid(a);
  if (!strcmp(v, "modes") && a)
    return modes(a);
  if (!strcmp(v, "big-file") && a && b)
    return big_file(a, atol(b));
  if (!strcmp(v, "fill-file") && a && b)
    return fill_file(a, atol(b));
  if (!strcmp(v, "hijack-holder") && a)
    return hijack_holder(argc - 2, argv + 2);
  if (!strcmp(v, "plant-listener") && a && b && argc > 4)
    return plant_listener(a, b, atoi(argv[4]));
  if (!strcmp(v, "rewrite-file") && a && b && argc > 4)
    return rewrite_file(a, argc - 3, argv + 3);
  if (!strcmp(v, "set-xattr") && a && b && argc > 4)
    return set_xattr(a, b, argv[4]);
  int r = syscalls(v);
  if (r != BROKEN)
    return r;
  return verdict(BROKEN, v, "unknown verb or missing arguments");
}
