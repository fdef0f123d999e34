/* `cordon plan run PLAN.yaml [--dry-run] [--json]`: a plan's stages run in order, each in a
 * session on its backend over the project directory (src/plan/). A plan is parsed and its
 * backends resolved before anything runs; --dry-run prints each stage's resolved placement. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cordon/session.h>

#include "base/cleanup.h"
#include "cli/cli.h"
#include "plan/plan.h"

static const char plan_usage[] =
    "usage: cordon plan run PLAN.yaml [--dry-run] [--json]\n"
    "\n"
    "Run a plan's stages in order. Each stage runs in a session on its backend (sandbox:\n"
    "backend; worktree when the stage has no sandbox: block) over the project directory, the\n"
    "same one for every stage, so a stage sees what the ones before it wrote. Its steps run\n"
    "one after another; the first step that fails ends the plan with its exit code.\n"
    "\n"
    "  stages:\n"
    "    - name: test\n"
    "      sandbox:\n"
    "        backend: ns\n"
    "        options: {net: none, memory_mb: 512, timeout_seconds: 60, image: IMAGE,\n"
    "                  read_only: [src], hidden: [secrets], env: {CI: \"1\"}}\n"
    "      steps:\n"
    "        - [make, test]               # an argv, never a shell (also argv: [...])\n"
    "        - run: \"make lint | tee x\"   # a shell line: runs /bin/sh -c LINE\n"
    "\n"
    "An unknown key, a wrong type or an unknown backend is refused before anything runs,\n"
    "as FILE:LINE:COLUMN: message. A stage asks for its options: a backend that cannot\n"
    "enforce them is refused, never run with less.\n"
    "\n"
    "  --dry-run   print each stage's placement (backend, options, steps); run nothing\n"
    "  --json      one JSON document on stdout (the placement, or the steps' exit codes and\n"
    "              durations); the steps' own output then goes to stderr\n"
    "\n"
    "Exit codes: 0 every step succeeded, the failing step's own code (124 when it timed\n"
    "out), 2 a refused plan or usage, 3 no such file, 4 refused by a backend, 125 cordon\n"
    "failed while running.\n";

static json_t *string_list(char **v) {
  json_t *list = json_array();
  for (size_t i = 0; v && v[i]; i++)
    json_array_append_new(list, json_string(v[i]));
  return list;
}

static const char *net_of(const struct plan_stage *st, const struct cordon_registry *reg) {
  if (st->options.net_set)
    return cordon_egress_name(st->options.net);
  const struct cordon_backend *b = NULL;
  struct cordon_error *err = NULL;
  if (cordon_registry_find(reg, st->backend, &b, &err) < 0) {
    cordon_error_free(err);
    return "?";
  }
  return cordon_egress_name(cordon_backend_default_egress(b));
}

static json_t *placement_json(const struct plan *p, const struct cordon_registry *reg) {
  json_t *stages = json_array();
  for (size_t i = 0; i < p->n_stages; i++) {
    const struct plan_stage *st = &p->stages[i];
    const struct plan_options *o = &st->options;
    json_t *steps = json_array();
    for (size_t j = 0; j < st->n_steps; j++)
      json_array_append_new(steps, json_pack("{s:o, s:b}", "argv", string_list(st->steps[j].argv),
                                             "shell", st->steps[j].shell));
    json_t *options =
        json_pack("{s:s?, s:I, s:f, s:s, s:o, s:o, s:o}", "image", o->image, "memory_mb",
                  (json_int_t)o->memory_mb, "timeout_seconds", o->timeout_seconds, "net",
                  net_of(st, reg), "read_only", string_list(o->read_only), "hidden",
                  string_list(o->hidden), "env", string_list(o->env));
    json_array_append_new(stages, json_pack("{s:s, s:s, s:b, s:o, s:o}", "name", st->name,
                                            "backend", st->backend, "sandbox", st->has_sandbox,
                                            "options", options, "steps", steps));
  }
  return json_pack("{s:s, s:o}", "plan", p->file, "stages", stages);
}

static void print_list(const char *label, char **v) {
  printf("  %-16s", label);
  if (!v || !v[0])
    fputs("-", stdout);
  for (size_t i = 0; v && v[i]; i++)
    printf("%s%s", i ? ", " : "", v[i]);
  putchar('\n');
}

/* An argv as words a reader can tell apart: a word with a space or quote is single-quoted. */
static void print_argv(FILE *f, char **argv) {
  for (size_t i = 0; argv[i]; i++) {
    bool plain = argv[i][0] && !strpbrk(argv[i], " \t\n'\"\\$`|&;<>()*?[]#~");
    fputs(i ? " " : "", f);
    if (plain) {
      fputs(argv[i], f);
      continue;
    }
    fputc('\'', f);
    for (const char *c = argv[i]; *c; c++)
      fputs(*c == '\'' ? "'\\''" : (char[]){*c, 0}, f);
    fputc('\'', f);
  }
}

static void print_placement(const struct plan *p, const struct cordon_registry *reg) {
  for (size_t i = 0; i < p->n_stages; i++) {
    const struct plan_stage *st = &p->stages[i];
    const struct plan_options *o = &st->options;
    printf("stage %zu: %s\n", i + 1, st->name);
    printf("  %-16s%s%s\n", "backend", st->backend, st->has_sandbox ? "" : " (no sandbox: block)");
    printf("  %-16s%s\n", "image", o->image ? o->image : "- (the backend's default)");
    if (o->memory_mb)
      printf("  %-16s%llu\n", "memory_mb", (unsigned long long)o->memory_mb);
    else
      printf("  %-16s-\n", "memory_mb");
    if (o->timeout_seconds > 0)
      printf("  %-16s%g\n", "timeout_seconds", o->timeout_seconds);
    else
      printf("  %-16s-\n", "timeout_seconds");
    printf("  %-16s%s%s\n", "net", net_of(st, reg), o->net_set ? "" : " (the backend's default)");
    print_list("read_only", o->read_only);
    print_list("hidden", o->hidden);
    print_list("env", o->env);
    for (size_t j = 0; j < st->n_steps; j++) {
      printf("  step %zu:%*s", j + 1, j + 1 < 10 ? 8 : 7, "");
      print_argv(stdout, st->steps[j].argv);
      fputs(st->steps[j].shell ? "   (run: a shell line)\n" : "\n", stdout);
    }
  }
}

struct progress {
  json_t *stages; /* --json: what ran */
  json_t *steps;  /* of the current stage */
};

static void on_stage(void *data, const struct plan_stage *st, size_t index) {
  struct progress *pr = data;
  (void)index;
  if (pr->stages) {
    pr->steps = json_array();
    json_array_append_new(pr->stages, json_pack("{s:s, s:s, s:O}", "name", st->name, "backend",
                                                st->backend, "steps", pr->steps));
    json_decref(pr->steps); /* the stage holds it */
  }
}

static void on_step_start(void *data, const struct plan_stage *st, const struct plan_step *step,
                          size_t index) {
  (void)data;
  fprintf(stderr, "cordon: plan: stage %s (%s), step %zu: ", st->name, st->backend, index + 1);
  print_argv(stderr, step->argv);
  fputs(step->shell ? "   (run: a shell line)\n" : "\n", stderr);
}

static void on_step_end(void *data, const struct plan_stage *st, const struct plan_step *step,
                        size_t index, const struct cordon_exec_result *res) {
  struct progress *pr = data;
  (void)st, (void)index;
  if (pr->steps)
    json_array_append_new(pr->steps,
                          json_pack("{s:o, s:b, s:i, s:b, s:f}", "argv", string_list(step->argv),
                                    "shell", step->shell, "exit_code", res->exit_code, "timed_out",
                                    res->timed_out, "duration_seconds", res->duration));
}

static int plan_run_verb(int argc, char **argv) {
  static const struct option opts[] = {{"dry-run", no_argument, NULL, 'n'},
                                       {"json", no_argument, NULL, 'j'},
                                       {"help", no_argument, NULL, 'h'},
                                       {0}};
  bool dry_run = false, json = false;
  int c;
  optind = 0;
  while ((c = cli_getopt(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case 'n': dry_run = true; break;
    case 'j': json = true; break;
    case 'h': fputs(plan_usage, stdout); return EXIT_OK;
    default: return cli_option_error("plan run");
    }
  }
  if (argc - optind != 1)
    return cli_usage_error("plan run",
                           argc == optind ? "no plan file given" : "one plan file, not more");
  struct cordon_error *err = NULL;
  struct plan *p = NULL;
  struct cordon_registry *reg = NULL;
  struct cordon_context *ctx = NULL;
  int r = EXIT_OK;
  if (plan_load(argv[optind], &p, &err) < 0 || cordon_registry_load(&reg, &err) < 0 ||
      plan_resolve(p, reg, &err) < 0) {
    if (err && err->kind == CORDON_ERR_INVALID)
      err->kind = CORDON_ERR_USAGE; /* a refused plan: nothing ran */
    r = cli_fail(err);
  } else if (dry_run) {
    if (json)
      cli_print_json(placement_json(p, reg));
    else
      print_placement(p, reg);
  } else if (cordon_context_open(NULL, &ctx, &err) < 0) {
    r = cli_fail(err);
  } else {
    struct progress pr = {.stages = json ? json_array() : NULL};
    struct plan_callbacks cb = {
        .data = &pr, .stage_start = on_stage, .step_start = on_step_start, .step_end = on_step_end};
    int code = 0;
    if (plan_run(ctx, reg, p, json ? STDERR_FILENO : STDOUT_FILENO, STDERR_FILENO, &cb, &code,
                 &err) < 0) {
      int kind_code = cli_exit_code_for(err);
      cli_fail(err);
      r = kind_code == EXIT_FAILURE_ || kind_code == EXIT_USAGE ? EXIT_CORDON : kind_code;
    } else {
      r = code;
      if (code)
        fprintf(stderr, "cordon: plan: stopped: a step exited %d\n", code);
    }
    if (json)
      cli_print_json(json_pack("{s:s, s:i, s:b, s:o}", "plan", p->file, "exit_code", r, "completed",
                               r == 0, "stages", pr.stages));
  }
  cordon_context_free(ctx);
  cordon_registry_free(reg);
  plan_free(p);
  return r;
}

int cmd_plan(int argc, char **argv) {
  static const struct cli_subverb subs[] = {{"run", plan_run_verb}};
  return CLI_DISPATCH("plan", plan_usage, subs, argc, argv);
}
