/* TOPSIS ranking of race candidates (see include/cordon/race.h). Pure: no I/O, no clock, no
 * randomness; the same input gives the same bytes out on any host. Profiles as JSON are read
 * here too, strictly, since a profile file is operator input bound into receipts. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <cordon/race.h>

#include "base/cleanup.h"
#include "crypto/jcs.h"

#define PROFILE_MAX_BYTES (64u * 1024u)
#define PROFILE_MAX_AXES 64u

/* The values are finite (checked on entry): plain comparisons do, and keep libm's fmax/fmin
 * (and with them libm itself) out of the CLI. */
static inline double larger(double a, double b) {
  return a > b ? a : b;
}

static inline double smaller(double a, double b) {
  return a < b ? a : b;
}

static const struct cordon_rank_axis default_axes[] = {
    {"correctness", 3.0, CORDON_AXIS_BENEFIT},
    {"cost", 1.0, CORDON_AXIS_COST},
    {"reversibility", 1.0, CORDON_AXIS_BENEFIT},
};

static const struct cordon_rank_profile default_profile = {"default", default_axes,
                                                           ARRAY_SIZE(default_axes)};

const struct cordon_rank_profile *cordon_rank_default_profile(void) {
  return &default_profile;
}

const char *cordon_axis_direction_name(enum cordon_axis_direction direction) {
  switch (direction) {
  case CORDON_AXIS_BENEFIT: return "benefit";
  case CORDON_AXIS_COST: return "cost";
  }
  return "unknown";
}

int cordon_rank_profile_check(const struct cordon_rank_profile *profile,
                              struct cordon_error **err) {
  if (!profile || !profile->axes || profile->n_axes == 0)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "ranking profile: no axes");
  if (profile->cost_rule && strcmp(profile->cost_rule, CORDON_COST_RULE))
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "ranking profile: unknown cost rule");
  double sum = 0;
  for (size_t j = 0; j < profile->n_axes; j++) {
    const struct cordon_rank_axis *a = &profile->axes[j];
    if (!a->name || !*a->name)
      return cordon_error_set(err, CORDON_ERR_INVALID, 0, "ranking profile: axis %zu has no name",
                              j + 1);
    for (size_t k = 0; k < j; k++)
      if (!strcmp(profile->axes[k].name, a->name))
        return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                                "ranking profile: axis \"%s\" appears twice", a->name);
    if (a->direction != CORDON_AXIS_BENEFIT && a->direction != CORDON_AXIS_COST)
      return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                              "ranking profile: axis \"%s\" has no valid direction", a->name);
    if (!isfinite(a->weight) || a->weight < 0)
      return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                              "ranking profile: axis \"%s\" weight must be finite and >= 0",
                              a->name);
    sum += a->weight;
  }
  if (!(sum > 0) || !isfinite(sum))
    return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                            "ranking profile: the weights must have a positive, finite sum");
  return 0;
}

void cordon_rank_results_free(struct cordon_rank_result *results, size_t count) {
  if (!results)
    return;
  for (size_t i = 0; i < count; i++)
    free(results[i].key);
  free(results);
}

static int compare_by_key(const void *a, const void *b, void *base) {
  const struct cordon_rank_candidate *c = base;
  return strcmp(c[*(const size_t *)a].key, c[*(const size_t *)b].key);
}

static int compare_results(const void *pa, const void *pb) {
  const struct cordon_rank_result *a = pa, *b = pb;
  if (a->closeness > b->closeness)
    return -1;
  if (a->closeness < b->closeness)
    return 1;
  return strcmp(a->key, b->key);
}

/* Fill row (n_axes values, in profile order) from a candidate's named scores. */
static int candidate_row(const struct cordon_rank_profile *profile,
                         const struct cordon_rank_candidate *c, double *row,
                         struct cordon_error **err) {
  if (c->n_scores && !c->scores)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "candidate %s: no scores", c->key);
  for (size_t s = 0; s < c->n_scores; s++) {
    const struct cordon_rank_score *score = &c->scores[s];
    size_t j = 0;
    while (j < profile->n_axes && (!score->axis || strcmp(profile->axes[j].name, score->axis)))
      j++;
    if (j == profile->n_axes)
      return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                              "candidate %s: score for unknown axis \"%s\"", c->key,
                              score->axis ? score->axis : "(null)");
    for (size_t t = 0; t < s; t++)
      if (!strcmp(c->scores[t].axis, score->axis))
        return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                                "candidate %s: two scores for axis \"%s\"", c->key, score->axis);
    if (!isfinite(score->value))
      return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                              "candidate %s: score for \"%s\" is not a finite number", c->key,
                              score->axis);
    row[j] = score->value;
  }
  if (c->n_scores != profile->n_axes) {
    for (size_t j = 0; j < profile->n_axes; j++) {
      bool found = false;
      for (size_t s = 0; s < c->n_scores && !found; s++)
        found = !strcmp(c->scores[s].axis, profile->axes[j].name);
      if (!found)
        return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                                "candidate %s: missing score for axis \"%s\"", c->key,
                                profile->axes[j].name);
    }
  }
  return 0;
}

int cordon_rank_topsis(const struct cordon_rank_profile *profile,
                       const struct cordon_rank_candidate *candidates, size_t count,
                       struct cordon_rank_result **results, struct cordon_error **err) {
  if (cordon_rank_profile_check(profile, err) < 0)
    return -1;
  if (count == 0 || !candidates)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "ranking: no candidates");
  size_t m = profile->n_axes;
  if (count > SIZE_MAX / m / sizeof(double))
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "ranking: too many candidates");
  for (size_t i = 0; i < count; i++)
    if (!candidates[i].key || !*candidates[i].key)
      return cordon_error_set(err, CORDON_ERR_INVALID, 0, "ranking: candidate %zu has no key",
                              i + 1);

  _cleanup_free_ size_t *order = calloc(count, sizeof(*order));
  _cleanup_free_ double *v = calloc(count * m, sizeof(*v));
  _cleanup_free_ double *ideal = calloc(m, sizeof(*ideal));
  _cleanup_free_ double *anti = calloc(m, sizeof(*anti));
  _cleanup_free_ double *weight = calloc(m, sizeof(*weight));
  if (!order || !v || !ideal || !anti || !weight)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "ranking");

  /* Sort by task id first: every sum below then runs in the same order whatever the order of
   * completion, so the floating-point result is the same bit for bit. */
  for (size_t i = 0; i < count; i++)
    order[i] = i;
  qsort_r(order, count, sizeof(*order), compare_by_key, (void *)candidates);
  for (size_t i = 1; i < count; i++)
    if (!strcmp(candidates[order[i - 1]].key, candidates[order[i]].key))
      return cordon_error_set(err, CORDON_ERR_INVALID, 0, "ranking: duplicate candidate %s",
                              candidates[order[i]].key);
  for (size_t i = 0; i < count; i++)
    if (candidate_row(profile, &candidates[order[i]], v + i * m, err) < 0)
      return -1;

  double weight_sum = 0;
  for (size_t j = 0; j < m; j++)
    weight_sum += profile->axes[j].weight;
  for (size_t j = 0; j < m; j++)
    weight[j] = profile->axes[j].weight / weight_sum;

  for (size_t j = 0; j < m; j++) {
    /* L2 norm, scaled by the largest magnitude so that squares cannot overflow. */
    double scale = 0;
    for (size_t i = 0; i < count; i++)
      scale = larger(scale, fabs(v[i * m + j]));
    double norm = 0;
    if (scale > 0) {
      double sum = 0;
      for (size_t i = 0; i < count; i++) {
        double x = v[i * m + j] / scale;
        sum += x * x;
      }
      norm = scale * sqrt(sum);
    }
    for (size_t i = 0; i < count; i++)
      v[i * m + j] = norm > 0 ? weight[j] * (v[i * m + j] / norm) : 0; /* a zero column stays 0 */
    double hi = v[j], lo = v[j];
    for (size_t i = 1; i < count; i++) {
      hi = larger(hi, v[i * m + j]);
      lo = smaller(lo, v[i * m + j]);
    }
    bool benefit = profile->axes[j].direction == CORDON_AXIS_BENEFIT;
    ideal[j] = benefit ? hi : lo;
    anti[j] = benefit ? lo : hi;
  }

  struct cordon_rank_result *out = calloc(count, sizeof(*out));
  if (!out)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "ranking");
  for (size_t i = 0; i < count; i++) {
    double plus = 0, minus = 0;
    for (size_t j = 0; j < m; j++) {
      double a = v[i * m + j] - ideal[j], b = v[i * m + j] - anti[j];
      plus += a * a;
      minus += b * b;
    }
    plus = sqrt(plus);
    minus = sqrt(minus);
    const struct cordon_rank_candidate *c = &candidates[order[i]];
    out[i].key = strdup(c->key);
    if (!out[i].key) {
      cordon_rank_results_free(out, count);
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "ranking");
    }
    out[i].input_index = order[i];
    out[i].distance_ideal = plus;
    out[i].distance_anti = minus;
    out[i].closeness = plus + minus > 0 ? minus / (plus + minus) : 0;
  }
  qsort(out, count, sizeof(*out), compare_results);
  *results = out;
  return 0;
}

/* ---- profiles as JSON --------------------------------------------------------------------- */

struct owned_profile {
  struct cordon_rank_profile profile; /* first: freed through a pointer to it */
  struct cordon_rank_axis *axes;
  char *name;
};

void cordon_rank_profile_free(struct cordon_rank_profile *profile) {
  if (!profile)
    return;
  struct owned_profile *p = (struct owned_profile *)profile;
  for (size_t j = 0; j < p->profile.n_axes; j++)
    free((char *)p->axes[j].name);
  free(p->axes);
  free(p->name);
  free(p);
}

static bool only_members(const json_t *object, const char *const *names, size_t n,
                         const char **unknown) {
  const char *key;
  json_t *value;
  json_object_foreach((json_t *)object, key, value) {
    bool ok = false;
    for (size_t i = 0; i < n && !ok; i++)
      ok = !strcmp(key, names[i]);
    if (!ok) {
      *unknown = key;
      return false;
    }
  }
  return true;
}

static bool plain_string(const json_t *v) {
  return json_is_string(v) && json_string_length(v) > 0 && json_string_length(v) <= 256 &&
         strlen(json_string_value(v)) == json_string_length(v);
}

int cordon_rank_profile_parse(const char *text, size_t length, struct cordon_rank_profile **out,
                              struct cordon_error **err) {
  json_t *root = NULL;
  if (jcs_parse(text, length, PROFILE_MAX_BYTES, "ranking profile", &root, err) < 0)
    return -1;
  int r = -1;
  const char *unknown = NULL;
  struct owned_profile *p = NULL;
  static const char *const top[] = {"axes", "method", "name", "cost_rule"};
  static const char *const axis_members[] = {"direction", "name", "weight"};
  if (!json_is_object(root)) {
    cordon_error_set(err, CORDON_ERR_INVALID, 0, "ranking profile: not a JSON object");
    goto out;
  }
  if (!only_members(root, top, ARRAY_SIZE(top), &unknown)) {
    cordon_error_set(err, CORDON_ERR_INVALID, 0, "ranking profile: unknown member \"%s\"", unknown);
    goto out;
  }
  json_t *method = json_object_get(root, "method"), *name = json_object_get(root, "name");
  json_t *axes = json_object_get(root, "axes");
  if (method && (!json_is_string(method) || strcmp(json_string_value(method), "topsis"))) {
    cordon_error_set(err, CORDON_ERR_INVALID, 0, "ranking profile: method must be \"topsis\"");
    goto out;
  }
  if (name && !plain_string(name)) {
    cordon_error_set(err, CORDON_ERR_INVALID, 0, "ranking profile: bad name");
    goto out;
  }
  json_t *cost_rule = json_object_get(root, "cost_rule");
  if (cost_rule &&
      (!json_is_string(cost_rule) || strcmp(json_string_value(cost_rule), CORDON_COST_RULE))) {
    cordon_error_set(err, CORDON_ERR_INVALID, 0,
                     "ranking profile: cost_rule must be \"" CORDON_COST_RULE "\"");
    goto out;
  }
  if (!json_is_array(axes) || json_array_size(axes) == 0 ||
      json_array_size(axes) > PROFILE_MAX_AXES) {
    cordon_error_set(err, CORDON_ERR_INVALID, 0,
                     "ranking profile: \"axes\" must be a list of 1 to %u axes", PROFILE_MAX_AXES);
    goto out;
  }
  size_t n = json_array_size(axes);
  if (!(p = calloc(1, sizeof(*p))) || !(p->axes = calloc(n, sizeof(*p->axes))) ||
      !(p->name = strdup(name ? json_string_value(name) : "custom"))) {
    cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "ranking profile");
    goto out;
  }
  p->profile.name = p->name;
  p->profile.axes = p->axes;
  p->profile.cost_rule = cost_rule ? CORDON_COST_RULE : NULL;
  for (size_t j = 0; j < n; j++) {
    json_t *a = json_array_get(axes, j);
    if (!json_is_object(a) || !only_members(a, axis_members, ARRAY_SIZE(axis_members), &unknown)) {
      cordon_error_set(err, CORDON_ERR_INVALID, 0,
                       "ranking profile: axis %zu is not an object of direction, name, weight",
                       j + 1);
      goto out;
    }
    json_t *an = json_object_get(a, "name"), *ad = json_object_get(a, "direction");
    json_t *aw = json_object_get(a, "weight");
    if (!plain_string(an) || !json_is_string(ad) || !json_is_number(aw)) {
      cordon_error_set(err, CORDON_ERR_INVALID, 0,
                       "ranking profile: axis %zu needs a name, a direction and a weight", j + 1);
      goto out;
    }
    const char *dir = json_string_value(ad);
    if (strcmp(dir, "benefit") && strcmp(dir, "cost")) {
      cordon_error_set(err, CORDON_ERR_INVALID, 0,
                       "ranking profile: axis %zu direction must be \"benefit\" or \"cost\"",
                       j + 1);
      goto out;
    }
    if (!(p->axes[j].name = strdup(json_string_value(an)))) {
      cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "ranking profile");
      goto out;
    }
    p->profile.n_axes = j + 1;
    p->axes[j].direction = strcmp(dir, "cost") ? CORDON_AXIS_BENEFIT : CORDON_AXIS_COST;
    p->axes[j].weight = json_number_value(aw);
  }
  if (cordon_rank_profile_check(&p->profile, err) < 0)
    goto out;
  *out = &p->profile;
  p = NULL;
  r = 0;
out:
  cordon_rank_profile_free(p ? &p->profile : NULL);
  json_decref(root);
  return r;
}

int cordon_rank_profile_to_json(const struct cordon_rank_profile *profile, char **out,
                                struct cordon_error **err) {
  if (cordon_rank_profile_check(profile, err) < 0)
    return -1;
  json_t *axes = json_array();
  json_t *root = json_pack("{s:o, s:s, s:s}", "axes", axes, "method", "topsis", "name",
                           profile->name && *profile->name ? profile->name : "custom");
  if (root && profile->cost_rule &&
      json_object_set_new(root, "cost_rule", json_string(profile->cost_rule)) < 0) {
    json_decref(root);
    root = NULL;
  }
  if (!root)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "ranking profile");
  for (size_t j = 0; j < profile->n_axes; j++) {
    const struct cordon_rank_axis *a = &profile->axes[j];
    if (json_array_append_new(axes, json_pack("{s:s, s:s, s:f}", "direction",
                                              cordon_axis_direction_name(a->direction), "name",
                                              a->name, "weight", a->weight)) < 0) {
      json_decref(root);
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "ranking profile");
    }
  }
  int r = jcs_dump(root, out, NULL, err);
  json_decref(root);
  return r;
}
