/* The registry of pools as a projection of the audit chain: pool.registered, pool.updated and
 * pool.retired events, replayed in order, give every pool's current body (by hash) and state.
 * There is no other record to drift from the chain. pool_registry_apply is pure; the replay
 * (pool_registry_load) only walks the log. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/cleanup.h"
#include "crypto/digest.h"
#include "crypto/jcs.h"
#include "pool/internal.h"
#include "pool/pool.h"

void pool_registry_clear(struct pool_registry *reg) {
  if (!reg)
    return;
  for (size_t i = 0; i < reg->n_entries; i++)
    free(reg->entries[i].name);
  free(reg->entries);
  memset(reg, 0, sizeof(*reg));
}

/* The index where name is or would go (entries sorted by name). */
static size_t position(const struct pool_registry *reg, const char *name, bool *found) {
  size_t lo = 0, hi = reg->n_entries;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = strcmp(reg->entries[mid].name, name);
    if (c == 0) {
      *found = true;
      return mid;
    }
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  *found = false;
  return lo;
}

const struct pool_entry *pool_registry_find(const struct pool_registry *reg, const char *name) {
  bool found = false;
  size_t i = position(reg, name, &found);
  return found ? &reg->entries[i] : NULL;
}

int pool_registry_apply(struct pool_registry *reg, uint64_t index, const char *event,
                        const char *details_json, struct cordon_error **err) {
  bool registered = strcmp(event, "pool.registered") == 0;
  bool updated = strcmp(event, "pool.updated") == 0;
  bool retired = strcmp(event, "pool.retired") == 0;
  if (!registered && !updated && !retired)
    return 0;
  json_auto_t *details = NULL;
  if (jcs_parse(details_json, strlen(details_json), 0, "audit details", &details, NULL) < 0 ||
      !json_is_object(details))
    return cordon_error_set(err, CORDON_ERR_INTEGRITY, 0, "audit entry %llu (%s): bad details",
                            (unsigned long long)index, event);
  const char *name = json_string_value(json_object_get(details, "name"));
  const char *hash = json_string_value(json_object_get(details, "pool_hash"));
  if (!name || !pool_name_valid(name) || !hash || !crypto_is_sha256_hex(hash) ||
      json_object_size(details) != 2)
    return cordon_error_set(err, CORDON_ERR_INTEGRITY, 0,
                            "audit entry %llu (%s): details must be {name, pool_hash}",
                            (unsigned long long)index, event);
  bool found = false;
  size_t at = position(reg, name, &found);
  struct pool_entry *e = found ? &reg->entries[at] : NULL;
  if (registered) {
    if (e && e->state == POOL_ACTIVE)
      return cordon_error_set(err, CORDON_ERR_INTEGRITY, 0,
                              "audit entry %llu: pool %s registered while active",
                              (unsigned long long)index, name);
    if (!e) {
      struct pool_entry *grown = realloc(reg->entries, (reg->n_entries + 1) * sizeof(*grown));
      if (!grown)
        return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "pool registry");
      reg->entries = grown;
      memmove(&grown[at + 1], &grown[at], (reg->n_entries - at) * sizeof(*grown));
      reg->n_entries++;
      e = &grown[at];
      memset(e, 0, sizeof(*e));
      if (!(e->name = strdup(name))) {
        memmove(&grown[at], &grown[at + 1], (reg->n_entries - at - 1) * sizeof(*grown));
        reg->n_entries--;
        return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "pool registry");
      }
    }
    e->state = POOL_ACTIVE;
  } else if (updated) {
    if (!e || e->state != POOL_ACTIVE)
      return cordon_error_set(err, CORDON_ERR_INTEGRITY, 0,
                              "audit entry %llu: update of pool %s, which is not active",
                              (unsigned long long)index, name);
  } else {
    if (!e || e->state != POOL_ACTIVE)
      return cordon_error_set(err, CORDON_ERR_INTEGRITY, 0,
                              "audit entry %llu: retirement of pool %s, which is not active",
                              (unsigned long long)index, name);
    if (strcmp(e->pool_hash, hash) != 0)
      return cordon_error_set(err, CORDON_ERR_INTEGRITY, 0,
                              "audit entry %llu: pool %s retired with another body's hash",
                              (unsigned long long)index, name);
    e->state = POOL_RETIRED;
  }
  if (!retired) {
    memcpy(e->pool_hash, hash, 65);
    e->version++;
  }
  e->audit_index = index;
  return 0;
}

static int apply_entry(const struct cordon_audit_entry *entry, void *userdata) {
  struct {
    struct pool_registry *reg;
    struct cordon_error **err;
  } *ctx = userdata;
  return pool_registry_apply(ctx->reg, entry->index, entry->event, entry->details_json, ctx->err);
}

int pool_registry_load(struct cordon_audit_log *log, struct pool_registry *reg,
                       struct cordon_error **err) {
  memset(reg, 0, sizeof(*reg));
  struct {
    struct pool_registry *reg;
    struct cordon_error **err;
  } ctx = {reg, err};
  if (cordon_audit_foreach_event(log, "pool.", apply_entry, &ctx, err) < 0) {
    pool_registry_clear(reg);
    return -1;
  }
  return 0;
}
