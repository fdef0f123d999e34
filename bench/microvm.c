/* bench/microvm: the qemu microvm monitor's two goals (issue 19, Measure), under TCG:
 *   cold: boot a fresh VM (qemu started, kernel booted, agent answering) and run `true` in it:
 *         create to first result, goal <= 2 s
 *   exec: `true` in an already booted VM, goal <= 20 ms
 * Medians of N, with the load average when the run started and ended (the machine is shared:
 * a figure without its load means little). Driven through microvm_monitor_qemu in-process, the
 * layer every microvm session sits on; the guest's own share of a boot is on its console
 * ("ready, X s after the kernel started"), printed as well. The guest's files are hashed once
 * per process (qemu-vmm.c): the first cold round pays that, the others do not, while a CLI
 * `session create` pays it once.
 *
 * Usage: microvm GUEST_DIR_OR_EMPTY [COLD_ROUNDS] [EXEC_ROUNDS]   (bench/microvm, the script,
 * builds and runs this program as root). With CORDON_BENCH_BASELINE_AGENT (another cordon-guest)
 * or CORDON_BENCH_BASELINE_GUEST (another guest dir: another kernel), a baseline runs in the
 * same run, its boots and execs alternating with the build's, and the ratios are printed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/microvm/monitor.h"
#include "backends/microvm/qemu.h"
#include "base/fs.h"

static const char *const bench_env[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "LC_ALL=C", NULL};

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof(*v), cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void print_load(const char *when) {
  char text[128] = "?";
  FILE *f = fopen("/proc/loadavg", "re");
  if (f && fgets(text, sizeof(text), f))
    text[strcspn(text, "\n")] = '\0';
  if (f)
    fclose(f);
  printf("load average %s: %s\n", when, text);
}

struct vm_dir {
  char root[64], workspace[96], control[96];
  struct microvm_config cfg;
  struct microvm_vm vm;
};

static int vm_dir_make(struct vm_dir *d, const char *guest_dir) {
  snprintf(d->root, sizeof(d->root), "/tmp/cordon-bench-microvm.XXXXXX");
  if (!mkdtemp(d->root))
    return -1;
  snprintf(d->workspace, sizeof(d->workspace), "%s/ws", d->root);
  snprintf(d->control, sizeof(d->control), "%s/ctl", d->root);
  if (mkdir(d->workspace, 0777) < 0 || mkdir(d->control, 0700) < 0)
    return -1;
  d->cfg = (struct microvm_config){.workspace = d->workspace,
                                   .control_dir = d->control,
                                   .guest_dir = guest_dir && guest_dir[0] ? guest_dir : NULL,
                                   .egress = CORDON_EGRESS_NONE,
                                   .accel = MICROVM_ACCEL_TCG,
                                   .env = bench_env,
                                   .boot_timeout = 120};
  return 0;
}

static void vm_dir_remove(struct vm_dir *d) {
  struct cordon_error *err = NULL;
  microvm_monitor_qemu.shutdown(&d->vm, &err);
  microvm_monitor_qemu.release(&d->vm);
  free(d->vm.state);
  cordon_error_free(err);
  fs_remove_tree(d->root, NULL);
}

/* `true` in the VM: its time in ms, or -1 (the error printed). */
static double exec_true(struct vm_dir *d) {
  const char *const argv[] = {"true", NULL};
  struct cordon_exec_request req = {.argv = argv, .env = bench_env, .timeout = 30};
  struct cordon_exec_result res;
  struct cordon_error *err = NULL;
  double t0 = fs_now();
  int r = microvm_monitor_qemu.exec(&d->vm, &d->cfg, &req, &res, &err);
  double ms = (fs_now() - t0) * 1e3;
  if (r < 0 || res.exit_code != 0) {
    fprintf(stderr, "microvm: exec: %s\n", r < 0 ? err->message : "true did not exit 0");
    ms = -1;
  }
  if (r == 0)
    cordon_exec_result_clear(&res);
  cordon_error_free(err);
  return ms;
}

/* One side of the run: the build's guest, and (when a baseline is named) the baseline's. */
struct side {
  const char *name, *agent, *guest_dir;
  double *cold, *exec;
  struct vm_dir d;
};

static int side_boot(struct side *sd, int round) {
  if (sd->agent)
    setenv("CORDON_GUEST_AGENT", sd->agent, 1);
  if (vm_dir_make(&sd->d, sd->guest_dir) < 0)
    return -1;
  struct cordon_error *err = NULL;
  double t0 = fs_now();
  if (microvm_monitor_qemu.boot(&sd->d.cfg, &sd->d.vm, &err) < 0) {
    fprintf(stderr, "microvm: %s: boot: %s\n", sd->name, err->message);
    return -1;
  }
  double booted = fs_now();
  double first = exec_true(&sd->d);
  if (first < 0)
    return -1;
  sd->cold[round] = (fs_now() - t0) * 1e3;
  char *console = qemu_log_tail(sd->d.control, QEMU_CONSOLE_LOG, 1);
  printf("  %s cold %d: %.0f ms (boot %.0f ms, first exec %.1f ms; console: %s)\n", sd->name,
         round + 1, sd->cold[round], (booted - t0) * 1e3, first, console ? console : "");
  free(console);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s GUEST_DIR|'' [COLD_ROUNDS] [EXEC_ROUNDS]\n", argv[0]);
    return 2;
  }
  int cold_rounds = argc > 2 ? atoi(argv[2]) : 5, exec_rounds = argc > 3 ? atoi(argv[3]) : 50;
  if (cold_rounds < 1 || exec_rounds < 1)
    return 2;
  /* A baseline (another agent binary, another guest dir, or both) runs in the same run,
   * alternating with the build's: on a loaded machine only a ratio of interleaved runs means
   * much. */
  const char *base_agent = getenv("CORDON_BENCH_BASELINE_AGENT");
  const char *base_guest = getenv("CORDON_BENCH_BASELINE_GUEST");
  struct side sides[2] = {
      {.name = "build", .agent = getenv("CORDON_GUEST_AGENT"), .guest_dir = argv[1]},
      {.name = "baseline",
       .agent = base_agent && base_agent[0] ? base_agent : getenv("CORDON_GUEST_AGENT"),
       .guest_dir = base_guest && base_guest[0] ? base_guest : argv[1]}};
  int n = (base_agent && base_agent[0]) || (base_guest && base_guest[0]) ? 2 : 1;
  for (int k = 0; k < n; k++) {
    sides[k].cold = calloc((size_t)cold_rounds, sizeof(double));
    sides[k].exec = calloc((size_t)exec_rounds, sizeof(double));
    if (!sides[k].cold || !sides[k].exec)
      return 1;
  }
  print_load("at the start");
  for (int i = 0; i < cold_rounds; i++)
    for (int k = 0; k < n; k++) {
      /* Alternate which side goes first, so neither always follows the other. */
      struct side *sd = &sides[(k + i) % n];
      if (side_boot(sd, i) < 0)
        return 1;
      if (i + 1 < cold_rounds)
        vm_dir_remove(&sd->d);
    }
  /* The last VMs stay up for the exec rounds, taken in turns. */
  for (int k = 0; k < n; k++)
    for (int i = 0; i < 3; i++)
      exec_true(&sides[k].d); /* warm the guest's caches of /usr */
  /* CORDON_BENCH_EXEC_GAP_MS: a pause (untimed) before each exec, as a CLI user's commands
   * come with the CLI's own start between them; 0 (the default): back to back. */
  const char *gap_env = getenv("CORDON_BENCH_EXEC_GAP_MS");
  int gap_ms = gap_env ? atoi(gap_env) : 0;
  for (int i = 0; i < exec_rounds; i++)
    for (int k = 0; k < n; k++) {
      struct side *sd = &sides[(k + i) % n];
      if (gap_ms > 0)
        usleep((useconds_t)gap_ms * 1000);
      if ((sd->exec[i] = exec_true(&sd->d)) < 0)
        return 1;
    }
  double m_cold[2] = {0}, m_exec[2] = {0};
  for (int k = 0; k < n; k++) {
    vm_dir_remove(&sides[k].d);
    m_cold[k] = median(sides[k].cold, cold_rounds);
    m_exec[k] = median(sides[k].exec, exec_rounds);
  }
  for (int k = 0; k < n; k++) {
    const char *who = n > 1 ? sides[k].name : "";
    printf("%s%scold create to first result (median of %d): %8.1f ms   goal <= 2000 ms: %s\n", who,
           n > 1 ? ": " : "", cold_rounds, m_cold[k], m_cold[k] <= 2000 ? "met" : "NOT met");
    printf(
        "%s%sexec of true, booted VM (median of %d, %d ms apart): %8.2f ms   goal <= 20 ms: %s\n",
        who, n > 1 ? ": " : "", exec_rounds, gap_ms, m_exec[k],
        m_exec[k] <= 20 ? "met" : "NOT met");
  }
  if (n > 1)
    printf("ratio build / baseline: cold %.2f, exec %.2f\n", m_cold[0] / m_cold[1],
           m_exec[0] / m_exec[1]);
  print_load("at the end");
  for (int k = 0; k < n; k++) {
    free(sides[k].cold);
    free(sides[k].exec);
  }
  return 0;
}
