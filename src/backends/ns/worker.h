/* Private to the ns holder (holder.c) and its workers (worker.c): what the holder's pid 1 and the
 * one-shot share with the worker half, which serves execs one after the other, starts their
 * command processes in its own memory and keeps the count of idle pairs with the holder. */
#ifndef CORDON_NS_WORKER_H
#define CORDON_NS_WORKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "backends/ns/config.h"

/* The functions that run on stacks of our own (the one-shot's pid 1 and command, the holder's
 * command processes) are not instrumented by ASan: it would take their _exit for a jump off an
 * unknown stack and warn on stderr, which is the command's. */
#define ON_OWN_STACK __attribute__((no_sanitize_address))

/* Stacks for those functions: mmap'd, and under ASan unpoisoned when mapped and unmapped. A
 * process that ends (execve, _exit) inside instrumented code leaves its frames poisoned in the
 * shadow, which survives munmap: a later stack at the same address (in this process, or in a
 * holder or worker forked from it) would trip over the stale poison. */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define STACK_UNPOISON(p, size) ASAN_UNPOISON_MEMORY_REGION(p, size)
#else
#define STACK_UNPOISON(p, size) ((void)(p), (void)(size))
#endif

/* How long a worker (or the holder, after a worker's death) waits for a killed tree to go away
 * before giving up on stragglers. */
#define KILL_WAIT_SECONDS 2.0

/* What a worker tells the holder over the busy pipe (8 bytes: one atomic write). */
enum worker_event {
  WORKER_CLAIMED = 1, /* a client's command runs: one idle pair less */
  WORKER_REARMED,     /* that exec is over and a new command process waits: idle again */
  WORKER_DONE,        /* that exec is over and the worker exits: make a new pair */
  WORKER_KEPT,        /* that exec is over but left processes running (a background job, a
                         daemon): the worker stays only as their subreaper, until they end */
};
struct worker_note {
  int32_t pid;
  int32_t event;
};

/* Idle pairs the holder keeps once an exec has run (see struct holder). */
#define IDLE_TARGET 2

/* A stack of `size` bytes for ON_OWN_STACK code (the workers and holder.c). */
void *ns_stack_map(size_t size);
void ns_stack_unmap(void *p, size_t size);
/* Replace our command line with `title` (the workers and holder.c). */
void ns_set_title(const char *title);

/* Try execve on each PATH entry of envp, like execvp; returns the errno to report. */
int ns_exec_search(const char *name, char *const *argv, char *const *envp);
/* A command process joins the v1 memory cgroup itself (cfg->memory_join_fd). Async-signal-safe. */
int ns_join_memory_cgroup(const struct ns_holder_config *cfg);
/* Our children, from /proc (the holder and the workers are subreapers). */
size_t ns_list_children(pid_t *out, size_t max);
/* One idle pair less in the count shared by the holder and its workers (NULL: no count). */
void ns_idle_slot_drop(int *idle_pairs);
/* A worker's life, forked by the holder: serve execs, tell the holder over busy_fd. */
_Noreturn void ns_worker_main(const struct ns_holder_config *cfg, int busy_fd, int *idle_pairs);

#endif
