/* Names of the protocol's enums, as shown by the CLI and written in JSON. */
#include <stdlib.h>
#include <string.h>

#include <cordon/backend.h>

const char *cordon_capability_name(enum cordon_capability cap) {
  switch (cap) {
  case CORDON_CAP_FILE_RW: return "file_rw";
  case CORDON_CAP_EXEC: return "exec";
  case CORDON_CAP_NETWORK: return "network";
  case CORDON_CAP_GPU: return "gpu";
  case CORDON_CAP_SNAPSHOT: return "snapshot";
  case CORDON_CAP_PERSISTENT_VOLUMES: return "persistent_volumes";
  case CORDON_CAP_CALLER_STDIO: return "caller_stdio";
  }
  return "unknown";
}

const char *cordon_tier_name(enum cordon_isolation_tier tier) {
  static const char *const names[] = {"none", "process", "container", "vm"};
  return (unsigned)tier < 4 ? names[tier] : "unknown";
}

static const char *const egress_names[] = {"none", "loopback", "restricted", "open"};

const char *cordon_egress_name(enum cordon_egress egress) {
  return (unsigned)egress < 4 ? egress_names[egress] : "unknown";
}

int cordon_egress_parse(const char *name, enum cordon_egress *out) {
  for (unsigned i = 0; i < 4; i++) {
    if (strcmp(name, egress_names[i]) == 0) {
      *out = (enum cordon_egress)i;
      return 0;
    }
  }
  return -1;
}

const char *cordon_file_kind_name(enum cordon_file_kind kind) {
  static const char *const names[] = {"file", "directory", "symlink", "other"};
  return (unsigned)kind < 4 ? names[kind] : "unknown";
}

void cordon_dirents_free(struct cordon_dirent *entries, size_t count) {
  for (size_t i = 0; entries && i < count; i++)
    free(entries[i].name);
  free(entries);
}
