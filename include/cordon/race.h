/* cordon — ranking race candidates (TOPSIS).
 *
 * A profile names the axes a candidate is scored on, each with a weight and a direction
 * (benefit: more is better; cost: less is better). cordon_rank_topsis() is a pure function:
 * candidates are first sorted by key (the task id), so the result never depends on the order
 * in which they finished; each column is divided by its L2 norm (a column of zeros stays 0);
 * weights are divided by their sum; the ideal and anti-ideal take the best and worst weighted
 * value of each axis; a candidate's closeness is d- / (d+ + d-), its distances to them (0 when
 * both are 0, as for a single candidate); the result is ordered by closeness, highest first,
 * ties by key. Duplicate keys, missing or unknown scores and non-finite values are errors.
 *
 * The default profile has no wall-clock axis: correctness (benefit, weight 3), cost (cost, 1),
 * reversibility (benefit, 1). */
#ifndef CORDON_RACE_H
#define CORDON_RACE_H

#include <stddef.h>

#include <cordon/error.h>

#ifdef __cplusplus
extern "C" {
#endif

enum cordon_axis_direction {
  CORDON_AXIS_BENEFIT = 0,
  CORDON_AXIS_COST,
};

struct cordon_rank_axis {
  const char *name;
  double weight; /* finite, >= 0; the profile's weights must have a positive sum */
  enum cordon_axis_direction direction;
};

struct cordon_rank_profile {
  const char *name;
  const struct cordon_rank_axis *axes;
  size_t n_axes;
};

struct cordon_rank_score {
  const char *axis;
  double value; /* finite */
};

struct cordon_rank_candidate {
  const char *key;                        /* the task id; unique, non-empty */
  const struct cordon_rank_score *scores; /* exactly one per profile axis, any order */
  size_t n_scores;
};

struct cordon_rank_result {
  char *key;
  size_t input_index; /* the candidate's position in the caller's array */
  double closeness;   /* in [0, 1] */
  double distance_ideal;
  double distance_anti;
};

CORDON_API const struct cordon_rank_profile *cordon_rank_default_profile(void);
CORDON_API const char *cordon_axis_direction_name(enum cordon_axis_direction direction);

/* Check a profile: at least one axis, unique non-empty names, valid directions, finite
 * non-negative weights with a positive finite sum. */
CORDON_API int cordon_rank_profile_check(const struct cordon_rank_profile *profile,
                                         struct cordon_error **err);

/* Rank count (>= 1) candidates; *results (count entries, best first) is freed with
 * cordon_rank_results_free. */
CORDON_API int cordon_rank_topsis(const struct cordon_rank_profile *profile,
                                  const struct cordon_rank_candidate *candidates, size_t count,
                                  struct cordon_rank_result **results, struct cordon_error **err);
CORDON_API void cordon_rank_results_free(struct cordon_rank_result *results, size_t count);

/* A profile as JSON: {"axes":[{"direction":"benefit","name":...,"weight":...},...],
 * "method":"topsis","name":...}. Parsing is strict (unknown members refused) and bounded;
 * the result is checked and freed with cordon_rank_profile_free. to_json gives canonical JSON
 * (RFC 8785), the form bound into selection receipts. */
CORDON_API int cordon_rank_profile_parse(const char *text, size_t length,
                                         struct cordon_rank_profile **out,
                                         struct cordon_error **err);
CORDON_API void cordon_rank_profile_free(struct cordon_rank_profile *profile);
CORDON_API int cordon_rank_profile_to_json(const struct cordon_rank_profile *profile, char **out,
                                           struct cordon_error **err);

#ifdef __cplusplus
}
#endif
#endif
