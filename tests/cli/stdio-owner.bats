#!/usr/bin/env bats
# No sandbox changes the owner of the caller's stdio (docs/security.md, "The caller's stdio").
# runsc hands the stdio of a sandbox it starts to gVisor's nobody (fchown to 65534): the agent's
# gvisor mechanism once gave runsc the caller's own fds, and the host's /dev/null (a test
# runner's stdin), the user's terminal and any file stdio was redirected to became nobody's.
# Here each stdio is a file owned by root in a directory of the test's own (a copy of the null
# device among them, a named pipe, a terminal under script(1)); after the run, each has the
# owner it had, and what went through it went through. The same holds for every mechanism and
# for `cordon run` on every backend that runs here. Skips, saying why, without root or runsc.

bats_require_minimum_version 1.5.0

setup() {
  [ "$(id -u)" -eq 0 ] || skip "needs root (a sandbox that chowns needs CAP_CHOWN to do harm)"
  local root=${AGENT_TEST_ROOT:-/var/tmp}
  case "$root" in /tmp | /tmp/*) root=/var/tmp ;; esac # landlock refuses a project under /tmp
  PROJECT=$(mktemp -d "$root/cordon-stdio-owner.XXXXXX")
  IO=$(mktemp -d "$root/cordon-stdio-io.XXXXXX")
  export CORDON_PROJECT=$PROJECT CORDON_QUIET=1 CORDON_KEY_DIR=$PROJECT.keys
  echo 'typed by the caller' >"$IO/in"
  : >"$IO/out"
  : >"$IO/err"
  mknod -m 666 "$IO/null" c 1 3 # the host's null device, at a path of the test's own
  chown 0:0 "$IO"/*
  cd "$PROJECT"
}

teardown() {
  cd /
  [ -z "${PROJECT:-}" ] || rm -rf "$PROJECT" "$PROJECT.keys"
  [ -z "${IO:-}" ] || rm -rf "$IO"
}

gvisor_or_skip() {
  command -v runsc >/dev/null || skip "runsc (gVisor) is not installed"
  "$CORDON" agent --help >/dev/null 2>&1 || skip "this build has no 'cordon agent' verb"
}

owners() {
  stat -c '%u:%g %n' "$@"
}

# From inside: try to give the sandbox's stdio to the sandbox's own user, to 1000 and to nobody
# (each refused or confined to a view of the sandbox's own), then use it.
ATTACK='for id in "$(id -u)" 1000 65534; do chown "$id:$id" /proc/self/fd/0 /proc/self/fd/1 /proc/self/fd/2; done 2>/dev/null; '

@test "agent --mechanism gvisor: stdin, stdout and stderr files keep their owner, and carry the bytes" {
  gvisor_or_skip
  before=$(owners "$IO/in" "$IO/out" "$IO/err")
  status=0
  "$CORDON" agent --mechanism gvisor --project "$PROJECT" -- \
    sh -c "$ATTACK"'cat; echo to-stdout; echo to-stderr >&2; exit 6' <"$IO/in" >"$IO/out" 2>"$IO/err" ||
    status=$?
  [ "$status" -eq 6 ]
  [ "$(owners "$IO/in" "$IO/out" "$IO/err")" = "$before" ]
  [ "$(cat "$IO/out")" = "$(printf 'typed by the caller\nto-stdout')" ]
  [ "$(cat "$IO/err")" = to-stderr ]
}

@test "agent --mechanism gvisor: a null device as stdio keeps its owner (a test runner's stdin)" {
  gvisor_or_skip
  before=$(owners "$IO/null")
  run "$CORDON" agent --mechanism gvisor --project "$PROJECT" -- sh -c 'cat; echo done' \
    <"$IO/null" 2>"$IO/null"
  [ "$status" -eq 0 ]
  [ "$output" = done ]
  [ "$(owners "$IO/null")" = "$before" ]
}

@test "agent --mechanism gvisor: a named pipe as stdin keeps its owner and delivers its bytes" {
  gvisor_or_skip
  mkfifo -m 600 "$IO/fifo"
  before=$(owners "$IO/fifo")
  (echo 'through the fifo' >"$IO/fifo") &
  run "$CORDON" agent --mechanism gvisor --project "$PROJECT" -- cat <"$IO/fifo"
  wait
  [ "$status" -eq 0 ]
  [ "$output" = 'through the fifo' ]
  [ "$(owners "$IO/fifo")" = "$before" ]
}

@test "agent --mechanism gvisor: the caller's terminal keeps its owner; the agent still has a terminal" {
  gvisor_or_skip
  command -v script >/dev/null || skip "script(1) is not installed: no terminal to run under"
  # script(1) gives the run a terminal of its own; inside, $(tty) names it, and its owner is
  # read after the agent has ended.
  run script -qec "\"$CORDON\" agent --mechanism gvisor --project \"$PROJECT\" -- \
    sh -c 'test -t 0 && test -t 1 && echo agent-has-a-terminal'; echo rc=\$?; \
    stat -c 'terminal-owner=%u:%g' \$(tty)" /dev/null <"$IO/null"
  [ "$status" -eq 0 ]
  [[ "$output" == *agent-has-a-terminal* ]]
  [[ "$output" == *rc=0* ]]
  [[ "$output" == *terminal-owner=0:0* ]]
}

@test "every other agent mechanism that runs here leaves a root-owned stdio's owner alone" {
  "$CORDON" agent --help >/dev/null 2>&1 || skip "this build has no 'cordon agent' verb"
  ran=0
  for m in ns bwrap landlock; do
    before=$(owners "$IO/in" "$IO/out" "$IO/null")
    "$CORDON" agent --mechanism "$m" --project "$PROJECT" -- sh -c 'cat; echo x' \
      <"$IO/in" >"$IO/out" 2>"$IO/null" || continue # a mechanism this host lacks
    ran=$((ran + 1))
    [ "$(owners "$IO/in" "$IO/out" "$IO/null")" = "$before" ]
  done
  [ "$ran" -gt 0 ] || skip "no agent mechanism runs on this host"
}

@test "cordon run on each backend that runs here: a root-owned stdio keeps its owner, also when the command chowns it" {
  ran=0
  for b in ns gvisor docker; do
    before=$(owners "$IO/in" "$IO/out" "$IO/null")
    "$CORDON" run --backend "$b" -- sh -c "$ATTACK"'cat; echo x' \
      <"$IO/in" >"$IO/out" 2>"$IO/null" || continue # a backend this host lacks
    ran=$((ran + 1))
    [ "$(owners "$IO/in" "$IO/out" "$IO/null")" = "$before" ]
  done
  [ "$ran" -gt 0 ] || skip "no backend runs on this host"
}
