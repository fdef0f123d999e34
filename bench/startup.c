/* bench/startup: cold start of a sandbox, and exec in an existing one, against peers.
 *
 * Part 1 (cold start), interleaved round-robin so load drifts hit every contestant alike (each
 * cordon run right before its bwrap: the two alternate in pairs):
 *   cordon run -- true      (the whole CLI with default options: the ns backend)
 *   bwrap (same policy: unshare-all, ro /usr + merged-/usr symlinks, /etc, /opt, a workspace,
 *         /proc, /dev, /tmp) true
 *   unshare -Urmpfn --mount-proc true
 *   true
 *   the floor (bench/startup-floor.c): bwrap's policy done by a static program with nothing of
 *         cordon's, the least any program pays for it here, so that the ratio's room is known
 * Part 2 (exec in an existing session, in-process through the library):
 *   cordon_session_exec(ns session, true)   vs   exec_run(true) (the same runner, on the host)
 *   and the CLI: cordon session exec ID -- true   vs   true
 * Prints medians (ms) and the ratios the issue targets: cordon/bwrap (<= 0.6) and
 * ns exec / plain spawn (<= 1.5).
 *
 * Usage: startup CORDON_BINARY [ROUNDS [FLOOR_BINARY]]   (40 rounds by default; run from a
 * scratch directory: it becomes the project; bench/startup, the script, builds and runs this
 * program and the floor). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <stdbool.h>
#include <unistd.h>

#include <cordon/session.h>

#include "base/fs.h"
#include "exec/runner.h"

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* fork + execvp + wait, stdout/stderr to /dev/null; returns elapsed ms or -1 on failure. */
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
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return -1;
  return t;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof(double), cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct contestant {
  const char *name;
  char **argv;
  double *samples;
  int n;
  int failures;
};

static void run_round_robin(struct contestant *c, int count, int rounds) {
  for (int i = 0; i < count; i++)
    time_command(c[i].argv); /* warm-up: page cache, first-time setup */
  for (int r = 0; r < rounds; r++)
    for (int i = 0; i < count; i++) {
      double t = time_command(c[i].argv);
      if (t < 0)
        c[i].failures++;
      else
        c[i].samples[c[i].n++] = t;
    }
}

static void report(const struct contestant *c) {
  printf("  %-44s %8.2f ms  (%d runs%s)\n", c->name, c->n ? median(c->samples, c->n) : -1.0, c->n,
         c->failures ? ", some FAILED" : "");
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s CORDON_BINARY [ROUNDS [FLOOR_BINARY]]\n", argv[0]);
    return 2;
  }
  char *cordon = argv[1];
  int rounds = argc > 2 ? atoi(argv[2]) : 40;
  if (rounds < 5)
    rounds = 5;

  char *cordon_run[] = {cordon, "run", "--", "true", NULL};
  /* The policy cordon run applies by default: system paths read-only (merged /usr: symlinks),
   * /etc, /opt where present, a read-write workspace at /workspace, /proc, /dev, /tmp. (cordon
   * also makes a fresh workspace directory and attaches a seccomp filter; bwrap does neither.) */
  char workspace[] = "/tmp/cordon-bench-ws.XXXXXX";
  if (!mkdtemp(workspace)) {
    perror("mkdtemp");
    return 1;
  }
  bool opt = access("/opt", F_OK) == 0;
  /* clang-format off */
  char *bwrap[] = {"bwrap", "--unshare-all", "--die-with-parent",
                   "--ro-bind", "/usr", "/usr",
                   "--symlink", "usr/bin", "/bin",
                   "--symlink", "usr/sbin", "/sbin",
                   "--symlink", "usr/lib", "/lib",
                   "--symlink", "usr/lib64", "/lib64",
                   "--ro-bind", "/etc", "/etc",
                   "--bind", workspace, "/workspace",
                   "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
                   opt ? "--ro-bind" : "--", opt ? "/opt" : "true", opt ? "/opt" : NULL,
                   "--", "true", NULL};
  /* clang-format on */
  char *unshare[] = {"unshare", "-Urmpfn", "--mount-proc", "true", NULL};
  char *plain[] = {"true", NULL};
  char *floor_run[] = {argc > 3 ? argv[3] : NULL, workspace, "true", NULL};
  struct contestant cold[] = {
      {"cordon run -- true", cordon_run, NULL, 0, 0},
      {"bwrap --unshare-all ... true", bwrap, NULL, 0, 0},
      {"unshare -Urmpfn --mount-proc true", unshare, NULL, 0, 0},
      {"true", plain, NULL, 0, 0},
      {"floor: bwrap's policy, static, bare", floor_run, NULL, 0, 0},
  };
  int n_cold = argc > 3 ? 5 : 4;
  for (int i = 0; i < n_cold; i++)
    cold[i].samples = calloc((size_t)rounds, sizeof(double));

  printf("cold start, %d interleaved rounds (median):\n", rounds);
  run_round_robin(cold, n_cold, rounds);
  for (int i = 0; i < n_cold; i++)
    report(&cold[i]);
  double m_cordon = median(cold[0].samples, cold[0].n),
         m_bwrap = median(cold[1].samples, cold[1].n);
  double ratio = m_cordon / m_bwrap;
  printf("  ratio cordon / bwrap: %.2f (target <= 0.60: %s)\n", ratio,
         ratio <= 0.60 ? "met" : "NOT met");
  printf("  ratio cordon / unshare: %.2f\n", m_cordon / median(cold[2].samples, cold[2].n));
  if (n_cold > 4)
    printf("  ratio floor / bwrap: %.2f (what the policy alone costs here); cordon / floor: %.2f\n",
           median(cold[4].samples, cold[4].n) / m_bwrap,
           m_cordon / median(cold[4].samples, cold[4].n));
  printf("\n");

  /* Part 2: an existing session. */
  struct cordon_context *ctx = NULL;
  struct cordon_registry *reg = NULL;
  const struct cordon_backend *ns = NULL;
  struct cordon_session *s = NULL;
  struct cordon_error *err = NULL;
  struct cordon_manifest m = {0};
  m.policy.require_enforcement = true;
  if (cordon_context_open(NULL, &ctx, &err) < 0 || cordon_registry_load(&reg, &err) < 0 ||
      cordon_registry_find(reg, "ns", &ns, &err) < 0 ||
      cordon_session_create(ctx, ns, &m, &s, &err) < 0) {
    fprintf(stderr, "startup: %s\n", err ? err->message : "failed");
    return 1;
  }
  double *in_ns = calloc((size_t)rounds, sizeof(double));
  double *in_host = calloc((size_t)rounds, sizeof(double));
  const char *true_argv[] = {"true", NULL};
  const char *env[] = {"PATH=/usr/bin:/bin", NULL};
  struct cordon_exec_request req = {.argv = true_argv};
  struct exec_spec spec = {.argv = true_argv, .envp = env};
  int fails = 0;
  for (int r = -3; r < rounds; r++) {
    struct cordon_exec_result res;
    double t0 = now_ms();
    if (cordon_session_exec(s, &req, &res, &err) < 0 || res.exit_code != 0)
      fails++;
    double t1 = now_ms();
    cordon_exec_result_clear(&res);
    cordon_error_free(err);
    err = NULL;
    double t2 = now_ms();
    if (exec_run(&spec, &res, &err) < 0 || res.exit_code != 0)
      fails++;
    double t3 = now_ms();
    cordon_exec_result_clear(&res);
    cordon_error_free(err);
    err = NULL;
    if (r >= 0) {
      in_ns[r] = t1 - t0;
      in_host[r] = t3 - t2;
    }
  }
  double m_ns = median(in_ns, rounds), m_host = median(in_host, rounds);
  printf("exec of true in an existing session, in-process, %d interleaved rounds (median):\n",
         rounds);
  printf("  %-44s %8.2f ms\n", "cordon_session_exec (ns)", m_ns);
  printf("  %-44s %8.2f ms\n", "exec_run on the host (same runner)", m_host);
  printf("  ratio ns exec / host spawn: %.2f (target <= 1.5)%s\n\n", m_ns / m_host,
         fails ? "  [SOME RUNS FAILED]" : "");

  char *session_exec[] = {cordon, "session", "exec", s->id, "--", "true", NULL};
  struct contestant warm[] = {
      {"cordon session exec ID -- true", session_exec, NULL, 0, 0},
      {"true", plain, NULL, 0, 0},
  };
  for (size_t i = 0; i < 2; i++)
    warm[i].samples = calloc((size_t)rounds, sizeof(double));
  printf("exec of true in an existing session, through the CLI (median):\n");
  run_round_robin(warm, 2, rounds);
  for (int i = 0; i < 2; i++)
    report(&warm[i]);
  printf("  ratio / plain true: %.2f (includes starting the cordon binary)\n",
         median(warm[0].samples, warm[0].n) / median(warm[1].samples, warm[1].n));

  cordon_session_destroy(s, NULL);
  cordon_registry_free(reg);
  cordon_context_free(ctx);
  rmdir(workspace);
  return 0;
}
