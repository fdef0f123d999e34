/* Policy features: what a manifest asks for and what a backend enforces. Pure: the library's
 * one check (session.c) and the CLI's messages both come from here, so a backend never sees a
 * request it would silently ignore. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cordon/backend.h>

static const char *const feature_names[CORDON_FEATURE_COUNT] = {
    "read_only_paths", "hidden_paths", "host_grants", "memory",   "pids",         "cpu",
    "nofile",          "fsize",        "tmp_size",    "net_none", "net_loopback", "net_restricted",
};

const char *cordon_feature_name(enum cordon_policy_feature feature) {
  for (unsigned i = 0; i < CORDON_FEATURE_COUNT; i++)
    if ((uint32_t)feature == 1u << i)
      return feature_names[i];
  return "unknown";
}

static bool non_empty(const char *const *list) {
  return list && list[0];
}

uint32_t cordon_policy_features(const struct cordon_policy *p) {
  uint32_t f = 0;
  const struct cordon_limits *l = &p->limits;
  if (non_empty(p->read_only))
    f |= CORDON_FEATURE_READ_ONLY_PATHS;
  if (non_empty(p->hidden))
    f |= CORDON_FEATURE_HIDDEN_PATHS;
  if (non_empty(p->allow_ro))
    f |= CORDON_FEATURE_HOST_GRANTS;
  if (l->memory_bytes)
    f |= CORDON_FEATURE_MEMORY;
  if (l->pids)
    f |= CORDON_FEATURE_PIDS;
  if (l->cpus != 0) /* a negative or NaN value is a request too: the backend refuses it */
    f |= CORDON_FEATURE_CPU;
  if (l->nofile)
    f |= CORDON_FEATURE_NOFILE;
  if (l->fsize_bytes && l->fsize_bytes != CORDON_LIMIT_UNLIMITED) /* unlimited asks for nothing */
    f |= CORDON_FEATURE_FSIZE;
  if (l->tmp_bytes)
    f |= CORDON_FEATURE_TMP_SIZE;
  switch (p->egress) {
  case CORDON_EGRESS_NONE: f |= CORDON_FEATURE_NET_NONE; break;
  case CORDON_EGRESS_LOOPBACK: f |= CORDON_FEATURE_NET_LOOPBACK; break;
  case CORDON_EGRESS_RESTRICTED: f |= CORDON_FEATURE_NET_RESTRICTED; break;
  case CORDON_EGRESS_OPEN: break;
  default: f |= CORDON_FEATURE_NET_NONE; /* unknown: the strictest reading, never open */
  }
  return f;
}

uint32_t cordon_backend_unenforced(const struct cordon_backend *b, const struct cordon_policy *p) {
  return cordon_policy_features(p) & ~b->enforces;
}

/* loopback where the backend enforces it, so that a test suite's local server works the same on
 * every confining backend; else the strictest class it enforces (fail closed), open only for a
 * backend that enforces none. */
enum cordon_egress cordon_backend_default_egress(const struct cordon_backend *b) {
  if (b->enforces & CORDON_FEATURE_NET_LOOPBACK)
    return CORDON_EGRESS_LOOPBACK;
  if (b->enforces & CORDON_FEATURE_NET_NONE)
    return CORDON_EGRESS_NONE;
  if (b->enforces & CORDON_FEATURE_NET_RESTRICTED)
    return CORDON_EGRESS_RESTRICTED;
  return CORDON_EGRESS_OPEN;
}

uint32_t cordon_backend_egress_offered(const struct cordon_backend *b) {
  uint32_t mask = 0;
  if (b->enforces & CORDON_FEATURE_NET_NONE)
    mask |= 1u << CORDON_EGRESS_NONE;
  if (b->enforces & CORDON_FEATURE_NET_LOOPBACK)
    mask |= 1u << CORDON_EGRESS_LOOPBACK;
  if (b->enforces & CORDON_FEATURE_NET_RESTRICTED)
    mask |= 1u << CORDON_EGRESS_RESTRICTED;
  if (b->capabilities & CORDON_CAP_NETWORK)
    mask |= 1u << CORDON_EGRESS_OPEN;
  return mask;
}

char *cordon_features_describe(uint32_t mask) {
  size_t size = 1;
  for (unsigned i = 0; i < CORDON_FEATURE_COUNT; i++)
    if (mask & (1u << i))
      size += strlen(feature_names[i]) + 2;
  char *out = calloc(1, size);
  if (!out)
    return NULL;
  for (unsigned i = 0; i < CORDON_FEATURE_COUNT; i++)
    if (mask & (1u << i)) {
      if (*out)
        strcat(out, ", ");
      strcat(out, feature_names[i]);
    }
  return out;
}
