#!/usr/bin/env bats
# `cordon plan run PLAN.yaml [--dry-run] [--json]`: stages in order over the project
# directory, the first failing step's exit code, --dry-run's placement, refusals at their line
# and column before anything runs, and an ns stage with net: none really cut off. $CORDON is
# the binary under test; every test runs in a fresh project.

bats_require_minimum_version 1.5.0

setup() {
  PROJECT=$(mktemp -d "${TMPDIR:-/tmp}/cordon-plan-cli.XXXXXX")
  chmod 755 "$PROJECT"
  export CORDON_PROJECT=$PROJECT
  export CORDON_KEY_DIR=$PROJECT/keys
  export XDG_STATE_HOME=$PROJECT/state
  export CORDON_QUIET=1
  mkdir -p "$CORDON_KEY_DIR" "$XDG_STATE_HOME/cordon" "$PROJECT/.cordon"
  chmod 700 "$CORDON_KEY_DIR"
  cd "$PROJECT"
}

teardown() {
  cd /
  [ -z "${SERVER:-}" ] || kill "$SERVER" 2>/dev/null || true
  rm -rf "$PROJECT"
}

ns_or_skip() {
  "$CORDON" run --backend ns -- true >/dev/null 2>&1 || skip "ns backend unavailable here"
}

@test "plan --help shows the file's shape; cordon --help lists plan run" {
  run $CORDON plan run --help
  [ "$status" -eq 0 ]
  [[ "$output" == *"stages:"* && "$output" == *"--dry-run"* && "$output" == *"/bin/sh -c LINE"* ]]
  run $CORDON --help
  [[ "$output" == *"plan run PLAN.yaml"* ]]
  run $CORDON plan run
  [ "$status" -eq 2 ]
  run $CORDON plan walk x.yaml
  [ "$status" -eq 2 ]
}

@test "stages run in order over the project directory; a run: step says it is a shell line" {
  cat > plan.yaml <<'YAML'
stages:
  - name: make
    steps:
      - [sh, -c, "echo made > made.txt"]
  - name: use
    steps:
      - argv: [cat, made.txt]
      - run: "echo from-a-shell $((6 * 7))"
YAML
  run --separate-stderr $CORDON plan run plan.yaml
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "made" ]
  [ "${lines[1]}" = "from-a-shell 42" ]
  [[ "$stderr" == *"stage use (worktree), step 2: /bin/sh -c 'echo from-a-shell \$((6 * 7))'   (run: a shell line)"* ]]
  [ "$(cat made.txt)" = "made" ]
}

@test "the first failing step ends the plan with its exit code; later steps and stages never run" {
  cat > plan.yaml <<'YAML'
stages:
  - name: one
    steps:
      - [touch, first]
      - run: "exit 7"
      - [touch, second]
  - name: two
    steps:
      - [touch, third]
YAML
  run $CORDON plan run plan.yaml
  [ "$status" -eq 7 ]
  [[ "$output" == *"a step exited 7"* ]]
  [ -f first ]
  [ ! -e second ]
  [ ! -e third ]
  # --json: the steps that ran, their codes; the steps' output went to stderr.
  run --separate-stderr $CORDON plan run plan.yaml --json
  [ "$status" -eq 7 ]
  python3 -c '
import json, sys
d = json.loads(sys.argv[1])
assert d["exit_code"] == 7 and d["completed"] is False, d
steps = d["stages"][0]["steps"]
assert [s["exit_code"] for s in steps] == [0, 7], d
assert steps[1]["shell"] is True and steps[1]["argv"][:2] == ["/bin/sh", "-c"], d
assert len(d["stages"]) == 1, d
' "$output"
}

@test "a step not found exits 127; a step past its timeout exits 124" {
  printf 'stages:\n  - name: a\n    steps:\n      - [/no/such/program]\n' > missing.yaml
  run -127 $CORDON plan run missing.yaml
  cat > slow.yaml <<'YAML'
stages:
  - name: slow
    sandbox:
      backend: worktree
      options: {timeout_seconds: 1}
    steps:
      - [sleep, 30]
YAML
  SECONDS=0
  run -124 $CORDON plan run slow.yaml
  [ "$SECONDS" -lt 25 ]
}

@test "--dry-run prints each stage's placement and runs nothing" {
  cat > plan.yaml <<'YAML'
stages:
  - name: build
    steps:
      - [touch, ran]
  - name: check
    sandbox:
      backend: ns
      options:
        memory_mb: 256
        timeout_seconds: 60
        net: none
        read_only: [src]
        hidden: [secrets]
        env: {CI: "1"}
    steps:
      - run: "touch ran-too"
YAML
  run $CORDON plan run plan.yaml --dry-run
  [ "$status" -eq 0 ]
  [[ "$output" == *"stage 1: build"* ]]
  [[ "$output" == *"backend         worktree (no sandbox: block)"* ]]
  [[ "$output" == *"backend         ns"* ]]
  [[ "$output" == *"memory_mb       256"* ]]
  [[ "$output" == *"net             none"* ]]
  [[ "$output" == *"read_only       src"* ]]
  [[ "$output" == *"hidden          secrets"* ]]
  [[ "$output" == *"env             CI=1"* ]]
  [[ "$output" == *"/bin/sh -c 'touch ran-too'   (run: a shell line)"* ]]
  [ ! -e ran ] && [ ! -e ran-too ]
  run $CORDON plan run plan.yaml --dry-run --json
  [ "$status" -eq 0 ]
  python3 -c '
import json, sys
d = json.loads(sys.argv[1])
a, b = d["stages"]
assert a["backend"] == "worktree" and a["sandbox"] is False, a
assert b["options"]["net"] == "none" and b["options"]["memory_mb"] == 256, b
assert b["options"]["read_only"] == ["src"] and b["options"]["env"] == ["CI=1"], b
assert b["steps"] == [{"argv": ["/bin/sh", "-c", "touch ran-too"], "shell": True}], b
' "$output"
  [ ! -e ran ] && [ ! -e ran-too ]
  # No session was made: the event log is empty.
  [ ! -s .cordon/events.jsonl ]
}

# Each bad plan has a good first stage that would leave a mark: refused before anything runs.
refused() {
  local expect=$1
  { printf 'stages:\n  - name: first\n    steps:\n      - [touch, ran]\n'; cat; } > bad.yaml
  run $CORDON plan run bad.yaml
  [ "$status" -eq 2 ] || { echo "status $status: $output"; return 1; }
  [[ "$output" == *"bad.yaml:$expect"* ]] || { echo "got: $output"; return 1; }
  [ ! -e ran ]
}

@test "bad plans are refused with the file, line and column, before anything runs" {
  refused "5:5: unknown key 'nmae' in a stage" <<'YAML'
  - nmae: second
    steps: [[true]]
YAML
  refused "8:28: memory_mb must be a whole number" <<'YAML'
  - name: second
    sandbox:
      backend: ns
      options: {memory_mb: plenty}
    steps: [[true]]
YAML
  refused "7:16: stage second: " <<'YAML'
  - name: second
    sandbox:
      backend: no-such-backend
    steps: [[true]]
YAML
  [[ "$output" == *"no-such-backend"* ]]
  refused "7:9: a step is an argv list" <<'YAML'
  - name: second
    steps:
      - make test
YAML
  refused "6:43: net must be one of" <<'YAML'
  - name: second
    sandbox: {backend: ns, options: {net: some}}
    steps: [[true]]
YAML
  refused "7:1: not valid YAML" <<'YAML'
  - name: second
    steps: [[true
YAML
  run $CORDON plan run no-such.yaml
  [ "$status" -eq 3 ]
}

@test "an ns stage with net: none is confined: no route out, read_only and hidden hold" {
  ns_or_skip
  command -v python3 >/dev/null || skip "python3 missing"
  # A listener on the host's loopback: the worktree stage reaches it, the ns stage must not.
  python3 -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(16)
open(sys.argv[1], "w").write(str(s.getsockname()[1]))
while True:
    c, _ = s.accept(); c.sendall(b"hello\n"); c.close()
' "$PROJECT/port" &
  SERVER=$!
  for _ in $(seq 1 50); do [ -s "$PROJECT/port" ] && break; sleep 0.1; done
  port=$(cat "$PROJECT/port")
  mkdir src && echo source > src/file && echo s3cret > secret.txt
  cat > probe.py <<'PY'
import socket, sys
try:
    c = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
    print("reached:", c.recv(16).decode().strip())
except OSError as e:
    print("blocked:", e.__class__.__name__)
PY
  cat > plan.yaml <<YAML
stages:
  - name: open
    steps:
      - [python3, probe.py, "$port"]
  - name: closed
    sandbox:
      backend: ns
      options:
        net: none
        read_only: [src]
        hidden: [secret.txt]
    steps:
      - [python3, probe.py, "$port"]
      - [python3, -c, "import socket; print([n for _, n in socket.if_nameindex()])"]
      - run: "if echo x > src/file; then echo wrote; else echo read-only; fi"
      - run: "cat secret.txt; echo hidden-size=\$(wc -c < secret.txt)"
YAML
  run --separate-stderr $CORDON plan run plan.yaml
  echo "$output" "$stderr"
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "reached: hello" ]
  [[ "${lines[1]}" == "blocked: "* ]]
  [ "${lines[2]}" = "['lo']" ]
  [ "${lines[3]}" = "read-only" ]
  [ "${lines[4]}" = "hidden-size=0" ]
  [ "$(cat src/file)" = "source" ]
  [ "$(cat secret.txt)" = "s3cret" ]
}

@test "a plan's sessions are in the event log: create, each exec, destroy" {
  printf 'stages:\n  - name: a\n    steps:\n      - [true]\n      - [sh, -c, "exit 3"]\n' > plan.yaml
  run $CORDON plan run plan.yaml
  [ "$status" -eq 3 ]
  run python3 -c '
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
assert [e["verb"] for e in ev] == ["create", "exec", "exec", "destroy"], ev
assert [e.get("exit_code") for e in ev if e["verb"] == "exec"] == [0, 3], ev
' .cordon/events.jsonl
  [ "$status" -eq 0 ]
}

@test "a docker stage works over the same project directory (skips without an engine)" {
  [ -n "${DOCKER_HOST:-}" ] || [ -S /var/run/docker.sock ] || skip "no Docker engine (DOCKER_HOST)"
  "$CORDON" run --backend docker -- true >/dev/null 2>&1 || skip "docker backend unavailable here"
  cat > plan.yaml <<'YAML'
stages:
  - name: host
    steps:
      - [sh, -c, "echo from-host > a.txt"]
  - name: container
    sandbox:
      backend: docker
      options: {memory_mb: 256}
    steps:
      - [cat, a.txt]
      - run: "echo from-docker > b.txt; exit 4"
YAML
  run --separate-stderr $CORDON plan run plan.yaml
  [ "$status" -eq 4 ]
  [ "${lines[0]}" = "from-host" ]
  [ "$(cat b.txt)" = "from-docker" ]
}
