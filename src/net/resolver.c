/* getaddrinfo worker threads (resolver.h). */
#include "net/resolver.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct job {
  uint32_t slot, generation;
  char host[256];
};

struct net_resolver {
  pthread_mutex_t lock;
  pthread_cond_t wake;
  struct job *queue;
  unsigned capacity, head, count;
  bool stopping;
  int results[2]; /* [0] read by the loop (non-blocking), [1] written by workers */
  pthread_t *workers;
  unsigned worker_count;
};

static void resolve(const struct job *job, struct net_resolution *out) {
  memset(out, 0, sizeof *out);
  out->slot = job->slot;
  out->generation = job->generation;
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
  struct addrinfo *list = NULL;
  out->error = getaddrinfo(job->host, NULL, &hints, &list);
  if (out->error)
    return;
  for (struct addrinfo *a = list; a && out->count < NET_RESOLVE_MAX; a = a->ai_next)
    if (net_addr_from_sockaddr(a->ai_addr, &out->addresses[out->count]))
      out->count++;
  freeaddrinfo(list);
  if (out->count == 0)
    out->error = EAI_NONAME;
}

static void *worker(void *arg) {
  struct net_resolver *r = arg;
  for (;;) {
    pthread_mutex_lock(&r->lock);
    while (!r->stopping && r->count == 0)
      pthread_cond_wait(&r->wake, &r->lock);
    if (r->stopping) {
      pthread_mutex_unlock(&r->lock);
      return NULL;
    }
    struct job job = r->queue[r->head];
    r->head = (r->head + 1) % r->capacity;
    r->count--;
    pthread_mutex_unlock(&r->lock);
    struct net_resolution result;
    resolve(&job, &result);
    /* Blocking write of one record under PIPE_BUF: atomic, and the loop drains the pipe. */
    while (write(r->results[1], &result, sizeof result) < 0 && errno == EINTR)
      ;
  }
}

int net_resolver_start(unsigned workers, unsigned queue, struct net_resolver **out) {
  _Static_assert(sizeof(struct net_resolution) <= 4096, "a result must fit PIPE_BUF");
  *out = NULL;
  struct net_resolver *r = calloc(1, sizeof *r);
  if (!r)
    return -1;
  r->results[0] = r->results[1] = -1;
  r->capacity = queue ? queue : 1;
  r->queue = calloc(r->capacity, sizeof *r->queue);
  r->workers = calloc(workers ? workers : 1, sizeof *r->workers);
  pthread_mutex_init(&r->lock, NULL);
  pthread_cond_init(&r->wake, NULL);
  if (!r->queue || !r->workers || pipe2(r->results, O_CLOEXEC) < 0 ||
      fcntl(r->results[0], F_SETFL, O_NONBLOCK) < 0) {
    net_resolver_stop(r);
    return -1;
  }
  for (unsigned i = 0; i < (workers ? workers : 1); i++) {
    int e = pthread_create(&r->workers[i], NULL, worker, r);
    if (e) {
      net_resolver_stop(r);
      errno = e;
      return -1;
    }
    r->worker_count++;
  }
  *out = r;
  return 0;
}

int net_resolver_fd(const struct net_resolver *resolver) {
  return resolver->results[0];
}

int net_resolver_submit(struct net_resolver *r, uint32_t slot, uint32_t generation,
                        const char *host) {
  pthread_mutex_lock(&r->lock);
  if (r->count == r->capacity) {
    pthread_mutex_unlock(&r->lock);
    return -1;
  }
  struct job *job = &r->queue[(r->head + r->count) % r->capacity];
  job->slot = slot;
  job->generation = generation;
  snprintf(job->host, sizeof job->host, "%s", host);
  r->count++;
  pthread_cond_signal(&r->wake);
  pthread_mutex_unlock(&r->lock);
  return 0;
}

int net_resolver_take(struct net_resolver *r, struct net_resolution *out) {
  ssize_t n = read(r->results[0], out, sizeof *out);
  return n == (ssize_t)sizeof *out ? 1 : 0;
}

void net_resolver_stop(struct net_resolver *r) {
  if (!r)
    return;
  pthread_mutex_lock(&r->lock);
  r->stopping = true;
  pthread_cond_broadcast(&r->wake);
  pthread_mutex_unlock(&r->lock);
  /* A worker stuck writing a result to a full pipe needs the pipe drained to finish. */
  struct net_resolution discard;
  for (unsigned i = 0; i < r->worker_count; i++) {
    while (pthread_tryjoin_np(r->workers[i], NULL) == EBUSY) {
      while (r->results[0] >= 0 && read(r->results[0], &discard, sizeof discard) > 0)
        ;
      usleep(1000);
    }
  }
  for (int i = 0; i < 2; i++)
    if (r->results[i] >= 0)
      close(r->results[i]);
  pthread_mutex_destroy(&r->lock);
  pthread_cond_destroy(&r->wake);
  free(r->queue);
  free(r->workers);
  free(r);
}
