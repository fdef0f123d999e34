/* bench/agent: the cold start of `cordon agent` against bubblewrap with the same policy.
 *
 * The contestants, on one project with read-only and hidden paths (the policy flags are the
 * arguments after PROJECT):
 *   cordon agent --mechanism ns    FLAGS -- true   (cordon's own confinement)
 *   bwrap ... true                                 (the argv `cordon agent --print bwrap FLAGS`
 *                                                   prints for the same project, run directly)
 *   cordon agent --mechanism bwrap FLAGS -- true   (cordon's wrapper around that same bwrap)
 *   cordon run -- true                             (a reference: the ns backend without agent)
 * They run interleaved, the order reversed every other round, so load drifts on a shared
 * machine hit each alike. Prints each one's median and quartiles (ms) and the ratios the issue
 * targets: agent ns / bwrap (<= 1.0) and agent bwrap / bwrap (the wrapper's overhead), each
 * as the ratio of the medians and as the median of the per-round ratios (each cordon run
 * against the bwrap run next to it).
 *
 * Usage: agent CORDON_BINARY ROUNDS PROJECT [POLICY FLAGS...]
 * (bench/agent, the script, builds this program, makes the project and runs it.) Standalone:
 * it needs no libcordon, only a POSIX libc. */
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* fork + execvp + wait, stdio on /dev/null (no terminal: cordon agent takes no pty, and the
 * printed bwrap argv is the one for a caller without a terminal); elapsed ms, or -1 when the
 * command failed. */
static double time_command(char *const *argv) {
  double t0 = now_ms();
  pid_t pid = fork();
  if (pid == 0) {
    int null_fd = open("/dev/null", O_RDWR);
    dup2(null_fd, 0);
    dup2(null_fd, 1);
    dup2(null_fd, 2);
    execvp(argv[0], argv);
    _exit(127);
  }
  int status;
  if (pid < 0 || waitpid(pid, &status, 0) < 0)
    return -1;
  double t = now_ms() - t0;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? t : -1;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The q-quantile of n values (sorted in place), by linear interpolation. */
static double quantile(double *v, int n, double q) {
  if (n == 0)
    return -1;
  qsort(v, (size_t)n, sizeof(double), cmp_double);
  double pos = q * (n - 1);
  int lo = (int)pos;
  return lo + 1 < n ? v[lo] + (pos - lo) * (v[lo + 1] - v[lo]) : v[lo];
}

/* Splits one line of POSIX shell words as `cordon agent --print bwrap` prints them (bare
 * words, or single-quoted with '\'' for a quote) into a NULL-terminated vector, in place. */
static char **split_shell_words(char *line) {
  size_t cap = 16, n = 0;
  char **v = malloc(cap * sizeof(char *));
  char *r = line, *w = line;
  while (v) {
    while (*r == ' ' || *r == '\n')
      r++;
    if (!*r)
      break;
    char *word = w;
    while (*r && *r != ' ' && *r != '\n') {
      if (*r == '\'') {
        for (r++; *r && *r != '\'';)
          *w++ = *r++;
        if (*r)
          r++;
      } else if (*r == '\\' && r[1]) {
        *w++ = r[1];
        r += 2;
      } else {
        *w++ = *r++;
      }
    }
    bool at_end = !*r;
    *w++ = 0;
    if (!at_end)
      r++;
    if (n + 2 > cap)
      v = realloc(v, (cap *= 2) * sizeof(char *));
    if (v)
      v[n++] = word;
    if (at_end)
      break;
  }
  if (v)
    v[n] = NULL;
  return v;
}

/* argv of `cordon agent [--mechanism M | --print bwrap] --project P FLAGS -- true`. */
static char **agent_argv(char *cordon, char *mode, char *mode_arg, char *project, int n_flags,
                         char **flags) {
  char **v = calloc((size_t)n_flags + 10, sizeof(char *));
  if (!v)
    return NULL;
  int n = 0;
  v[n++] = cordon;
  v[n++] = "agent";
  v[n++] = mode;
  v[n++] = mode_arg;
  v[n++] = "--project";
  v[n++] = project;
  for (int i = 0; i < n_flags; i++)
    v[n++] = flags[i];
  v[n++] = "--";
  v[n++] = "true";
  return v;
}

/* The bwrap argv cordon generates for this policy, read from --print bwrap. */
static char **printed_bwrap_argv(char *const *print_argv, char **text) {
  int fds[2];
  if (pipe(fds) < 0)
    return NULL;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    execvp(print_argv[0], print_argv);
    _exit(127);
  }
  close(fds[1]);
  size_t len = 0, cap = 4096;
  *text = malloc(cap);
  ssize_t got;
  while (*text && (got = read(fds[0], *text + len, cap - len - 1)) > 0)
    if ((len += (size_t)got) + 1 == cap)
      *text = realloc(*text, cap *= 2);
  close(fds[0]);
  int status;
  if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) ||
      !*text)
    return NULL;
  (*text)[len] = 0;
  return split_shell_words(*text);
}

struct contestant {
  const char *name;
  char **argv;
  double *samples; /* by round; -1 for a failed run */
  int failures;
};

static void report(const struct contestant *c, int rounds) {
  double *ok = calloc((size_t)rounds, sizeof(double));
  int n = 0;
  for (int r = 0; ok && r < rounds; r++)
    if (c->samples[r] >= 0)
      ok[n++] = c->samples[r];
  double q1 = quantile(ok, n, 0.25), med = quantile(ok, n, 0.5), q3 = quantile(ok, n, 0.75);
  printf("  %-40s %7.2f ms  (quartiles %.2f-%.2f, %d runs%s)\n", c->name, med, q1, q3, n,
         c->failures ? ", some FAILED" : "");
  free(ok);
}

static double median_of(const struct contestant *c, int rounds) {
  double *ok = calloc((size_t)rounds, sizeof(double));
  int n = 0;
  for (int r = 0; ok && r < rounds; r++)
    if (c->samples[r] >= 0)
      ok[n++] = c->samples[r];
  double m = quantile(ok, n, 0.5);
  free(ok);
  return m;
}

/* a / b: the ratio of the medians, and the median and quartiles of the per-round ratios. */
static void report_ratio(const char *what, const struct contestant *a, const struct contestant *b,
                         int rounds, double target) {
  double *ratios = calloc((size_t)rounds, sizeof(double));
  int n = 0;
  for (int r = 0; ratios && r < rounds; r++)
    if (a->samples[r] >= 0 && b->samples[r] > 0)
      ratios[n++] = a->samples[r] / b->samples[r];
  double of_medians = median_of(a, rounds) / median_of(b, rounds);
  double q1 = quantile(ratios, n, 0.25), med = quantile(ratios, n, 0.5),
         q3 = quantile(ratios, n, 0.75);
  printf("  ratio %-34s %5.2f  (per round: median %.2f, quartiles %.2f-%.2f)", what, of_medians,
         med, q1, q3);
  if (target > 0)
    printf("  target <= %.2f: %s", target, of_medians <= target ? "met" : "NOT met");
  putchar('\n');
  free(ratios);
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s CORDON_BINARY ROUNDS PROJECT [POLICY FLAGS...]\n", argv[0]);
    return 2;
  }
  char *cordon = argv[1], *project = argv[3];
  int rounds = atoi(argv[2]);
  if (rounds < 5)
    rounds = 5;
  int n_flags = argc - 4;
  char **flags = argv + 4;

  char **print_argv = agent_argv(cordon, "--print", "bwrap", project, n_flags, flags);
  char *text = NULL;
  char **bwrap = print_argv ? printed_bwrap_argv(print_argv, &text) : NULL;
  if (!bwrap) {
    fprintf(stderr, "agent: `cordon agent --print bwrap` failed\n");
    return 1;
  }
  char *cordon_run[] = {cordon, "run", "--", "true", NULL};
  struct contestant c[] = {
      {"cordon agent --mechanism ns -- true",
       agent_argv(cordon, "--mechanism", "ns", project, n_flags, flags), NULL, 0},
      {"bwrap (the printed argv) true", bwrap, NULL, 0},
      {"cordon agent --mechanism bwrap -- true",
       agent_argv(cordon, "--mechanism", "bwrap", project, n_flags, flags), NULL, 0},
      {"cordon run -- true (reference)", cordon_run, NULL, 0},
  };
  enum { N = sizeof(c) / sizeof(c[0]) };
  for (int i = 0; i < N; i++) {
    c[i].samples = calloc((size_t)rounds, sizeof(double));
    if (!c[i].argv || !c[i].samples)
      return 1;
    if (time_command(c[i].argv) < 0) { /* warm-up; and a contestant that cannot run at all */
      fprintf(stderr, "agent: `%s` failed\n", c[i].name);
      return 1;
    }
  }
  printf("cold start on a project with %d policy flag words, %d interleaved rounds:\n", n_flags,
         rounds);
  for (int r = 0; r < rounds; r++)
    for (int k = 0; k < N; k++) {
      int i = r % 2 ? N - 1 - k : k; /* ABCD DCBA: each cordon run sits next to a bwrap run */
      c[i].samples[r] = time_command(c[i].argv);
      if (c[i].samples[r] < 0)
        c[i].failures++;
    }
  for (int i = 0; i < N; i++)
    report(&c[i], rounds);
  report_ratio("agent ns / bwrap:", &c[0], &c[1], rounds, 1.0);
  report_ratio("agent bwrap / bwrap (wrapper):", &c[2], &c[1], rounds, 0);
  report_ratio("agent ns / cordon run:", &c[0], &c[3], rounds, 0);

  for (int i = 0; i < N; i++) {
    if (i != 1 && i != 3)
      free(c[i].argv);
    free(c[i].samples);
  }
  free(bwrap);
  free(text);
  free(print_argv);
  int failed = 0;
  for (int i = 0; i < N; i++)
    failed |= c[i].failures > 0;
  return failed;
}
