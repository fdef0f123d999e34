#!/usr/bin/env bats
# `cordon agent` (issue 18): the policy, failing closed, and the ns and bwrap mechanisms, tried
# from inside the agent (negative tests: what must fail does). $CORDON is the binary under test;
# every test makes a project of its own, with its key directory outside it.

bats_require_minimum_version 1.5.0

setup() {
  PROJECT=$(mktemp -d "${TMPDIR:-/tmp}/cordon-agent.XXXXXX")
  KEYS=$(mktemp -d "${TMPDIR:-/tmp}/cordon-agent-keys.XXXXXX")
  export CORDON_KEY_DIR=$KEYS/keys
  unset CORDON_PROJECT CORDON_SANDBOX CORDON_SANDBOX_ALLOW
  mkdir -p "$PROJECT/.cordon/agent-visible" "$PROJECT/secrets" "$PROJECT/docs"
  echo state >"$PROJECT/.cordon/state-file"
  echo brief >"$PROJECT/.cordon/agent-visible/brief.md"
  echo key >"$PROJECT/secrets/key"
  echo token >"$PROJECT/.env"
  echo spec >"$PROJECT/docs/spec.md"
  echo lock >"$PROJECT/lockfile"
  cd "$PROJECT"
}

teardown() {
  cd /
  rm -rf "$PROJECT" "$KEYS"
}

# The agent's probe: every line names a check and says ok (it held) or BAD (it did not).
probe() {
  cat <<'SH'
check() { if eval "$2" >/dev/null 2>&1; then echo "BAD $1"; else echo "ok $1"; fi; }
check read-state 'cat .cordon/state-file'
check list-state 'ls .cordon | grep -qv agent-visible'
check read-hidden-dir 'cat secrets/key'
check read-hidden-file 'grep -q token .env'
check write-ro-dir 'echo x > docs/spec.md'
check write-ro-file 'echo x > lockfile'
check new-in-ro-dir 'touch docs/new'
check write-hidden 'echo x > secrets/key'
check write-visible 'echo x > .cordon/agent-visible/brief.md'
check secret-env 'env | grep -q AGENT_TEST_SECRET'
[ "$(pwd)" = "$1" ] && echo "ok cwd" || echo "BAD cwd $(pwd)"
[ "$TMPDIR" = /tmp ] && [ "$TMP" = /tmp ] && [ "$TEMP" = /tmp ] && echo "ok tmpdir" || echo "BAD tmpdir"
echo written >agent-wrote
SH
}

agent_checks() {
  local mechanism=$1
  AGENT_TEST_SECRET=hunter2 run --separate-stderr "$CORDON" agent --mechanism "$mechanism" \
    --hide secrets --hide .env --ro docs --ro lockfile -- sh -c "$(probe)" probe "$PROJECT"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" != *BAD* ]]
  [ "$(grep -c '^ok ' <<<"$output")" -eq 12 ]
  # What the agent wrote is in the project; what it must not change is as it was.
  [ "$(cat agent-wrote)" = written ]
  [ "$(cat docs/spec.md)" = spec ]
  [ "$(cat lockfile)" = lock ]
  [ "$(cat secrets/key)" = key ]
  [ "$(cat .cordon/agent-visible/brief.md)" = brief ]
  [ ! -e docs/new ]
}

have_bwrap() {
  command -v bwrap >/dev/null || return 1
  bwrap --unshare-all --ro-bind / / true 2>/dev/null
}

@test "agent --help lists every option" {
  run "$CORDON" agent --help
  [ "$status" -eq 0 ]
  for o in --project --ro --hide --policy --allow-ro --env-allow --mechanism \
           --no-require-enforcement --net --tmp-size --print; do
    [[ "$output" == *"$o"* ]]
  done
}

@test "agent ns: hidden, read-only, state, env, cwd and writes hold from inside" {
  agent_checks ns
}

@test "agent ns: .cordon/agent-visible is readable, not writable" {
  run "$CORDON" agent --mechanism ns -- sh -c 'cat .cordon/agent-visible/brief.md'
  [ "$status" -eq 0 ]
  [ "$output" = brief ]
  # From inside: the rest of .cordon/ stays hidden, and nothing in or around agent-visible/
  # can be written, created, removed or renamed away.
  run --separate-stderr "$CORDON" agent --mechanism ns -- sh -c '
    check() { if eval "$2" >/dev/null 2>&1; then echo "BAD $1"; else echo "ok $1"; fi; }
    check read-state "cat .cordon/state-file"
    check list-state "ls -A .cordon | grep -vqx agent-visible"
    check write-visible "echo x > .cordon/agent-visible/brief.md"
    check create-visible "touch .cordon/agent-visible/new"
    check mkdir-visible "mkdir .cordon/agent-visible/dir"
    check remove-visible "rm -f .cordon/agent-visible/brief.md"
    check rename-in-visible "mv .cordon/agent-visible/brief.md .cordon/agent-visible/b2"
    check rename-visible-away "mv .cordon/agent-visible .cordon/moved"
    check rename-visible-out "mv .cordon/agent-visible visible"
    check rename-state-away "mv .cordon cordon-moved"
    check plant-in-state "touch .cordon/planted"'
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" != *BAD* ]]
  [ "$(grep -c '^ok ' <<<"$output")" -eq 11 ]
  [ "$(cat .cordon/agent-visible/brief.md)" = brief ]
  # (mv out of the mask copies what the agent may read anyway; the original stays.)
  [ ! -e .cordon/agent-visible/new ] && [ ! -e .cordon/planted ] && [ ! -e cordon-moved ]
  [ "$(cat .cordon/state-file)" = state ]
}

@test "agent bwrap: hidden, read-only, state, env, cwd and writes hold from inside" {
  have_bwrap || skip "bubblewrap is not installed or cannot make namespaces here"
  agent_checks bwrap
}

@test "agent bwrap: .cordon/agent-visible is readable, not writable" {
  have_bwrap || skip "bubblewrap is not installed or cannot make namespaces here"
  run "$CORDON" agent --mechanism bwrap -- sh -c \
    'cat .cordon/agent-visible/brief.md && ! touch .cordon/agent-visible/new 2>/dev/null'
  [ "$status" -eq 0 ]
  [ "$output" = brief ]
  [ ! -e .cordon/agent-visible/new ]
}

@test "agent: the working directory below the project is kept, --env-allow passes a name" {
  mkdir -p sub/dir
  cd sub/dir
  KEEP_ME=yes DROP_ME=no run "$CORDON" agent --mechanism ns --env-allow KEEP_ME -- \
    sh -c 'pwd; echo "keep=${KEEP_ME:-} drop=${DROP_ME:-}"'
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "$PROJECT/sub/dir" ]
  [ "${lines[1]}" = "keep=yes drop=" ]
}

@test "agent: the agent's exit code is cordon's" {
  run "$CORDON" agent --mechanism ns -- sh -c 'exit 42'
  [ "$status" -eq 42 ]
  if have_bwrap; then
    run "$CORDON" agent --mechanism bwrap -- sh -c 'exit 43'
    [ "$status" -eq 43 ]
  fi
}

@test "agent: --mechanism off exits 4 and never runs the agent" {
  for m in off 0 false no; do
    run --separate-stderr "$CORDON" agent --mechanism "$m" -- touch "$PROJECT/marker"
    [ "$status" -eq 4 ]
    [[ "$stderr" == *"enforcement is required"* ]]
    [ ! -e "$PROJECT/marker" ]
  done
  CORDON_SANDBOX=off run "$CORDON" agent -- touch "$PROJECT/marker"
  [ "$status" -eq 4 ]
  [ ! -e "$PROJECT/marker" ]
}

@test "agent: --no-require-enforcement --mechanism off runs, loudly, and is audited" {
  run --separate-stderr "$CORDON" agent --no-require-enforcement --mechanism off -- \
    touch "$PROJECT/marker"
  [ "$status" -eq 0 ]
  [[ "$stderr" == *"WARNING"*"UNCONFINED"* ]]
  [ -e "$PROJECT/marker" ]
  grep -q '"event":"agent.unconfined"' "$PROJECT"/.cordon/audit/audit-*.jsonl
  CORDON_PROJECT=$PROJECT run "$CORDON" audit verify
  [ "$status" -eq 0 ]
}

@test "agent: a start is audited with the mechanism and the policy's lists" {
  run "$CORDON" agent --mechanism ns --hide secrets --ro docs -- true
  [ "$status" -eq 0 ]
  line=$(grep '"event":"agent.start"' "$PROJECT"/.cordon/audit/audit-*.jsonl)
  [[ "$line" == *'"mechanism":"ns"'* ]]
  [[ "$line" == *'"hidden_dirs":[".cordon","secrets"]'* ]]
  [[ "$line" == *'"read_only":["docs"]'* ]]
}

@test "agent: a bogus mechanism exits 2 naming the accepted ones, flag or CORDON_SANDBOX" {
  run --separate-stderr "$CORDON" agent --mechanism bogus -- touch "$PROJECT/marker"
  [ "$status" -eq 2 ]
  [[ "$stderr" == *"bogus"*"auto, ns, bwrap, landlock, gvisor"* ]]
  CORDON_SANDBOX=bogus run --separate-stderr "$CORDON" agent -- touch "$PROJECT/marker"
  [ "$status" -eq 2 ]
  [[ "$stderr" == *"bogus"* ]]
  [ ! -e "$PROJECT/marker" ]
}

@test "agent: a missing hidden path is named, the agent not run" {
  run --separate-stderr "$CORDON" agent --mechanism ns --hide no-such-thing -- \
    touch "$PROJECT/marker"
  [ "$status" -ne 0 ]
  [[ "$stderr" == *"no-such-thing"* ]]
  [ ! -e "$PROJECT/marker" ]
}

@test "agent: --print bwrap shows the argv and runs nothing" {
  run "$CORDON" agent --print bwrap --hide secrets --hide .env --ro docs --tmp-size 64M -- \
    touch "$PROJECT/marker"
  [ "$status" -eq 0 ]
  [ "${#lines[@]}" -eq 1 ]
  [[ "$output" == "bwrap --unshare-all "* ]]
  [[ "$output" == *"--bind $PROJECT $PROJECT"* ]]
  [[ "$output" == *"--ro-bind $PROJECT/docs $PROJECT/docs"* ]]
  [[ "$output" == *"--ro-bind /dev/null $PROJECT/.env"* ]]
  [[ "$output" == *"--tmpfs $PROJECT/secrets --remount-ro $PROJECT/secrets"* ]]
  [[ "$output" == *"--ro-bind $PROJECT/.cordon/agent-visible $PROJECT/.cordon/agent-visible"* ]]
  [[ "$output" == *"--size 67108864 --tmpfs /tmp"* ]]
  [[ "$output" == *"--clearenv"* ]]
  [[ "$output" == *" -- touch $PROJECT/marker" ]]
  [ ! -e "$PROJECT/marker" ]
}

@test "agent: a policy file joins the flags; unknown keys and wrong types are refused" {
  printf 'hidden:\n  - secrets\nread_only: [docs]\nnet: none\n' >"$KEYS/policy.yaml"
  run "$CORDON" agent --print bwrap --policy "$KEYS/policy.yaml" -- true
  [ "$status" -eq 0 ]
  [[ "$output" == *"--tmpfs $PROJECT/secrets"* ]]
  [[ "$output" == *"--ro-bind $PROJECT/docs"* ]]
  [[ "$output" != *"--share-net"* ]]
  printf 'hiden: [secrets]\n' >"$KEYS/bad.yaml"
  run --separate-stderr "$CORDON" agent --policy "$KEYS/bad.yaml" -- true
  [ "$status" -eq 2 ]
  [[ "$stderr" == *"unknown key 'hiden'"* ]]
  printf 'hidden: secrets\n' >"$KEYS/bad.yaml"
  run --separate-stderr "$CORDON" agent --policy "$KEYS/bad.yaml" -- true
  [ "$status" -eq 2 ]
  [[ "$stderr" == *"'hidden' must be a list"* ]]
}

@test "agent: --allow-ro and CORDON_SANDBOX_ALLOW grant host paths read-only" {
  have_bwrap || skip "bubblewrap is not installed or cannot make namespaces here"
  mkdir -p "$KEYS/grant-a" "$KEYS/grant-b"
  echo a >"$KEYS/grant-a/f"
  echo b >"$KEYS/grant-b/f"
  for m in ns bwrap; do
    CORDON_SANDBOX_ALLOW=$KEYS/grant-b run "$CORDON" agent --mechanism $m \
      --allow-ro "$KEYS/grant-a" -- sh -c \
      "cat $KEYS/grant-a/f $KEYS/grant-b/f && ! touch $KEYS/grant-a/x 2>/dev/null"
    [ "$status" -eq 0 ]
    [ "${lines[0]}" = a ]
    [ "${lines[1]}" = b ]
    [ ! -e "$KEYS/grant-a/x" ]
  done
}

# The accuracy gate around the agent (--protect): a protected file changed, one added inside a
# protected directory and one removed are each listed; the run fails (1) and is audited.
@test "agent --protect: a changed, added and removed protected path fail the run, listed" {
  mkdir -p tests
  echo 'assert 1' >tests/test_a.py
  echo 'assert 2' >tests/test_b.py
  run --separate-stderr "$CORDON" agent --protect tests --protect lockfile -- \
    sh -c 'echo hacked >lockfile; echo skip >tests/conftest.py; rm tests/test_b.py'
  echo "$stderr"
  [ "$status" -eq 1 ]
  [[ "$stderr" == *"changed: lockfile"* ]]
  [[ "$stderr" == *"added: tests/conftest.py"* ]]
  [[ "$stderr" == *"removed: tests/test_b.py"* ]]
  [[ "$stderr" == *"gate failed"* ]]
  [[ "$stderr" != *"test_a.py"* ]]
  grep -q '"event":"agent.gate_failed"' "$PROJECT"/.cordon/audit/audit-*.jsonl
  CORDON_PROJECT=$PROJECT run -0 "$CORDON" audit verify
}

@test "agent --protect: nothing protected changed, the agent's own exit code stands" {
  mkdir -p tests
  echo 'assert 1' >tests/test_a.py
  run --separate-stderr "$CORDON" agent --protect tests -- sh -c 'echo new >src.txt; exit 3'
  [ "$status" -eq 3 ]
  [ "$(cat src.txt)" = new ]
  ! grep -q '"event":"agent.gate_failed"' "$PROJECT"/.cordon/audit/audit-*.jsonl
  # A protected path through a symlink is refused before the agent runs.
  ln -s tests link
  run --separate-stderr "$CORDON" agent --protect link/test_a.py -- touch ran
  [ "$status" -ne 0 ]
  [ ! -e ran ]
}

# An interactive agent runs in a pty: its stdin and stdout are a terminal with the caller's
# window size and TERM, and that terminal is its controlling one (job control, Ctrl-C).
agent_tty_checks() {
  command -v script >/dev/null || skip "script(1) is not installed (util-linux)"
  run -0 env TERM=cordon-test-term script -qec "stty rows 33 cols 77; $CORDON agent \
    --mechanism $1 -- sh -c 'test -t 0 && test -t 1 && echo both-tty; stty size; \
    echo term=\$TERM; echo ctty=\$(cut -d\" \" -f7 /proc/self/stat)'" /dev/null </dev/null
  echo "$output"
  [[ "$output" == *"both-tty"* ]]
  [[ "$output" == *"33 77"* ]]
  [[ "$output" == *"term=cordon-test-term"* ]]
  [[ "$output" != *"ctty=0"* ]]
}

@test "agent ns: under a terminal the agent gets a pty with the window size and TERM" {
  agent_tty_checks ns
}

@test "agent bwrap: under a terminal the agent gets a pty with the window size and TERM" {
  agent_tty_checks bwrap
}

@test "agent ns: Ctrl-C on the terminal interrupts the agent through its pty (exit 130)" {
  command -v script >/dev/null || skip "script(1) is not installed (util-linux)"
  mkfifo keys
  exec 5<>keys
  script -qefc "$CORDON agent --mechanism ns -- sh -c 'echo ready; exec sleep 100'; \
    echo cordon-exit=\$?" /dev/null <&5 >term.out &
  local bg=$!
  for _ in $(seq 300); do grep -q ready term.out && break; sleep 0.1; done
  sleep 0.5
  printf '\003' >&5
  for _ in $(seq 300); do grep -q cordon-exit term.out && break; sleep 0.1; done
  kill "$bg" 2>/dev/null || true
  wait "$bg" || true
  exec 5>&-
  output=$(tr -d '\r' <term.out)
  echo "$output"
  [[ "$output" == *"cordon-exit=130"* ]]
}
