/* The device cgroup program of an ns sandbox, rules to instructions (devfilter.h). Pure: the
 * bpf(2) calls are in devfilter-bpf.c.
 *
 * The program's shape (the one systemd and crun use):
 *
 *   r2 = ctx->access_type & 0xffff   (type)
 *   r3 = ctx->access_type >> 16      (access asked)
 *   r4 = ctx->major
 *   r5 = ctx->minor
 *   for each rule:
 *     if r2 != type goto next
 *     r1 = r3; r1 &= access; if r1 != r3 goto next   (the access asked is within the rule's)
 *     if r4 != major goto next                        (a range: r4 < first or r4 > last)
 *     if r5 != minor goto next                        (left out for any minor)
 *     r0 = 1; exit
 *   next:
 *   r0 = 0; exit
 *
 * Every jump goes forward, to the next rule's first instruction, so the verifier sees a loop-free
 * program whatever the rules. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "confine/devfilter.h"

/* struct bpf_cgroup_dev_ctx: access_type (type | access << 16), major, minor; 32 bits each. */
enum { CTX_ACCESS_TYPE = 0, CTX_MAJOR = 4, CTX_MINOR = 8 };

static struct bpf_insn insn(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm) {
  return (struct bpf_insn){.code = code, .dst_reg = dst, .src_reg = src, .off = off, .imm = imm};
}

static struct bpf_insn load_ctx(uint8_t dst, int16_t off) {
  return insn(BPF_LDX | BPF_W | BPF_MEM, dst, BPF_REG_1, off, 0);
}

static struct bpf_insn alu32_imm(uint8_t op, uint8_t dst, int32_t imm) {
  return insn(BPF_ALU | op | BPF_K, dst, 0, 0, imm);
}

static struct bpf_insn jne_imm(uint8_t dst, int32_t imm, int16_t off) {
  return insn(BPF_JMP | BPF_JNE | BPF_K, dst, 0, off, imm);
}

static struct bpf_insn mov64_imm(uint8_t dst, int32_t imm) {
  return insn(BPF_ALU64 | BPF_MOV | BPF_K, dst, 0, 0, imm);
}

static struct bpf_insn exit_insn(void) {
  return insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
}

enum { PROLOGUE = 6, EPILOGUE = 2, RULE_MAX = 9 };

/* Read and write; a terminal as stdio is reached by reopening it. No mknod: the sandbox's user
 * namespace refuses a device node's mknod anyway. */
#define RW (CONFINE_DEV_READ | CONFINE_DEV_WRITE)
static const struct confine_dev_rule defaults[] = {
    {CONFINE_DEV_CHAR, 1, 3, RW, 0},                         /* null */
    {CONFINE_DEV_CHAR, 1, 5, RW, 0},                         /* zero */
    {CONFINE_DEV_CHAR, 1, 7, RW, 0},                         /* full */
    {CONFINE_DEV_CHAR, 1, 8, RW, 0},                         /* random */
    {CONFINE_DEV_CHAR, 1, 9, RW, 0},                         /* urandom */
    {CONFINE_DEV_CHAR, 136, CONFINE_DEV_ANY_MINOR, RW, 143}, /* pts slaves, majors 136-143 */
};

size_t confine_devfilter_defaults(const struct confine_dev_rule **rules) {
  *rules = defaults;
  return ARRAY_SIZE(defaults);
}

static int rule_check(const struct confine_dev_rule *r, size_t i, struct cordon_error **err) {
  const uint32_t all = CONFINE_DEV_READ | CONFINE_DEV_WRITE | CONFINE_DEV_MKNOD;
  if (r->type != CONFINE_DEV_CHAR && r->type != CONFINE_DEV_BLOCK)
    return cordon_error_set(err, CORDON_ERR_INVALID, EINVAL,
                            "device rule %zu: type %u is neither char nor block", i, r->type);
  if (!r->access || (r->access & ~all))
    return cordon_error_set(err, CORDON_ERR_INVALID, EINVAL, "device rule %zu: bad access %#x", i,
                            r->access);
  if (r->major > CONFINE_DEV_MAJOR_MAX || r->major_last > CONFINE_DEV_MAJOR_MAX ||
      (r->major_last && r->major_last < r->major) ||
      (r->minor != CONFINE_DEV_ANY_MINOR && r->minor > CONFINE_DEV_MINOR_MAX))
    return cordon_error_set(err, CORDON_ERR_INVALID, ERANGE,
                            "device rule %zu: numbers %u:%u out of range", i, r->major, r->minor);
  return 0;
}

/* One rule's block at out (RULE_MAX free): its length. */
static size_t emit_rule(const struct confine_dev_rule *r, struct bpf_insn *out) {
  const bool any_minor = r->minor == CONFINE_DEV_ANY_MINOR;
  const bool range = r->major_last > r->major;
  /* type, three for access, major (two for a range), minor, then the two of the accept */
  const int16_t len = (int16_t)(7 + range + !any_minor);
  size_t n = 0;
  /* Each jump skips to the end of the block: what is left of it after the jump. */
#define TO_NEXT ((int16_t)(len - (int16_t)n - 1))
  out[n] = jne_imm(BPF_REG_2, (int32_t)r->type, TO_NEXT);
  n++;
  out[n++] = insn(BPF_ALU | BPF_MOV | BPF_X, BPF_REG_1, BPF_REG_3, 0, 0);
  out[n++] = alu32_imm(BPF_AND, BPF_REG_1, (int32_t)r->access);
  out[n] = insn(BPF_JMP | BPF_JNE | BPF_X, BPF_REG_1, BPF_REG_3, TO_NEXT, 0);
  n++;
  if (range) {
    out[n] = insn(BPF_JMP | BPF_JLT | BPF_K, BPF_REG_4, 0, TO_NEXT, (int32_t)r->major);
    n++;
    out[n] = insn(BPF_JMP | BPF_JGT | BPF_K, BPF_REG_4, 0, TO_NEXT, (int32_t)r->major_last);
    n++;
  } else {
    out[n] = jne_imm(BPF_REG_4, (int32_t)r->major, TO_NEXT);
    n++;
  }
  if (!any_minor) {
    out[n] = jne_imm(BPF_REG_5, (int32_t)r->minor, TO_NEXT);
    n++;
  }
#undef TO_NEXT
  out[n++] = mov64_imm(BPF_REG_0, 1);
  out[n++] = exit_insn();
  return n;
}

int confine_devfilter_build(const struct confine_dev_rule *rules, size_t n_rules,
                            struct bpf_insn **insns, size_t *count, struct cordon_error **err) {
  *insns = NULL;
  *count = 0;
  if (!n_rules)
    return cordon_error_set(err, CORDON_ERR_INVALID, EINVAL, "a device filter needs a rule");
  if (n_rules > CONFINE_DEVFILTER_MAX_RULES)
    return cordon_error_set(err, CORDON_ERR_USAGE, E2BIG, "too many device rules (%zu, at most %d)",
                            n_rules, CONFINE_DEVFILTER_MAX_RULES);
  for (size_t i = 0; i < n_rules; i++)
    if (rule_check(&rules[i], i, err) < 0)
      return -1;
  _cleanup_free_ struct bpf_insn *p = calloc(PROLOGUE + n_rules * RULE_MAX + EPILOGUE, sizeof(*p));
  if (!p)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "device filter");
  size_t n = 0;
  p[n++] = load_ctx(BPF_REG_2, CTX_ACCESS_TYPE);
  p[n++] = alu32_imm(BPF_AND, BPF_REG_2, 0xffff);
  p[n++] = load_ctx(BPF_REG_3, CTX_ACCESS_TYPE);
  p[n++] = alu32_imm(BPF_RSH, BPF_REG_3, 16);
  p[n++] = load_ctx(BPF_REG_4, CTX_MAJOR);
  p[n++] = load_ctx(BPF_REG_5, CTX_MINOR);
  for (size_t i = 0; i < n_rules; i++)
    n += emit_rule(&rules[i], p + n);
  p[n++] = mov64_imm(BPF_REG_0, 0);
  p[n++] = exit_insn();
  *insns = steal_ptr(&p);
  *count = n;
  return 0;
}
