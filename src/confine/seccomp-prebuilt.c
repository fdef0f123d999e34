/* The seccomp program compiled at build time (seccomp-gen; see seccomp.h). */
#include "confine/seccomp.h"
#include "confine/seccomp-bpf.h"

const struct confine_seccomp_program *confine_seccomp_prebuilt(void) {
  static const struct confine_seccomp_program program = {
      .filter = (struct sock_filter *)confine_seccomp_generated,
      .length = sizeof(confine_seccomp_generated) / sizeof(confine_seccomp_generated[0]),
  };
  return &program;
}
