#!/usr/bin/env bats
# One command line: options after positional arguments on every verb, a wrong number of operands
# named with the count given, abbreviated long options refused, `cordon -V` / `version`, unique
# id prefixes for sessions and snapshots, "no such session" as exit 3, the names that cannot be
# confused (session files / list, cas prune / gc), and every example of the README's "Using it"
# block run as pasted. $CORDON is the binary under test, SOURCE_ROOT the tree whose README is
# read; every test runs in a fresh project.

bats_require_minimum_version 1.5.0

setup() {
  PROJECT=$(mktemp -d "${TMPDIR:-/tmp}/cordon-consistency.XXXXXX")
  export CORDON_PROJECT=$PROJECT
  cd "$PROJECT"
}

teardown() {
  cd "$PROJECT" 2>/dev/null && for s in $(ls .cordon/sessions 2>/dev/null); do
    "$CORDON" session destroy "$s" >/dev/null 2>&1 || true
  done
  cd /
  rm -rf "$PROJECT" "${KEYS:-}"
}

@test "options may follow positional arguments: conformance, session exec, snapshot show" {
  # Before, `conformance NAME --json` was "expected exactly one BACKEND"; now the name is looked up.
  run "$CORDON" conformance no-such-backend --json
  [ "$status" -eq 3 ]
  [[ "$output" == *"no-such-backend"* ]]
  id=$("$CORDON" session create)
  run -0 "$CORDON" session exec --json "$id" --timeout 30 -- echo -n x
  [[ "$output" == *'"stdout": "x"'* ]]
  # After `--` everything is the command's: its -n and --timeout are not cordon's.
  run -0 "$CORDON" session exec "$id" -- echo -n --timeout
  [ "$output" = "--timeout" ]
  # Without `--`, as before: the command starts at the first word after the ID.
  run -0 "$CORDON" session exec "$id" echo -n y
  [ "$output" = "y" ]
  mkdir tree && echo a > tree/f
  snap=$("$CORDON" snapshot take tree)
  run -0 "$CORDON" snapshot show "$snap" --json
  [[ "$output" == *'"entries"'* ]]
  # run keeps taking its command from its first word that is not an option.
  run -0 "$CORDON" run echo -n z
  [ "$output" = "z" ]
}

@test "a wrong number of operands says what was expected and how many were given (exit 2)" {
  # Before, `snapshot export ID out.tar` said "expected ID", to a user who had given one.
  run -2 "$CORDON" snapshot export 0123456789abcdef out.tar
  [ "$output" = "cordon: expected ID, got 2 arguments (see 'cordon snapshot export --help')" ]
  run -2 "$CORDON" snapshot restore 0123456789abcdef
  [ "$output" = "cordon: expected ID DIR, got 1 argument (see 'cordon snapshot restore --help')" ]
  run -2 "$CORDON" cas get
  [ "$output" = "cordon: expected DIGEST, got none (see 'cordon cas get --help')" ]
  run -2 "$CORDON" conformance ns worktree
  [ "$output" = "cordon: expected exactly one BACKEND, got 2 arguments (see 'cordon conformance --help')" ]
  run -2 "$CORDON" session read abcdef12
  [[ "$output" == *"expected ID PATH, got 1 argument"* ]]
}

@test "abbreviated long options are refused, not guessed" {
  run "$CORDON" session create --work .
  [ "$status" -eq 2 ]
  [[ "$output" == *"unknown option '--work'"* ]]
  [ ! -d .cordon/sessions ] || [ -z "$(ls .cordon/sessions)" ]
  run "$CORDON" backends --js
  [ "$status" -eq 2 ]
  [[ "$output" == *"unknown option '--js'"* ]]
  run "$CORDON" snapshot take . --no-c
  [ "$status" -eq 2 ]
  [[ "$output" == *"unknown option '--no-c'"* ]]
  # run reports a usage error as cordon's own failure (125, the `docker run` convention).
  run "$CORDON" run --work . -- true
  [ "$status" -eq 125 ]
  [[ "$output" == *"unknown option '--work'"* ]]
  run "$CORDON" run --work=. -- true
  [ "$status" -eq 125 ]
  [[ "$output" == *"unknown option '--work'"* ]]
  # The full names still work, with the value attached or apart; a missing value is said.
  run -0 "$CORDON" run --workspace=. -- true
  run -0 "$CORDON" run --workspace . -- true
  run "$CORDON" session create --timeout
  [ "$status" -eq 2 ]
  [[ "$output" == *"option '--timeout' needs a value"* ]]
}

@test "cordon -V, --version and version print the version; version --json" {
  run -0 "$CORDON" -V
  [[ "$output" =~ ^cordon\ [0-9] ]]
  [ "${#lines[@]}" -eq 1 ]
  v=$output
  run -0 "$CORDON" --version
  [ "$output" = "$v" ]
  run -0 "$CORDON" version
  [ "$output" = "$v" ]
  run -0 "$CORDON" version --json
  [ "$(printf '%s' "$output" | python3 -c 'import json,sys; print(json.load(sys.stdin)["version"])')" = "${v#cordon }" ]
  run "$CORDON" version --frob
  [ "$status" -eq 2 ]
}

@test "session ids: a unique prefix of 8+ hex digits works on every session verb" {
  id=$("$CORDON" session create)
  p=${id:0:8}
  run -0 "$CORDON" session exec "$p" -- true
  echo data | "$CORDON" session write "$p" notes.txt
  run -0 "$CORDON" session read "$p" notes.txt
  [ "$output" = "data" ]
  run -0 "$CORDON" session files "$p"
  [[ "$output" == *notes.txt* ]]
  run -0 "$CORDON" session snapshot "$p" --json
  [[ "$output" == *"\"session\": \"$id\""* ]]
  run -0 "$CORDON" session shutdown "$p"
  run -0 "$CORDON" session destroy "$p"
  [ ! -d ".cordon/sessions/$id" ]
}

@test "session ids: an ambiguous prefix lists the candidates (exit 2); too short is no match" {
  mkdir -p .cordon/sessions/abcdef0100000001 .cordon/sessions/abcdef0100000002
  run "$CORDON" session read abcdef01 x
  [ "$status" -eq 2 ]
  [[ "$output" == *ambiguous* ]]
  [[ "$output" == *abcdef0100000001* ]]
  [[ "$output" == *abcdef0100000002* ]]
  run "$CORDON" session destroy abcdef01
  [ "$status" -eq 2 ]
  [ -d .cordon/sessions/abcdef0100000001 ]
  run "$CORDON" session read abcdef0 x
  [ "$status" -eq 3 ]
  [[ "$output" == *"at least 8"* ]]
}

@test "no such session: exit 3 on every session verb, destroy included" {
  for verb in "read" "write" "files" "ls" "shutdown" "snapshot" "destroy"; do
    args=(0123456789abcdef)
    [ "$verb" = read ] || [ "$verb" = write ] && args+=(x)
    run "$CORDON" session "$verb" "${args[@]}" </dev/null
    echo "session $verb: $status $output"
    [ "$status" -eq 3 ]
    [[ "$output" == *"no such session '0123456789abcdef'"* ]]
  done
  # exec too (its other failures of cordon are 125); --json tells it from a command's own exit 3
  # by its "error" object.
  run "$CORDON" session exec 0123456789abcdef -- true
  [ "$status" -eq 3 ]
  [[ "$output" == *"no such session '0123456789abcdef'"* ]]
  run "$CORDON" session exec --json 0123456789abcdef -- true
  [ "$status" -eq 3 ]
  [[ "$output" == *'"kind": "not_found"'* ]]
  # destroy goes on with the ids it knows, and still exits 3.
  id=$("$CORDON" session create)
  run "$CORDON" session destroy 0123456789abcdef "$id"
  [ "$status" -eq 3 ]
  [ ! -d ".cordon/sessions/$id" ]
}

@test "snapshot ids: unique prefixes on show, export, restore, forget, session create --from, race --base" {
  mkdir tree && echo a > tree/f
  snap=$("$CORDON" snapshot take tree)
  p=${snap:0:8}
  run -0 "$CORDON" snapshot show "$p" --json
  [[ "$output" == *"\"id\": \"$snap\""* ]]
  run -0 "$CORDON" snapshot export "$p" -o image.tar
  [ -s image.tar ]
  run -0 "$CORDON" snapshot restore "$p" out
  [ "$(cat out/f)" = a ]
  s=$("$CORDON" session create --from "$p")
  run -0 "$CORDON" session read "$s" f
  [ "$output" = a ]
  # race resolves --base before anything else: an unknown prefix is "no such snapshot".
  run "$CORDON" race --base 00000000 --k 1 --out r.json -- true
  [ "$status" -eq 3 ]
  [[ "$output" == *"no such snapshot '00000000'"* ]]
  run "$CORDON" snapshot show 00000000
  [ "$status" -eq 3 ]
  run "$CORDON" snapshot show "${snap:0:7}"
  [ "$status" -eq 2 ]
  # Two snapshots under one prefix (a made-up ref beside the real one): ambiguous, both named.
  twin=${snap:0:8}$(printf '0%.0s' $(seq 56))
  cp ".cordon/cas/refs/$snap" ".cordon/cas/refs/$twin"
  run "$CORDON" snapshot show "$p"
  [ "$status" -eq 2 ]
  [[ "$output" == *ambiguous* && "$output" == *"$snap"* && "$output" == *"$twin"* ]]
  run -0 "$CORDON" snapshot show "$snap"
  run -0 "$CORDON" snapshot forget "${snap:0:12}"
  run -0 "$CORDON" snapshot list
  [ "$output" = "$twin" ]
}

@test "names that cannot be confused: session files (alias ls) vs list, cas prune (alias gc) vs gc" {
  run -0 "$CORDON" session --help
  [[ "$output" == *"files ID"* && "$output" == *"alias: ls"* ]]
  run -0 "$CORDON" cas --help
  [[ "$output" == *"prune"* && "$output" == *"alias: gc"* ]]
  run -0 "$CORDON" --help
  [[ "$output" == *"cas put|get|info|verify|prune"* ]]
  [[ "$output" == *"session create|exec|read|write|files|list"* ]]
  id=$("$CORDON" session create)
  echo x | "$CORDON" session write "$id" a.txt
  run -0 "$CORDON" session files "$id"
  files=$output
  run -0 "$CORDON" session ls "$id"
  [ "$output" = "$files" ]
  run -0 "$CORDON" cas prune --dry-run
  run -0 "$CORDON" cas gc --dry-run
  run -0 "$CORDON" session list
  [ "$output" = "$id" ]
}

@test "a --ro path missing from run's default (empty) workspace names --workspace" {
  mkdir src
  run "$CORDON" run --ro src -- true
  [ "$status" -eq 125 ]
  [[ "$output" == *"--workspace"* ]]
  run -0 "$CORDON" run --workspace . --ro src -- true
}

# Every line of the README's "Using it" block, pasted into a shell in a project directory (one
# shell, so `id=` and `snap=` carry over). The stand-ins: a Makefile with a test target,
# ./make-image.sh, ./build.sh, ./attempt.sh; pytest, when the host has none, becomes ./pytest
# (a stand-in script in the workspace), and a real one finds test_sandbox.py. The install key is made first (`race` needs it).
@test "README: every example in 'Using it' works when pasted into a shell in a project" {
  readme=${SOURCE_ROOT:-$BATS_TEST_DIRNAME/../..}/README.md
  [ -f "$readme" ] || skip "no README.md at $readme"
  mkdir src secrets
  echo 'not for the sandbox' > secrets/token
  printf 'test:\n\t@echo tests pass\n' > Makefile
  for f in make-image.sh build.sh attempt.sh pytest; do
    printf '#!/bin/sh\necho %s ran\n' "$f" > "$f"
    chmod 755 "$f"
  done
  KEYS=$(mktemp -d "${TMPDIR:-/tmp}/cordon-consistency-keys.XXXXXX")
  rmdir "$KEYS"
  export CORDON_KEY_DIR=$KEYS
  "$CORDON" key init >/dev/null 2>&1
  # The block: from the line after "## Using it"'s ```sh to the closing ```.
  awk '/^## Using it/{u=1} u&&/^```sh/{b=1;next} b&&/^```/{exit} b' "$readme" > block.sh
  [ "$(wc -l < block.sh)" -gt 10 ]
  command -v pytest >/dev/null || sed -i 's/-- pytest -q/-- .\/pytest -q/' block.sh
  # A real pytest needs a test to find (with none it exits 5).
  printf 'def test_sandbox():\n    assert True\n' > test_sandbox.py
  {
    echo 'cordon() { "$CORDON" "$@"; }'
    n=0
    while IFS= read -r line; do
      n=$((n + 1))
      case "$line" in '' | ' '*'#'* | '#'*) continue ;; esac
      printf '{ %s\n} </dev/null >>"out.%d" 2>&1; echo "%d $?" >> results\n' "$line" "$n" "$n"
    done < block.sh
  } > paste.sh
  CORDON=$CORDON bash paste.sh
  ran=0
  while read -r n rc; do
    line=$(sed -n "${n}p" block.sh)
    want=0
    [[ "$line" == *"exit 7"* ]] && want=7
    echo "line $n -> $rc (want $want): $line"
    [ "$rc" -eq "$want" ] || { cat "out.$n"; false; }
    ran=$((ran + 1))
  done < results
  [ "$ran" -ge 18 ]
  grep -q hi out.1
  grep -q 'tests pass' out.*
}
