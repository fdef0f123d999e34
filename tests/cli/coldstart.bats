#!/usr/bin/env bats
# A cold `cordon run` does not wait for the file system to free its session (issue 15, cold
# start): the session's directory leaves .cordon/sessions before cordon exits (moved into
# .cordon/trash) and a remover of its own empties it afterwards, even when whatever ran cordon
# kills its process group as soon as cordon is gone; `cordon gc` removes what a remover could
# not. $CORDON is the binary under test.

bats_require_minimum_version 1.5.0
load common

setup_file() {
  backends_check_once ns
}

setup() {
  project_enter coldstart
}

teardown() {
  project_leave
}

# Wait up to 30 s for .cordon/trash to hold nothing (the remover runs at nice 19: a loaded
# host gives it little time).
trash_emptied() {
  for _ in $(seq 300); do
    [ -z "$(ls -A .cordon/trash 2>/dev/null)" ] && return 0
    sleep 0.1
  done
  ls -laR .cordon/trash
  return 1
}

@test "run: the session is gone from .cordon/sessions at exit, and its tree from the trash soon after" {
  need_ns
  run "$CORDON" run -- sh -c 'mkdir -p a/b/c && echo data > a/b/c/f && chmod 500 a/b && echo ok'
  [ "$status" -eq 0 ]
  [ "$output" = ok ]
  [ -z "$(ls -A .cordon/sessions)" ]
  trash_emptied
  # The command's exit code is still cordon's.
  run "$CORDON" run -- sh -c 'exit 7'
  [ "$status" -eq 7 ]
  trash_emptied
}

@test "run: the remover survives a harness that kills cordon's process group when cordon exits" {
  need_ns
  command -v setsid >/dev/null || skip "setsid (util-linux) is not installed"
  # A process group of its own, killed whole (SIGKILL) right after cordon returns: what
  # cordon left in it dies.
  run setsid sh -c '"$0" run -- sh -c "mkdir -p d/e && echo x > d/e/f"; kill -KILL 0' "$CORDON"
  [ -z "$(ls -A .cordon/sessions)" ]
  trash_emptied
}

@test "run: nothing of the remover holds cordon's output open" {
  need_ns
  # $(...) returns when every writer of the pipe is gone: the remover closed its copies.
  out=$(timeout 20 "$CORDON" run -- echo hello)
  [ "$out" = hello ]
}

@test "gc: empties the trash a remover left" {
  need_ns
  mkdir -p .cordon/trash/0123456789abcdef/workspace/deep/er
  echo x > .cordon/trash/0123456789abcdef/workspace/deep/er/f
  chmod 500 .cordon/trash/0123456789abcdef/workspace/deep
  run "$CORDON" gc
  [ "$status" -eq 0 ]
  [ ! -e .cordon/trash/0123456789abcdef ]
  # --dry-run removes nothing.
  mkdir -p .cordon/trash/fedcba9876543210
  run "$CORDON" gc --dry-run
  [ "$status" -eq 0 ]
  [ -d .cordon/trash/fedcba9876543210 ]
}
