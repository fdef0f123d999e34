#!/usr/bin/env bats
# The project's event log (.cordon/events.jsonl) and `cordon events`: one line per session
# create, destroy and exec from every verb, failures too; rotation by size; --follow across a
# rotation; a log that cannot be written never fails the operation. $CORDON is the binary
# under test; every test runs in a fresh project.

bats_require_minimum_version 1.5.0

setup() {
  PROJECT=$(mktemp -d "${TMPDIR:-/tmp}/cordon-events-cli.XXXXXX")
  export CORDON_PROJECT=$PROJECT
  export CORDON_KEY_DIR=$PROJECT/keys
  export XDG_STATE_HOME=$PROJECT/state
  export CORDON_QUIET=1
  mkdir -p "$CORDON_KEY_DIR" "$XDG_STATE_HOME/cordon" "$PROJECT/.cordon"
  chmod 700 "$CORDON_KEY_DIR"
  cd "$PROJECT"
  LOG=$PROJECT/.cordon/events.jsonl
}

teardown() {
  cd /
  [ -z "${FOLLOWER:-}" ] || kill "$FOLLOWER" 2>/dev/null || true
  local id
  for id in $("$CORDON" session list 2>/dev/null | awk '{print $1}'); do
    "$CORDON" session destroy "$id" >/dev/null 2>&1 || true
  done
  rm -rf "$PROJECT"
}

# Every line of a file is one JSON object of the documented shape.
check_lines() {
  python3 - "$1" <<'PY'
import json, re, sys
for n, line in enumerate(open(sys.argv[1], encoding="utf-8"), 1):
    e = json.loads(line)
    keys = {"time", "verb", "backend", "session", "duration_seconds"}
    assert keys <= set(e), (n, line)
    assert set(e) <= keys | {"exit_code", "failed"}, (n, line)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", e["time"]), line
    assert e["verb"] in ("create", "destroy", "exec"), line
    assert ("exit_code" in e) == (e["verb"] == "exec"), line
    assert isinstance(e["duration_seconds"], float) and e["duration_seconds"] >= 0, line
PY
}

@test "events --help describes the verb and its options" {
  run $CORDON events --help
  [ "$status" -eq 0 ]
  [[ "$output" == *"--follow"* && "$output" == *"--since TIME"* && "$output" == *"--json"* ]]
  run $CORDON --help
  [[ "$output" == *"events [--follow] [--json]"* ]]
  run $CORDON events --bogus
  [ "$status" -eq 2 ]
}

@test "run logs create, exec (with its exit code) and destroy of one session" {
  run $CORDON run --backend worktree -- sh -c 'exit 3'
  [ "$status" -eq 3 ]
  check_lines "$LOG"
  [ "$(wc -l < "$LOG")" -eq 3 ]
  run python3 -c '
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
assert [e["verb"] for e in ev] == ["create", "exec", "destroy"], ev
assert len({e["session"] for e in ev}) == 1 and len(ev[0]["session"]) == 16, ev
assert all(e["backend"] == "worktree" for e in ev), ev
assert ev[1]["exit_code"] == 3, ev
assert not any("failed" in e for e in ev), ev
' "$LOG"
  [ "$status" -eq 0 ]
  run $CORDON events
  [ "$status" -eq 0 ]
  [ "${#lines[@]}" -eq 3 ]
  [[ "${lines[1]}" =~ ^20[0-9-]+T[0-9:.]+Z\ +exec\ +worktree\ +[0-9a-f]{16}\ +3\ +[0-9.]+s$ ]]
  run $CORDON events --json
  [ "$status" -eq 0 ]
  [ "$output" = "$(cat "$LOG")" ]
}

@test "session verbs log too; an exec that cannot start and a failed create are recorded" {
  id=$($CORDON session create --backend worktree)
  run -127 $CORDON session exec "$id" -- /no/such/command
  [ "$status" -eq 127 ]
  run $CORDON session exec "$id" -- true
  [ "$status" -eq 0 ]
  run $CORDON session destroy "$id"
  [ "$status" -eq 0 ]
  # A create the backend refuses: a failure line without a session.
  run $CORDON session create --backend worktree --repo "$PROJECT/not-a-repo"
  [ "$status" -ne 0 ]
  check_lines "$LOG"
  run python3 -c '
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
assert [e["verb"] for e in ev] == ["create", "exec", "exec", "destroy", "create"], ev
assert [e.get("exit_code") for e in ev[1:3]] == [127, 0], ev
assert ev[-1].get("failed") is True and ev[-1]["session"] == "", ev
assert ev[3]["session"] == sys.argv[2], ev
' "$LOG" "$id"
  [ "$status" -eq 0 ]
}

@test "the log holds no environment values, arguments or output" {
  run $CORDON run --backend worktree --env SECRET_TOKEN=hunter2-value -- echo hunter2-output
  [ "$status" -eq 0 ]
  ! grep -q hunter2 "$LOG"
  ! grep -q SECRET_TOKEN "$LOG"
}

@test "the log rotates at its bound; events reads the rotated file first" {
  export CORDON_EVENTS_MAX_BYTES=1000
  for i in 1 2 3 4 5 6; do
    $CORDON run --backend worktree -- true
  done
  [ -f "$LOG.1" ]
  [ "$(stat -c %s "$LOG")" -le 1000 ]
  [ "$(stat -c %s "$LOG.1")" -le 1000 ]
  check_lines "$LOG"
  check_lines "$LOG.1"
  run $CORDON events --json
  [ "$status" -eq 0 ]
  [ "$output" = "$(cat "$LOG.1" "$LOG")" ]
}

@test "--since keeps the events at or after a time; a bad time is a usage error" {
  $CORDON run --backend worktree -- true
  run $CORDON events --since 1h
  [ "${#lines[@]}" -eq 3 ]
  run $CORDON events --since 2099-01-01T00:00:00Z
  [ "$status" -eq 0 ]
  [ -z "$output" ]
  run $CORDON events --since yesterday
  [ "$status" -eq 2 ]
  [[ "$output" == *"--since 'yesterday'"* ]]
}

@test "events --follow prints new lines and survives a rotation" {
  export CORDON_EVENTS_MAX_BYTES=2000 # six runs' lines pass it once
  $CORDON events --follow --json > "$PROJECT/followed" 2>&1 &
  FOLLOWER=$!
  sleep 0.5 # it has opened the log (or found none)
  for i in 1 2 3 4 5 6; do
    $CORDON run --backend worktree -- sh -c "exit $i" || true
  done
  [ -f "$LOG.1" ]
  # Generous: the follower polls, and the machine may be loaded.
  for _ in $(seq 1 100); do
    [ "$(wc -l < "$PROJECT/followed")" -ge 18 ] && break
    sleep 0.2
  done
  kill "$FOLLOWER"
  FOLLOWER=
  [ "$(wc -l < "$PROJECT/followed")" -eq 18 ]
  check_lines "$PROJECT/followed"
  run python3 -c '
import json, sys
codes = [json.loads(l).get("exit_code") for l in open(sys.argv[1])]
assert [c for c in codes if c is not None] == [1, 2, 3, 4, 5, 6], codes
' "$PROJECT/followed"
  [ "$status" -eq 0 ]
}

@test "a log that cannot be written warns once and never fails the operation" {
  mkdir "$LOG" # a directory where the file should be
  run $CORDON run --backend worktree -- sh -c 'exit 5'
  [ "$status" -eq 5 ]
  [ "$(grep -c 'event log is not written' <<< "$output")" -eq 1 ]
  run $CORDON events
  [ "$status" -ne 0 ]
}

@test "a torn last line is skipped by events" {
  $CORDON run --backend worktree -- true
  printf '{"time": "2026-12-02T08:00:00.000Z", "verb": "ex' >> "$LOG"
  run $CORDON events --json
  [ "$status" -eq 0 ]
  [ "${#lines[@]}" -eq 3 ]
}
