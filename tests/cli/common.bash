# Shared by the CLI bats files that `load common`: a scratch project per test, its removal with
# whatever sessions a failed test left, and whether a backend can run here, so that every file
# skips a backend it cannot use with the same reason. $CORDON is the binary under test.

# Why `cordon backends` calls backend $1 unavailable ("REASON", quoted as its --json gives
# it); empty when it is available. Asked in a scratch project of its own, removed afterwards.
backend_unavailable_reason() {
  local scratch why
  scratch=$(mktemp -d "${TMPDIR:-/tmp}/cordon-backends.XXXXXX")
  why=$(CORDON_PROJECT=$scratch "$CORDON" backends --json 2>&1 | tr -d '\n' |
    grep -o "\"name\": \"$1\"[^}]*" | grep -o '"unavailable_reason": "[^"]*"' || true)
  rm -rf "$scratch"
  [ -z "$why" ] || echo "${why#*: }"
}

# For setup_file: for each backend named, export NAME_SKIP (NS_SKIP, DOCKER_SKIP), the reason
# it cannot run here (unset when it can): asked once per file rather than once per test.
backends_check_once() {
  local name why
  for name in "$@"; do
    why=$(backend_unavailable_reason "$name")
    [ -z "$why" ] || export "${name^^}_SKIP=$name backend unavailable: $why"
  done
}

# In a test (or setup): skip it with the reason backends_check_once found for backend $1.
need_backend() {
  local var="${1^^}_SKIP"
  [ -z "${!var:-}" ] || skip "${!var}"
}
need_ns() { need_backend ns; }
need_docker() { need_backend docker; }

# A fresh project for one test: $PROJECT (cordon-$1.XXXXXX in $TMPDIR), also CORDON_PROJECT,
# and the working directory.
project_enter() {
  PROJECT=$(mktemp -d "${TMPDIR:-/tmp}/cordon-$1.XXXXXX")
  export CORDON_PROJECT=$PROJECT
  cd "$PROJECT"
}

# Destroy the sessions a failed test left in its project: their sandboxes and containers would
# outlive the directory otherwise.
project_destroy_sessions() {
  [ -n "${PROJECT:-}" ] || return 0
  local id
  for id in $(ls "$PROJECT/.cordon/sessions" 2>/dev/null); do
    CORDON_PROJECT=$PROJECT "$CORDON" session destroy "$id" >/dev/null 2>&1 || true
  done
}

# Leave and remove the test's project, its leftover sessions first.
project_leave() {
  [ -n "${PROJECT:-}" ] || return 0
  cd /
  project_destroy_sessions
  rm -rf "$PROJECT"
}

# One booted microvm session (qemu monitor, TCG unless KVM works) for a whole bats file, as
# booting costs seconds: call microvm_session_setup_file NAME from setup_file (it exports
# $PROJECT, $SESSION, or MICROVM_SKIP with the reason the qemu monitor cannot run here),
# microvm_session_setup from setup (skips, or fails when the boot failed) and
# microvm_session_teardown_file from teardown_file.
microvm_session_setup_file() {
  export CORDON_MICROVM_MONITOR=qemu
  local why
  why=$(backend_unavailable_reason microvm)
  [ -z "$why" ] || { export MICROVM_SKIP="microvm (qemu) unavailable: $why"; return 0; }
  PROJECT=$(mktemp -d "${TMPDIR:-/tmp}/cordon-$1.XXXXXX")
  export PROJECT CORDON_PROJECT=$PROJECT CORDON_KEY_DIR=$PROJECT/keys
  SESSION=$(cd "$PROJECT" && "$CORDON" session create --backend microvm --monitor qemu)
  export SESSION
}

microvm_session_setup() {
  [ -z "${MICROVM_SKIP:-}" ] || skip "$MICROVM_SKIP"
  [ -n "${SESSION:-}" ] || false
}

microvm_session_teardown_file() {
  [ -n "${PROJECT:-}" ] || return 0
  project_destroy_sessions
  rm -rf "$PROJECT"
}

# `cordon serve ARGS...` in the background ($SERVER its pid), waited for (generously: start-up
# under load); $ADDR is what it listens on ("unix:PATH" or "http://127.0.0.1:PORT"). The output
# files exist before the server starts: its redirections happen in the background child, which
# may not have run yet when the loop first reads serve.out.
serve_start() {
  : >serve.out
  : >serve.err
  "$CORDON" serve "$@" >serve.out 2>serve.err &
  SERVER=$!
  local i
  for i in $(seq 200); do
    ADDR=$(sed -n 's/^cordon serve: listening on //p' serve.out)
    [ -n "$ADDR" ] && return 0
    kill -0 "$SERVER" 2>/dev/null || break
    sleep 0.1
  done
  cat serve.err >&2
  return 1
}

# The v1 lines of /proc/$1/cgroup ("N:controllers:/path"), sorted; the unified line (0::) is
# left out: the runner puts runsc in a cgroup of its own there, to kill its tree.
v1_cgroups() {
  grep -v '^0::' /proc/"$1"/cgroup | sort
}

# Each PID is in the v1 cgroups of the test itself (what runsc must not move its processes out of).
in_callers_v1_cgroups() {
  local mine pid theirs
  mine=$(v1_cgroups $$)
  for pid in "$@"; do
    theirs=$(v1_cgroups "$pid")
    echo "caller: $mine"
    echo "$pid: $theirs"
    [ "$theirs" = "$mine" ] || return 1
  done
}
