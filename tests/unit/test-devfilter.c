/* Unit tests of the device cgroup program (src/confine/devfilter.c, pure): the instructions are
 * run by a small interpreter of the few shapes the builder may emit (anything else, a jump
 * backwards or out of the program, a register read before it is set, fails the test), against
 * the defaults, granted nodes, and random rule sets checked with a reference predicate. Then,
 * as root with a cgroup v2 hierarchy (skipped otherwise, with the reason), the bpf(2) layer
 * (devfilter-bpf.c): attached to a fresh cgroup, read back with BPF_PROG_QUERY, and a process
 * in that cgroup opens /dev/null but not /dev/zero (EPERM). */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/fs.h"
#include "confine/devfilter.h"
#include "confine/policy.h"

#define R CONFINE_DEV_READ
#define W CONFINE_DEV_WRITE
#define M CONFINE_DEV_MKNOD
#define C CONFINE_DEV_CHAR
#define B CONFINE_DEV_BLOCK

/* Run the program on one request the way the kernel would: 1 allow, 0 deny. Fails the test on
 * any instruction outside the builder's repertoire. */
static int run(const struct bpf_insn *p, size_t n, uint32_t type, uint32_t access, uint32_t major,
               uint32_t minor) {
  const uint32_t ctx[3] = {type | access << 16, major, minor};
  uint64_t reg[11] = {0};
  bool set[11] = {false};
  bool is_ctx[11] = {false};
  set[1] = is_ctx[1] = true;
  for (size_t pc = 0; pc < n; pc++) {
    const struct bpf_insn *i = &p[pc];
    const uint8_t d = i->dst_reg, s = i->src_reg;
    assert_true(d < 10 && s < 10);
    switch (i->code) {
    case BPF_LDX | BPF_W | BPF_MEM:
      assert_true(is_ctx[s]);
      assert_true(i->off >= 0 && i->off <= 8 && i->off % 4 == 0);
      reg[d] = ctx[i->off / 4];
      set[d] = true;
      is_ctx[d] = false;
      break;
    case BPF_ALU | BPF_AND | BPF_K:
      assert_true(set[d] && !is_ctx[d]);
      reg[d] = (uint32_t)reg[d] & (uint32_t)i->imm;
      break;
    case BPF_ALU | BPF_RSH | BPF_K:
      assert_true(set[d] && !is_ctx[d]);
      reg[d] = (uint32_t)reg[d] >> i->imm;
      break;
    case BPF_ALU | BPF_MOV | BPF_X:
      assert_true(set[s] && !is_ctx[s]);
      reg[d] = (uint32_t)reg[s];
      set[d] = true;
      is_ctx[d] = false;
      break;
    case BPF_ALU64 | BPF_MOV | BPF_K:
      reg[d] = (uint64_t)(int64_t)i->imm;
      set[d] = true;
      is_ctx[d] = false;
      break;
    case BPF_JMP | BPF_JNE | BPF_K:
    case BPF_JMP | BPF_JNE | BPF_X:
    case BPF_JMP | BPF_JLT | BPF_K:
    case BPF_JMP | BPF_JGT | BPF_K: {
      bool by_reg = (i->code & BPF_X) != 0;
      assert_true(set[d] && !is_ctx[d]);
      assert_true(!by_reg || (set[s] && !is_ctx[s]));
      uint64_t other = by_reg ? reg[s] : (uint64_t)(int64_t)i->imm;
      assert_true(i->off > 0 && pc + 1 + (size_t)i->off < n); /* forward, inside */
      bool jump = BPF_OP(i->code) == BPF_JNE   ? reg[d] != other
                  : BPF_OP(i->code) == BPF_JLT ? reg[d] < other
                                               : reg[d] > other; /* unsigned, as the kernel */
      if (jump)
        pc += (size_t)i->off;
      break;
    }
    case BPF_JMP | BPF_EXIT:
      assert_true(set[0]);
      assert_true(reg[0] == 0 || reg[0] == 1);
      return (int)reg[0];
    default: fail_msg("instruction %zu: unexpected code %#x", pc, i->code);
    }
  }
  fail_msg("the program ran off its end");
  return -1;
}

/* The reference: what the rules mean. */
static int reference(const struct confine_dev_rule *rules, size_t n, uint32_t type, uint32_t access,
                     uint32_t major, uint32_t minor) {
  for (size_t i = 0; i < n; i++) {
    const struct confine_dev_rule *r = &rules[i];
    uint32_t last = r->major_last > r->major ? r->major_last : r->major;
    if (r->type == type && (access & ~r->access) == 0 && r->major <= major && major <= last &&
        (r->minor == CONFINE_DEV_ANY_MINOR || r->minor == minor))
      return 1;
  }
  return 0;
}

static void build(const struct confine_dev_rule *rules, size_t n, struct bpf_insn **p,
                  size_t *count) {
  struct cordon_error *err = NULL;
  int r = confine_devfilter_build(rules, n, p, count, &err);
  if (r < 0)
    fail_msg("build: %s", err->message);
  assert_non_null(*p);
  /* every jump of every path forward and inside, whatever is asked */
  for (size_t pc = 0; pc < *count; pc++)
    if (BPF_CLASS((*p)[pc].code) == BPF_JMP && BPF_OP((*p)[pc].code) != BPF_EXIT)
      assert_true((*p)[pc].off > 0 && pc + 1 + (size_t)(*p)[pc].off < *count);
  assert_int_equal((*p)[*count - 1].code, BPF_JMP | BPF_EXIT);
}

static void test_defaults(void **state) {
  (void)state;
  const struct confine_dev_rule *d;
  size_t n = confine_devfilter_defaults(&d);
  struct bpf_insn *p;
  size_t count;
  build(d, n, &p, &count);
  /* the /dev the sandbox holds: null, zero, full, random, urandom, read and write */
  static const uint32_t held[] = {3, 5, 7, 8, 9};
  for (size_t i = 0; i < sizeof(held) / sizeof(held[0]); i++) {
    assert_int_equal(run(p, count, C, R | W, 1, held[i]), 1);
    assert_int_equal(run(p, count, C, R, 1, held[i]), 1);
    assert_int_equal(run(p, count, C, W, 1, held[i]), 1);
    assert_int_equal(run(p, count, C, M, 1, held[i]), 0); /* no mknod */
    assert_int_equal(run(p, count, C, R | W | M, 1, held[i]), 0);
    assert_int_equal(run(p, count, B, R, 1, held[i]), 0); /* a block device of those numbers */
  }
  /* mem, kmem, port, kmsg; a tty, the console, ptmx, fuse, tun, kvm, a disk */
  assert_int_equal(run(p, count, C, R, 1, 1), 0);
  assert_int_equal(run(p, count, C, R, 1, 2), 0);
  assert_int_equal(run(p, count, C, R, 1, 4), 0);
  assert_int_equal(run(p, count, C, R, 1, 11), 0);
  assert_int_equal(run(p, count, C, R | W, 5, 0), 0);
  assert_int_equal(run(p, count, C, R | W, 5, 1), 0);
  assert_int_equal(run(p, count, C, R | W, 5, 2), 0);
  assert_int_equal(run(p, count, C, R | W, 10, 229), 0);
  assert_int_equal(run(p, count, C, R | W, 10, 200), 0);
  assert_int_equal(run(p, count, C, R | W, 10, 232), 0);
  assert_int_equal(run(p, count, B, R, 8, 0), 0);
  assert_int_equal(run(p, count, B, R, 253, 0), 0);
  /* a terminal handed in as stdio, reopened: pts slaves, any minor, majors 136-143 only */
  assert_int_equal(run(p, count, C, R | W, 136, 0), 1);
  assert_int_equal(run(p, count, C, R | W, 143, 1048575), 1);
  assert_int_equal(run(p, count, C, R | W, 135, 0), 0);
  assert_int_equal(run(p, count, C, R | W, 144, 0), 0);
  assert_int_equal(run(p, count, B, R, 136, 0), 0);
  assert_int_equal(run(p, count, C, M, 136, 0), 0);
  free(p);
}

static void test_granted(void **state) {
  (void)state;
  const struct confine_dev_rule *d;
  size_t n = confine_devfilter_defaults(&d);
  struct confine_dev_rule rules[64];
  memcpy(rules, d, n * sizeof(*d));
  rules[n++] = (struct confine_dev_rule){C, 10, 229, R | W};   /* a granted node (fuse's numbers) */
  rules[n++] = (struct confine_dev_rule){C, 195, 0, R | W};    /* nvidia0 */
  rules[n++] = (struct confine_dev_rule){C, 4095, 1048575, R}; /* the largest numbers, read only */
  struct bpf_insn *p;
  size_t count;
  build(rules, n, &p, &count);
  assert_int_equal(run(p, count, C, R | W, 10, 229), 1);
  assert_int_equal(run(p, count, C, R | W, 10, 228), 0);
  assert_int_equal(run(p, count, C, R | W, 11, 229), 0);
  assert_int_equal(run(p, count, C, M, 10, 229), 0);
  assert_int_equal(run(p, count, B, R, 10, 229), 0);
  assert_int_equal(run(p, count, C, R | W, 195, 0), 1);
  assert_int_equal(run(p, count, C, R | W, 195, 1), 0); /* nvidia1 was not granted */
  assert_int_equal(run(p, count, C, R, 4095, 1048575), 1);
  assert_int_equal(run(p, count, C, W, 4095, 1048575), 0);
  assert_int_equal(run(p, count, C, R, 1, 3), 1); /* the defaults still hold */
  assert_int_equal(run(p, count, C, R, 1, 1), 0);
  free(p);
}

/* Random rule sets against the reference, on requests near the rules and anywhere. */
static void test_random_against_reference(void **state) {
  (void)state;
  srand(22);
  for (int round = 0; round < 300; round++) {
    size_t n = 1 + (size_t)(rand() % 40);
    struct confine_dev_rule rules[40];
    for (size_t i = 0; i < n; i++) {
      memset(&rules[i], 0, sizeof(rules[i]));
      rules[i].type = rand() % 2 ? C : B;
      rules[i].access = 1 + (uint32_t)(rand() % 7);
      rules[i].major = (uint32_t)(rand() % 8);
      rules[i].minor = rand() % 5 == 0 ? CONFINE_DEV_ANY_MINOR : (uint32_t)(rand() % 8);
      rules[i].major_last = rand() % 4 == 0 ? rules[i].major + (uint32_t)(rand() % 3) : 0;
    }
    struct bpf_insn *p;
    size_t count;
    build(rules, n, &p, &count);
    for (int q = 0; q < 200; q++) {
      uint32_t type = rand() % 2 ? C : B, access = 1 + (uint32_t)(rand() % 7);
      uint32_t major = (uint32_t)(rand() % 11), minor = (uint32_t)(rand() % 9);
      assert_int_equal(run(p, count, type, access, major, minor),
                       reference(rules, n, type, access, major, minor));
    }
    free(p);
  }
}

static void expect_refused(const struct confine_dev_rule *rules, size_t n) {
  struct cordon_error *err = NULL;
  struct bpf_insn *p = (struct bpf_insn *)1;
  size_t count = 7;
  assert_true(confine_devfilter_build(rules, n, &p, &count, &err) < 0);
  assert_non_null(err);
  assert_null(p);
  assert_int_equal(count, 0);
  cordon_error_free(err);
}

static void test_refusals(void **state) {
  (void)state;
  struct confine_dev_rule r = {C, 1, 3, R};
  expect_refused(&r, 0);
  r.type = 3;
  expect_refused(&r, 1);
  r = (struct confine_dev_rule){C, 1, 3, 0};
  expect_refused(&r, 1);
  r.access = 8;
  expect_refused(&r, 1);
  r = (struct confine_dev_rule){C, 4096, 0, R};
  expect_refused(&r, 1);
  r = (struct confine_dev_rule){C, 1, 0x100000, R};
  expect_refused(&r, 1);
  r = (struct confine_dev_rule){C, 5, 0, R, 4}; /* a range that ends before it starts */
  expect_refused(&r, 1);
  r = (struct confine_dev_rule){C, 5, 0, R, 4096};
  expect_refused(&r, 1);
  static struct confine_dev_rule many[CONFINE_DEVFILTER_MAX_RULES + 1];
  for (size_t i = 0; i < CONFINE_DEVFILTER_MAX_RULES + 1; i++)
    many[i] = (struct confine_dev_rule){C, 1, 3, R};
  expect_refused(many, CONFINE_DEVFILTER_MAX_RULES + 1);
  /* the most it takes is accepted */
  struct bpf_insn *p;
  size_t count;
  build(many, CONFINE_DEVFILTER_MAX_RULES, &p, &count);
  free(p);
}

/* A fresh cgroup beneath ours on the v2 hierarchy, or NULL (and why). */
static char *make_cgroup(const char **why) {
  unsigned char *proc_cgroup = NULL, *mountinfo = NULL;
  size_t len;
  char *mp = NULL, *root = NULL, *own = NULL, *dir = NULL;
  char name[64];
  snprintf(name, sizeof(name), "cordon-test-devfilter-%d", (int)getpid());
  *why = "no cgroup v2 hierarchy";
  if (fs_read_file("/proc/self/cgroup", 1 << 16, &proc_cgroup, &len, NULL) == 0 &&
      fs_read_file("/proc/self/mountinfo", 1 << 22, &mountinfo, &len, NULL) == 0 &&
      confine_cgroup_find_mount((char *)mountinfo, NULL, &mp, &root) == 0 &&
      confine_cgroup_own_path((char *)proc_cgroup, NULL, &own) == 0)
    dir = confine_cgroup_dir(mp, root, own, name);
  if (dir && mkdir(dir, 0755) < 0) {
    *why = "cannot create a cgroup beneath our own";
    free(dir);
    dir = NULL;
  }
  free(proc_cgroup);
  free(mountinfo);
  free(mp);
  free(root);
  free(own);
  return dir;
}

/* A child joins the cgroup, then opens /dev/null (allowed) and /dev/zero (not): its exit code
 * says what it saw. */
static int child_opens(const char *dir) {
  pid_t pid = fork();
  if (pid == 0) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, "0", 1) != 1)
      _exit(10);
    close(fd);
    int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null_fd < 0)
      _exit(11);
    close(null_fd);
    int zero_fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);
    if (zero_fd >= 0)
      _exit(12);
    _exit(errno == EPERM ? 0 : 13);
  }
  int status = 0;
  assert_true(pid > 0);
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  return WEXITSTATUS(status);
}

/* The test's cgroup, removed by the teardown whatever the test did. */
static char *test_cgroup;

static int remove_test_cgroup(void **state) {
  (void)state;
  if (!test_cgroup)
    return 0;
  /* the exited children leave the cgroup as they are reaped; give the kernel a moment */
  int removed = -1;
  for (int i = 0; i < 100 && (removed = rmdir(test_cgroup)) < 0 && errno == EBUSY; i++)
    usleep(10000);
  free(test_cgroup);
  test_cgroup = NULL;
  return removed;
}

static void test_attached_program_denies(void **state) {
  (void)state;
  if (geteuid() != 0) {
    print_message("skipped: loading a device cgroup program needs root\n");
    skip();
  }
  const char *why = NULL;
  test_cgroup = make_cgroup(&why);
  if (!test_cgroup) {
    print_message("skipped: %s\n", why);
    skip();
  }
  int cg = open(test_cgroup, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  assert_true(cg >= 0);
  struct cordon_error *err = NULL;
  uint32_t n = 99;
  assert_int_equal(confine_devfilter_count(cg, &n, &err), 0);
  assert_int_equal(n, 0);
  /* Without the program both opens work: the test below can fail. */
  assert_int_equal(child_opens(test_cgroup), 12);
  const struct confine_dev_rule only_null = {C, 1, 3, R | W, 0};
  struct bpf_insn *p;
  size_t count;
  build(&only_null, 1, &p, &count);
  int r = confine_devfilter_attach(cg, p, count, &err);
  free(p);
  if (r < 0)
    fail_msg("attach: %s", err->message);
  assert_int_equal(confine_devfilter_count(cg, &n, &err), 0);
  assert_int_equal(n, 1);
  assert_int_equal(child_opens(test_cgroup), 0);
  close(cg);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_defaults),
      cmocka_unit_test(test_granted),
      cmocka_unit_test(test_random_against_reference),
      cmocka_unit_test(test_refusals),
      cmocka_unit_test_teardown(test_attached_program_denies, remove_test_cgroup),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
