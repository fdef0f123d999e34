/* The floor under a first snapshot: the least a program must do for the same work on this
 * machine, with nothing of cordon's (no manifest, no stat cache, no checks). Built and run by
 * `bench/snapshot --floor`.
 *
 *   snapshot-floor hash TREE          list the tree, then read and SHA-256 every file
 *   snapshot-floor store TREE STORE   the same, and store each file as STORE/<2 hex>/<64 hex>
 *                                     (temp file, write, rename), then one syncfs
 *
 * Files are read on THREADS threads (default 2), each with one reused buffer. Prints one line:
 * the seconds of each phase. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define BUFFER_SIZE ((size_t)1 << 20)

static char **paths;
static size_t n_paths, cap_paths, next_path;
static int shard[256];
static int storing;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what) {
  perror(what);
  exit(1);
}

static void list_tree(const char *dir) {
  DIR *d = opendir(dir);
  if (!d)
    die(dir);
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
      continue;
    char *p;
    if (asprintf(&p, "%s/%s", dir, e->d_name) < 0)
      die("asprintf");
    struct stat st;
    if (lstat(p, &st) < 0)
      die(p);
    if (S_ISDIR(st.st_mode)) {
      list_tree(p);
      free(p);
    } else if (S_ISREG(st.st_mode)) {
      if (n_paths == cap_paths) {
        cap_paths = cap_paths ? cap_paths * 2 : 4096;
        paths = realloc(paths, cap_paths * sizeof(*paths));
        if (!paths)
          die("realloc");
      }
      paths[n_paths++] = p;
    } else {
      free(p);
    }
  }
  closedir(d);
}

static void *worker(void *arg) {
  unsigned long id = (unsigned long)arg, count = 0;
  unsigned char *buf = malloc(BUFFER_SIZE);
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  if (!buf || !ctx)
    die("malloc");
  for (;;) {
    size_t i = __atomic_fetch_add(&next_path, 1, __ATOMIC_RELAXED);
    if (i >= n_paths)
      break;
    int in = open(paths[i], O_RDONLY | O_NOATIME | O_CLOEXEC);
    if (in < 0)
      in = open(paths[i], O_RDONLY | O_CLOEXEC);
    if (in < 0)
      die(paths[i]);
    char tmp[64];
    int out = -1;
    if (storing) {
      snprintf(tmp, sizeof(tmp), ".tmp-%lu-%lu", id, count++);
      out = openat(shard[0], tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
      if (out < 0)
        die("temp file");
    }
    EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
    for (;;) {
      ssize_t n = read(in, buf, BUFFER_SIZE);
      if (n < 0)
        die(paths[i]);
      if (n == 0)
        break;
      EVP_DigestUpdate(ctx, buf, (size_t)n);
      if (out >= 0 && write(out, buf, (size_t)n) != n)
        die("write");
      if ((size_t)n < BUFFER_SIZE)
        break; /* a short read of a regular file is its end */
    }
    close(in);
    unsigned char md[32];
    EVP_DigestFinal_ex(ctx, md, NULL);
    if (out >= 0) {
      close(out);
      char hex[65];
      for (int k = 0; k < 32; k++)
        snprintf(hex + 2 * k, 3, "%02x", md[k]);
      /* Staged in shard 00, renamed into its own shard: as cordon stages streamed blobs. */
      if (renameat(shard[0], tmp, shard[md[0]], hex) < 0)
        die("rename");
    }
  }
  EVP_MD_CTX_free(ctx);
  free(buf);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 3 || (strcmp(argv[1], "hash") && strcmp(argv[1], "store")) ||
      (!strcmp(argv[1], "store") && argc < 4)) {
    fprintf(stderr, "usage: %s hash TREE | store TREE STORE\n", argv[0]);
    return 2;
  }
  storing = !strcmp(argv[1], "store");
  unsigned long threads = getenv("THREADS") ? strtoul(getenv("THREADS"), NULL, 10) : 2;
  if (threads < 1 || threads > 64)
    threads = 2;
  double t0 = now();
  int storefd = -1;
  if (storing) {
    if (mkdir(argv[3], 0700) < 0)
      die(argv[3]);
    storefd = open(argv[3], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    for (int i = 0; i < 256; i++) {
      char name[3];
      snprintf(name, sizeof(name), "%02x", i);
      if (mkdirat(storefd, name, 0700) < 0 ||
          (shard[i] = openat(storefd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        die("shard");
    }
  }
  double t1 = now();
  list_tree(argv[2]);
  double t2 = now();
  pthread_t th[64];
  for (unsigned long i = 1; i < threads; i++)
    if (pthread_create(&th[i], NULL, worker, (void *)i) != 0)
      die("pthread_create");
  worker((void *)0);
  for (unsigned long i = 1; i < threads; i++)
    pthread_join(th[i], NULL);
  double t3 = now();
  if (storefd >= 0 && syncfs(storefd) < 0)
    die("syncfs");
  double t4 = now();
  printf("files %zu setup %.3f list %.3f read+hash%s %.3f sync %.3f total %.3f\n", n_paths, t1 - t0,
         t2 - t1, storing ? "+store" : "", t3 - t2, t4 - t3, t4 - t0);
  return 0;
}
