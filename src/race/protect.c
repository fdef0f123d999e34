/* A race's protected paths (race/protect.h): the lists --ro, --hide and --protect give, checked
 * with the same functions `run` uses (confine/policy.c); whether a candidate changed anything
 * under them; and the tree its judge runs on, the candidate's with the protected paths put back
 * as the base has them, stored as a snapshot so the judge is resumed from it like any other.
 * Everything but race_protect_store is pure. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/strv-json.h"
#include "base/strv.h"
#include "confine/policy.h"
#include "race/protect.h"
#include "snapshot/internal.h"

/* ---- the lists ------------------------------------------------------------------------------ */

static int compare_strings(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* One list normalised, sorted and without duplicates; no entry may cover another. */
static int normalise_list(const char *const *in, const char *what, char ***out,
                          struct cordon_error **err) {
  _cleanup_(strv_freep) char **list = calloc(1, sizeof(char *));
  if (!list)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "%s", what);
  for (size_t i = 0; in && in[i]; i++) {
    char *path = NULL;
    if (confine_normalize_workspace_path(in[i], what, &path, err) < 0)
      return -1;
    if (strv_push_take(&list, path) < 0) {
      free(path);
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "%s", what);
    }
  }
  size_t n = strv_length((const char *const *)list), kept = 0;
  qsort(list, n, sizeof(*list), compare_strings);
  for (size_t i = 0; i < n; i++) {
    if (kept && !strcmp(list[kept - 1], list[i])) {
      free(list[i]);
      continue;
    }
    list[kept++] = list[i];
  }
  list[kept] = NULL;
  /* The overlap rule of `run`: within a list, no path covers another. */
  if (confine_check_workspace_lists((const char *const *)list, NULL, err) < 0)
    return cordon_error_prefix(err, "%s", what);
  *out = steal_ptr(&list);
  return 0;
}

int race_protect_init(struct race_protect *p, const char *const *read_only,
                      const char *const *hidden, const char *const *protect,
                      struct cordon_error **err) {
  memset(p, 0, sizeof(*p));
  if (normalise_list(read_only, "read-only path", &p->read_only, err) < 0 ||
      normalise_list(hidden, "hidden path", &p->hidden, err) < 0 ||
      normalise_list(protect, "protected path", &p->protect, err) < 0 ||
      confine_check_workspace_lists((const char *const *)p->read_only,
                                    (const char *const *)p->hidden, err) < 0) {
    race_protect_clear(p);
    return -1;
  }
  return 0;
}

void race_protect_clear(struct race_protect *p) {
  strv_free(p->read_only);
  strv_free(p->hidden);
  strv_free(p->protect);
  memset(p, 0, sizeof(*p));
}

bool race_protect_any(const struct race_protect *p) {
  return (p->read_only && p->read_only[0]) || (p->hidden && p->hidden[0]) ||
         (p->protect && p->protect[0]);
}

static bool list_covers(char *const *list, const char *path) {
  for (size_t i = 0; list && list[i]; i++)
    if (confine_path_covers(list[i], path))
      return true;
  return false;
}

bool race_protect_covers(const struct race_protect *p, const char *path) {
  /* The root ("") is never protected: the normaliser refuses a list entry naming it. */
  return *path && (list_covers(p->read_only, path) || list_covers(p->hidden, path) ||
                   list_covers(p->protect, path));
}

/* ---- a candidate's tree against the base (pure) ------------------------------------------ */

static int compare_canonical(const void *pa, const void *pb) {
  const struct cordon_snapshot_entry *a = *(const struct cordon_snapshot_entry *const *)pa;
  const struct cordon_snapshot_entry *b = *(const struct cordon_snapshot_entry *const *)pb;
  return snap_path_compare(a->path, a->path_length, b->path, b->path_length);
}

/* The covered (or, with covered false, the uncovered) entries, in canonical order. */
static const struct cordon_snapshot_entry **select_sorted(const struct race_protect *p,
                                                          const struct cordon_snapshot_entry *e,
                                                          size_t n, bool covered, size_t *count) {
  const struct cordon_snapshot_entry **v = calloc(n ? n : 1, sizeof(*v));
  *count = 0;
  if (!v)
    return NULL;
  for (size_t i = 0; i < n; i++)
    if (race_protect_covers(p, e[i].path) == covered)
      v[(*count)++] = &e[i];
  qsort(v, *count, sizeof(*v), compare_canonical);
  return v;
}

bool race_entry_same(const struct cordon_snapshot_entry *a, const struct cordon_snapshot_entry *b) {
  if (a->kind != b->kind || a->mode != b->mode || a->size != b->size ||
      strcmp(a->digest, b->digest) || a->major != b->major || a->minor != b->minor)
    return false;
  if (!a->target || !b->target)
    return a->target == b->target;
  return !strcmp(a->target, b->target);
}

const char *race_protect_first_change(const struct race_protect *p,
                                      const struct cordon_snapshot_entry *base, size_t n_base,
                                      const struct cordon_snapshot_entry *terminal,
                                      size_t n_terminal) {
  size_t na = 0, nb = 0;
  _cleanup_free_ const struct cordon_snapshot_entry **a = select_sorted(p, base, n_base, true, &na);
  _cleanup_free_ const struct cordon_snapshot_entry **b =
      select_sorted(p, terminal, n_terminal, true, &nb);
  if (!a || !b) /* out of memory: say something changed rather than pass a candidate unseen */
    return na ? base[0].path : n_terminal ? terminal[0].path : "";
  for (size_t i = 0, j = 0; i < na || j < nb;) {
    int c = i == na ? 1 : j == nb ? -1 : compare_canonical(&a[i], &b[j]);
    if (c < 0)
      return a[i]->path; /* removed */
    if (c > 0)
      return b[j]->path; /* added */
    if (!race_entry_same(a[i], b[j]))
      return a[i]->path; /* modified */
    i++;
    j++;
  }
  return NULL;
}

int race_protect_compose(const struct race_protect *p, const struct cordon_snapshot_entry *base,
                         size_t n_base, const struct cordon_snapshot_entry *terminal,
                         size_t n_terminal, const struct cordon_snapshot_entry ***out,
                         size_t *n_out, struct cordon_error **err) {
  size_t na = 0, nb = 0;
  _cleanup_free_ const struct cordon_snapshot_entry **from_base =
      select_sorted(p, base, n_base, true, &na);
  _cleanup_free_ const struct cordon_snapshot_entry **from_candidate =
      select_sorted(p, terminal, n_terminal, false, &nb);
  const struct cordon_snapshot_entry **v = calloc(na + nb ? na + nb : 1, sizeof(*v));
  if (!from_base || !from_candidate || !v) {
    free(v);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "the judge's tree");
  }
  /* Two sorted, disjoint lists: merge them. */
  size_t i = 0, j = 0, n = 0;
  while (i < na || j < nb)
    v[n++] = i == na                                                    ? from_candidate[j++]
             : j == nb                                                  ? from_base[i++]
             : compare_canonical(&from_base[i], &from_candidate[j]) < 0 ? from_base[i++]
                                                                        : from_candidate[j++];
  *out = v;
  *n_out = n;
  return 0;
}

/* ---- storing the judge's tree ------------------------------------------------------------- */

int race_protect_store(struct cordon_cas *cas, const struct cordon_snapshot_entry *const *entries,
                       size_t n, char id[CORDON_DIGEST_HEX_SIZE], struct cordon_error **err) {
  _cleanup_free_ struct snap_entry *e = calloc(n ? n : 1, sizeof(*e));
  if (!e)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "the judge's tree");
  for (size_t i = 0; i < n; i++) {
    const struct cordon_snapshot_entry *x = entries[i];
    e[i] = (struct snap_entry){.path = x->path,
                               .path_len = x->path_length,
                               .kind = (char)x->kind,
                               .mode = (uint16_t)x->mode,
                               .size = x->size,
                               .target = x->target,
                               .major = x->major,
                               .minor = x->minor};
    if (x->kind == CORDON_SNAPSHOT_FILE && cas_unhex(x->digest, e[i].digest) < 0)
      return cordon_error_set(err, CORDON_ERR_INVALID, 0, "the judge's tree: %s has no digest",
                              x->path);
  }
  unsigned char digest[CAS_DIGEST_LEN];
  /* Encoding checks the order and that every entry's parent is a directory before it. */
  if (snap_store_manifest(cas, e, n, digest, err) < 0)
    return cordon_error_prefix(err, "the judge's tree");
  cas_hex(digest, id);
  return 0;
}

/* ---- the receipt's record of the lists ---------------------------------------------------- */

json_t *race_protect_json(const struct race_protect *p) {
  return json_pack("{s:o, s:o, s:o}", "hidden", strv_to_json((const char *const *)p->hidden),
                   "protect", strv_to_json((const char *const *)p->protect), "read_only",
                   strv_to_json((const char *const *)p->read_only));
}

const char *race_protect_json_check(const json_t *v) {
  static const char *const names[] = {"hidden", "protect", "read_only"};
  if (!json_is_object(v) || json_object_size(v) != 3)
    return "protected_paths must be exactly {hidden, protect, read_only}";
  size_t total = 0;
  for (size_t k = 0; k < 3; k++) {
    const json_t *list = json_object_get(v, names[k]);
    if (!json_is_array(list))
      return "protected_paths must be exactly {hidden, protect, read_only}, each a list";
    const char *previous = NULL;
    for (size_t i = 0; i < json_array_size(list); i++) {
      const json_t *s = json_array_get(list, i);
      const char *path = json_string_value(s);
      if (!path || strlen(path) != json_string_length(s))
        return "a protected path must be a string";
      char *normal = NULL;
      struct cordon_error *e = NULL;
      bool ok = confine_normalize_workspace_path(path, "protected path", &normal, &e) == 0 &&
                !strcmp(normal, path);
      free(normal);
      cordon_error_free(e);
      if (!ok)
        return "a protected path must be a normalised workspace-relative path";
      if (previous && strcmp(previous, path) >= 0)
        return "a protected_paths list is not in strictly increasing order";
      previous = path;
      total++;
    }
  }
  return total ? NULL : "protected_paths names no path (a race without one has none)";
}

static int list_from_json(const json_t *list, char ***out) {
  *out = calloc(1, sizeof(char *));
  for (size_t i = 0; *out && i < json_array_size(list); i++)
    if (strv_push(out, json_string_value(json_array_get(list, i))) < 0)
      return -1;
  return *out ? 0 : -1;
}

int race_protect_from_json(const json_t *v, struct race_protect *p, struct cordon_error **err) {
  memset(p, 0, sizeof(*p));
  if (list_from_json(json_object_get(v, "hidden"), &p->hidden) < 0 ||
      list_from_json(json_object_get(v, "protect"), &p->protect) < 0 ||
      list_from_json(json_object_get(v, "read_only"), &p->read_only) < 0) {
    race_protect_clear(p);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "receipt");
  }
  return 0;
}
