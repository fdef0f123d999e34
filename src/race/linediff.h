/* The content cost of one file's change (pure): changed lines of text by a minimal line diff,
 * differing bytes of binary. See linediff.c and docs/formats.md ("the cost rule"). */
#ifndef CORDON_RACE_LINEDIFF_H
#define CORDON_RACE_LINEDIFF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A file is binary when a NUL is among its first LINEDIFF_BINARY_PROBE bytes. */
#define LINEDIFF_BINARY_PROBE 8192u
/* The line diff's bounds, counted (never timed) so every host gives the same answer: at most
 * LINEDIFF_MAX_LINES lines between the common head and tail, an edit distance of at most
 * LINEDIFF_MAX_D, at most LINEDIFF_MAX_STEPS steps of the search. Past one of them the cost is
 * the fallback: every line between the common head and tail, old and new. */
#define LINEDIFF_MAX_LINES (1u << 20)
#define LINEDIFF_MAX_D (1u << 14)
#define LINEDIFF_MAX_STEPS (64u << 20)

struct linediff_bounds {
  uint64_t max_lines, max_d, max_steps;
};

bool linediff_is_binary(const unsigned char *data, size_t length);
/* Lines of text: its newlines, plus one for a last line without one. */
uint64_t linediff_count_lines(const unsigned char *data, size_t length);
/* Lines removed plus lines added by a minimal line diff (a line includes its "\n", so "x" and
 * "x\n" differ, as do "x\r\n" and "x\n"). bounds NULL: the defaults above. *exact is false
 * when a bound gave the fallback. -1 (errno ENOMEM) when memory runs out. */
int linediff_lines(const unsigned char *a, size_t na, const unsigned char *b, size_t nb,
                   const struct linediff_bounds *bounds, uint64_t *changed, bool *exact);
/* Bytes that differ: positions of the common length that differ, plus the length difference. */
uint64_t linediff_bytes(const unsigned char *a, size_t na, const unsigned char *b, size_t nb);
/* The cost of old -> new (an added file: old empty; a removed one: new empty): lines when both
 * are text, else bytes; *binary says which. -1 (ENOMEM) as above. */
int linediff_cost(const unsigned char *old, size_t n_old, const unsigned char *new_, size_t n_new,
                  uint64_t *cost, bool *binary);

#endif
