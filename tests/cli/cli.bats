#!/usr/bin/env bats
# The command line as a user types it. $CORDON is the binary under test; every test runs in a
# fresh project directory.

bats_require_minimum_version 1.5.0

setup() {
  PROJECT=$(mktemp -d "${TMPDIR:-/tmp}/cordon-cli.XXXXXX")
  export CORDON_PROJECT=$PROJECT
  export CORDON_QUIET=1 # worktree's notice that it isolates nothing: enforcement.bats tests it
  export CORDON_KEY_DIR=$PROJECT.keys # waivers are audited (CORDON_SANDBOX=off)
  cd "$PROJECT"
}

teardown() {
  cd /
  rm -rf "$PROJECT" "$PROJECT.keys"
}

wt() { "$CORDON" "$@"; }

@test "--help on every verb exits 0 and prints usage" {
  for v in "" "run" "session" "session create" "backends" "conformance"; do
    run $CORDON $v --help
    [ "$status" -eq 0 ]
    [[ "$output" == usage:* ]]
  done
}

@test "unknown verb: one line, exit 2" {
  run $CORDON frobnicate
  [ "$status" -eq 2 ]
  [ "${#lines[@]}" -eq 1 ]
  [[ "$output" == *"unknown verb 'frobnicate'"* ]]
}

@test "the ns holder's spawner entry run by hand is refused in one line, exit 2" {
  # Internal: a caller with threads execs cordon afresh with it (src/backends/ns/holder.c).
  for fds in "" "1,2" "x" "3,4,5,6,7,8" "-1,3,3,3,3,3" "3,3,3,3,3,3"; do
    run "$CORDON" --cordon-internal-holder-spawner "$fds"
    echo "$fds: $output"
    [ "$status" -eq 2 ]
    [ "${#lines[@]}" -eq 1 ]
    [[ "$output" == *"not meant to be run by hand"* ]]
  done
}

@test "run returns the command's exit code and output" {
  run $CORDON run --backend worktree -- sh -c 'echo hi; exit 7'
  [ "$status" -eq 7 ]
  [ "$output" = "hi" ]
}

@test "run: not found is 127, not executable is 126, killed by signal is 128+N" {
  run -127 $CORDON run --backend worktree -- no-such-command-cordon
  printf 'x' > notexec
  run $CORDON run --backend worktree --file notexec=notexec -- ./notexec
  [ "$status" -eq 126 ]
  run $CORDON run --backend worktree -- sh -c 'kill -KILL $$'
  [ "$status" -eq 137 ]
}

@test "run: unknown flag and missing command are cordon failures (125) in one line" {
  run $CORDON run --bogus -- true
  [ "$status" -eq 125 ]
  [ "${#lines[@]}" -eq 1 ]
  [[ "$output" == *"--bogus"* ]]
  run $CORDON run --backend worktree
  [ "$status" -eq 125 ]
  [[ "$output" == *"no command"* ]]
}

@test "run: a nonexistent backend is named" {
  run $CORDON run --backend nosuch -- true
  [ "$status" -eq 125 ]
  [ "${#lines[@]}" -eq 1 ]
  [[ "$output" == *"no backend named nosuch"* ]]
}

@test "run: timeout gives 124 and kills the command" {
  start=$(date +%s)
  run $CORDON run --backend worktree --timeout 1 -- sleep 30
  end=$(date +%s)
  [ "$status" -eq 124 ]
  [[ "$output" == *"timed out"* ]]
  # Cut short (the sleep would take 30 s); not a measure of speed under a loaded suite.
  [ $((end - start)) -le 15 ]
}

@test "run on ns: nothing the command started outlives cordon, which does not wait for pid 1" {
  "$CORDON" backends --json | python3 -c '
import json, sys
sys.exit(0 if any(b["name"] == "ns" and b["available"] for b in json.load(sys.stdin)) else 1)' ||
    skip "the ns backend is unavailable here"
  marker=$((400000 + RANDOM))
  # A background child, and a daemon (setsid, its parent gone), both still sleeping when the
  # command exits: cordon returns only once they are gone, with the command's own status.
  # Matched by the whole command line: cordon's remover of the session's files, a copy of
  # cordon that may outlive it (by design), carries "sleep N" in its own (1 run in 3 under load).
  run $CORDON run -- sh -c "sleep $marker & (setsid sleep $((marker + 1)) &); exit 3"
  [ "$status" -eq 3 ]
  [ -z "$(pgrep -fx "sleep $marker")" ]
  [ -z "$(pgrep -fx "sleep $((marker + 1))")" ]
  [ -z "$(ls "$PROJECT/.cordon/sessions")" ]
}

@test "run: --file, --env, --stdin and --cwd reach the command" {
  printf 'payload' > src.txt
  printf 'from-stdin' > in.txt
  run $CORDON run --backend worktree --file sub/data.txt=src.txt --env GREETING=hello \
    --stdin in.txt --cwd sub -- sh -c 'cat data.txt; echo " $GREETING"; cat'
  [ "$status" -eq 0 ]
  [ "$output" = "payload hello
from-stdin" ]
}

@test "run: a working directory that is not there: 125, one line naming it, the errno's text once" {
  # The ns holder relays its setup error to the caller; the relay appended the errno's text to a
  # message that already ended in it ("No such file or directory: No such file or directory").
  run --separate-stderr $CORDON run --cwd /no-such-dir -- true
  [ "$status" -eq 125 ]
  [ "$stderr" = "cordon: sandbox setup: cannot run true in /no-such-dir: No such file or directory" ]
  id=$($CORDON session create)
  run --separate-stderr $CORDON session exec --cwd no-such-dir "$id" -- true
  [ "$status" -eq 125 ]
  [ "$stderr" = "cordon: cannot run true in /workspace/no-such-dir: No such file or directory" ]
  $CORDON session destroy "$id"
}

@test "run: bad values are refused before anything runs" {
  run $CORDON run --backend worktree --timeout abc -- true
  [ "$status" -eq 125 ]
  [[ "$output" == *"--timeout expects seconds"* ]]
  run $CORDON run --backend worktree --net sideways -- true
  [ "$status" -eq 125 ]
  run $CORDON run --backend worktree --memory 12Q -- true
  [ "$status" -eq 125 ]
  run $CORDON run --backend worktree --file nosuchsrc -- true
  [ "$status" -eq 125 ]
  [ ! -d .cordon/sessions ] || [ -z "$(ls .cordon/sessions)" ]
}

@test "worktree refuses confinement it cannot enforce" {
  run $CORDON run --backend worktree --ro src -- true
  [ "$status" -eq 125 ]
  [[ "$output" == *"does not enforce read_only_paths (--ro)"* ]]
}

@test "CORDON_SANDBOX=off is refused unless enforcement is lifted, then warns loudly" {
  CORDON_SANDBOX=off run $CORDON run -- true
  [ "$status" -eq 125 ]
  [[ "$output" == *"enforcement is required"* ]]
  CORDON_SANDBOX=off run $CORDON run --no-require-enforcement -- sh -c 'echo ran'
  [ "$status" -eq 0 ]
  [[ "$output" == *"WARNING"*"UNCONFINED"* ]]
  [[ "$output" == *"ran"* ]]
  CORDON_SANDBOX=bogus run $CORDON run -- true
  [ "$status" -eq 125 ]
}

@test "session lifecycle across invocations" {
  id=$($CORDON session create --backend worktree --env A=1)
  [[ "$id" =~ ^[0-9a-f]{16}$ ]]
  printf 'hello\n' | $CORDON session write "$id" dir/hello.txt --mode 0600
  run $CORDON session read "$id" dir/hello.txt
  [ "$status" -eq 0 ]
  [ "$output" = "hello" ]
  run $CORDON session ls "$id"
  [ "$output" = "dir/" ]
  run $CORDON session ls "$id" dir --json
  [[ "$output" == *'"mode": "0600"'* ]]
  run $CORDON session exec "$id" --env B=2 -- sh -c 'echo $A$B; cat dir/hello.txt; exit 3'
  [ "$status" -eq 3 ]
  [ "$output" = "12
hello" ]
  run $CORDON session list
  [ "$output" = "$id" ]
  run $CORDON session exec "$id" --json -- sh -c 'printf out; printf err >&2'
  [[ "$output" == *'"stdout": "out"'* ]]
  [[ "$output" == *'"stderr": "err"'* ]]
  run $CORDON session destroy "$id"
  [ "$status" -eq 0 ]
  run $CORDON session destroy "$id"
  [ "$status" -eq 3 ]
  run $CORDON session list
  [ "$output" = "" ]
}

@test "session errors: missing, malformed and corrupt ids give one line" {
  run $CORDON session read 0123456789abcdef x
  [ "$status" -eq 3 ]
  [ "${#lines[@]}" -eq 1 ]
  [[ "$output" == *"no such session '0123456789abcdef'"* ]]
  run $CORDON session exec ../../etc -- true
  [ "$status" -eq 125 ]
  [[ "$output" == *"invalid session id"* ]]
  run $CORDON session exec
  [ "$status" -eq 125 ]
  id=$($CORDON session create --backend worktree)
  printf '{"version": 1, "id": ' > ".cordon/sessions/$id/state.json"
  run $CORDON session read "$id" x
  [ "$status" -eq 1 ]
  [ "${#lines[@]}" -eq 1 ]
  [[ "$output" == *"is corrupt"* ]]
  echo '[1,2,3]' > ".cordon/sessions/$id/state.json"
  run $CORDON session ls "$id"
  [ "$status" -eq 1 ]
  [[ "$output" == *"is corrupt"* ]]
  # Listed all the same, with the reason, beside a readable one.
  ok=$($CORDON session create --backend worktree)
  run -0 $CORDON session list -l
  [ "${lines[0]}" = "ID                BACKEND   STATE      CREATED               WORKSPACE" ]
  [[ "$output" == *"$id  -         unreadable  -                     "*"is corrupt"* ]]
  [[ "$output" =~ $ok\ \ worktree\ \ active\ \ \ \ \ 20[0-9-]{8}T[0-9:]{8}Z\ \ $PROJECT/.cordon/sessions/$ok/workspace ]]
  $CORDON session shutdown "$ok"
  run -0 $CORDON session list --long
  [[ "$output" == *"$ok  worktree  shut down  "* ]]
  run -0 $CORDON session list --json
  [ "$(jq -c ".[] | select(.id == \"$id\") | keys" <<< "$output")" = '["error","id"]' ]
  [ "$(jq -c ".[] | select(.id == \"$ok\") | [.backend, .shut_down]" <<< "$output")" = '["worktree",true]' ]
  # created: when it was made, in UTC, to the millisecond; a state that says otherwise is corrupt.
  created=$(jq -r ".[] | select(.id == \"$ok\") | .created" <<< "$output")
  [[ "$created" =~ ^20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z$ ]]
  made=$(date -u -d "$created" +%s)
  [ $(($(date +%s) - made)) -ge 0 ] && [ $(($(date +%s) - made)) -lt 600 ]
  state=".cordon/sessions/$ok/state.json"
  cp "$state" state.bak
  jq -c '.created = "yesterday"' state.bak > "$state"
  run -1 $CORDON session inspect "$ok"
  [[ "$output" == *"created is not a UTC time"* ]]
  cp state.bak "$state"
  $CORDON session destroy "$ok"
}

@test "session inspect: what the session may touch, as recorded, and as enforced" {
  mkdir -p ws/src ws/conf && echo s > ws/src/main.c && echo t > ws/conf/token
  id=$($CORDON session create --workspace ws --ro src --hide conf/token --net none --memory 64M \
    --pids 32)
  run -0 $CORDON session inspect "${id:0:8}"
  [ "${lines[0]}" = "id           $id" ]
  [[ "$output" == *"backend      ns (tier container)"* ]]
  [[ "$output" == *"created      20"*"Z"* ]]
  [[ "$output" == *"workspace    $PROJECT/ws, at /workspace inside"* ]]
  [[ "$output" == *"net          none"* ]]
  [[ "$output" == *"read-only    src"* ]]
  [[ "$output" == *"hidden       conf/token"* ]]
  [[ "$output" == *"limits       memory 64M, pids 32"* ]]
  [[ "$output" == *"user         the sandbox user (uid 1000)"* ]]
  [[ "$output" == *"enforcement  required"* ]]
  run -0 $CORDON session inspect "$id" --json
  [ "$(jq -c '.policy | [.net, .read_only, .hidden, .limits.memory_bytes, .limits.pids, .waived]' \
    <<< "$output")" = '["none",["src"],["conf/token"],67108864,32,[]]' ]
  # What it says is what holds: the read-only path refuses a write, the hidden one reads empty.
  run $CORDON session exec "$id" -- sh -c 'echo x > src/main.c'
  [ "$status" -ne 0 ]
  run -0 $CORDON session exec "$id" -- cat conf/token
  [ -z "$output" ]
  # A state whose policy is no object is corrupt; one from before the record says so.
  state=".cordon/sessions/$id/state.json"
  cp "$state" state.bak
  for edit in '.policy = 5' '.policy.user = 5' '.policy.limits.pids = "many"' '.policy.x = 1'; do
    jq -c "$edit" state.bak > "$state"
    run -1 $CORDON session inspect "$id"
    [ "${#lines[@]}" -eq 1 ]
    [[ "$output" == *"policy is not a session's policy"* ]]
  done
  jq -c 'del(.policy)' state.bak > "$state"
  run -0 $CORDON session inspect "$id"
  [[ "$output" == *"policy       not recorded (the session was made by an older cordon)"* ]]
  cp state.bak "$state"
  $CORDON session destroy "$id"
  # A waiver is named: worktree enforces no read-only path.
  id=$($CORDON session create --backend worktree --workspace ws --ro src --no-require-enforcement)
  run -0 $CORDON session inspect "$id"
  [[ "$output" == *"WAIVED       read_only_paths"* ]]
  [[ "$output" == *"user         you, on the host (this backend isolates nothing)"* ]]
  $CORDON session destroy "$id"
  run -2 $CORDON session inspect
  [[ "$output" == *"expected ID, got none"* ]]
}

@test "session paths cannot leave the workspace" {
  id=$($CORDON session create --backend worktree)
  run $CORDON session read "$id" ../../../../etc/passwd
  [ "$status" -eq 4 ]
  [[ "$output" == *"leaves the workspace"* ]]
  $CORDON session exec "$id" -- ln -s /etc out
  run $CORDON session read "$id" out/passwd
  [ "$status" -eq 4 ]
  run sh -c "echo x | $CORDON session write $id out/evil"
  [ "$status" -eq 4 ]
  [ ! -e /etc/evil ]
  $CORDON session destroy "$id"
}

@test "session create from a git repository makes a worktree on its own branch" {
  git init -q repo
  git -C repo -c user.email=t@t -c user.name=t commit -q --allow-empty -m init
  printf 'tracked\n' > repo/a.txt
  mkdir repo/keep repo/drop
  printf 'k\n' > repo/keep/k.txt
  printf 'd\n' > repo/drop/d.txt
  git -C repo add -A
  git -C repo -c user.email=t@t -c user.name=t commit -q -m files
  id=$($CORDON session create --backend worktree --repo repo)
  run $CORDON session read "$id" a.txt
  [ "$output" = "tracked" ]
  run git -C repo branch --list "cordon/$id"
  [[ "$output" == *"cordon/$id"* ]]
  sparse=$($CORDON session create --backend worktree --repo repo --sparse keep)
  run $CORDON session read "$sparse" keep/k.txt
  [ "$status" -eq 0 ]
  run $CORDON session read "$sparse" drop/d.txt
  [ "$status" -eq 3 ]
  $CORDON session destroy "$id" "$sparse"
  run git -C repo branch --list "cordon/*"
  [ "$output" = "" ]
  run $CORDON session create --backend worktree --repo repo --branch no-such-branch
  [ "$status" -eq 1 ]
  [[ "$output" == *"no-such-branch"* ]]
}

@test "backends lists built-ins, loaded plugins, and refused plugins with the reason" {
  run $CORDON backends
  [ "$status" -eq 0 ]
  [[ "$output" == *worktree*none*yes*"NO isolation"* ]]
  [[ "$output" == *example*yes* ]]
  [[ "$output" == *"cordon-broken.so"*"ABI version 999"* ]]
  # NOTES starts in one column on every line: ns's capabilities were once wider than theirs.
  notes=$(head -1 <<< "$output" | awk '{print index($0, "NOTES")}')
  [ "$notes" -gt 1 ]
  while IFS= read -r line; do
    [ "${line:notes-2:1}" = " " ] && [ "${line:notes-1:1}" != " " ] || {
      echo "NOTES not at column $notes: $line"
      false
    }
  done <<< "$output"
  run $CORDON backends --json
  [ "$status" -eq 0 ]
  [[ "$output" == *'"name": "worktree"'* ]]
  [[ "$output" == *'"load_error"'* ]]
  run $CORDON run --backend cordon-broken.so -- true
  [ "$status" -eq 125 ]
  [[ "$output" == *"failed to load"* ]]
}

@test "conformance of an unknown backend and bad usage" {
  run $CORDON conformance
  [ "$status" -eq 2 ]
  run $CORDON conformance nosuch
  [ "$status" -eq 3 ]
}

@test "a protected file with another name (hard link) is refused, naming both" {
  $CORDON backends | grep -q '^ns .* yes' || skip "the ns backend is unavailable here"
  mkdir -p ws/conf
  echo secret > ws/conf/token
  ln ws/conf/token ws/copy
  run $CORDON session create --workspace ws --hide conf/token
  [ "$status" -eq 4 ]
  [ "${#lines[@]}" -eq 1 ]
  [[ "$output" == *"hidden path conf/token has another name, copy,"* ]]
  run $CORDON run --workspace ws --ro conf -- true
  [ "$status" -eq 125 ]
  [[ "$output" == *"read-only path conf holds conf/token, which has another name, copy,"* ]]
  # Every name hidden: fine, and nothing to read.
  run $CORDON run --workspace ws --hide conf/token --hide copy -- cat /workspace/copy
  [ "$status" -eq 0 ]
  [ -z "$output" ]
}

@test "projects are registered when their .cordon/ is made; gc removes the entries of deleted ones" {
  export XDG_STATE_HOME="$PROJECT/xdg"
  mkdir a b
  CORDON_PROJECT="$PROJECT/a" "$CORDON" snapshot take a >/dev/null
  CORDON_PROJECT="$PROJECT/b" "$CORDON" snapshot take b >/dev/null
  [ "$(ls xdg/cordon/projects | wc -l)" -eq 2 ]
  # One symlink per project, named by the SHA-256 of the real path of its .cordon/.
  b_state="$(realpath "$PROJECT")/b/.cordon"
  b_entry="xdg/cordon/projects/$(printf %s "$b_state" | sha256sum | cut -d' ' -f1)"
  [ "$(readlink "$b_entry")" = "$b_state" ]
  [ "$(stat -c %a xdg/cordon/projects)" = 700 ]
  rm -rf b
  run "$CORDON" gc --dry-run
  [ "$(ls xdg/cordon/projects | wc -l)" -eq 2 ]
  # The Docker engine may be unreachable here (exit 4): the registry is pruned anyway.
  run "$CORDON" gc
  [[ "$output" == *"removed 1 registry entries of deleted projects"* ]]
  [ "$(ls xdg/cordon/projects | wc -l)" -eq 1 ]
  [ "$(readlink xdg/cordon/projects/*)" = "$(realpath "$PROJECT")/a/.cordon" ]
  # A new project also drops the entries of deleted ones: the registry stays as long as the
  # live projects, whoever forgets to run gc.
  rm -rf a
  mkdir c
  CORDON_PROJECT="$PROJECT/c" "$CORDON" snapshot take c >/dev/null
  [ "$(ls xdg/cordon/projects | wc -l)" -eq 1 ]
  [ "$(readlink xdg/cordon/projects/*)" = "$(realpath "$PROJECT")/c/.cordon" ]
}

@test "--tmp-size: documented, bad sizes refused in one line, worktree refuses it" {
  run $CORDON run --help
  [[ "$output" == *"--tmp-size SIZE"* ]]
  run $CORDON session create --help
  [[ "$output" == *"--tmp-size SIZE"* ]]
  for bad in 0 12Q -5M "" 1K 4095; do
    run $CORDON run --backend worktree --tmp-size "$bad" -- true
    [ "$status" -eq 125 ]
    [ "${#lines[@]}" -eq 1 ]
    [[ "$output" == *"--tmp-size expects a size"* ]]
    run $CORDON session create --backend worktree --tmp-size "$bad"
    [ "$status" -eq 2 ]
    [ "${#lines[@]}" -eq 1 ]
    [[ "$output" == *"--tmp-size expects a size"* ]]
  done
  [ ! -d .cordon/sessions ] || [ -z "$(ls .cordon/sessions)" ]
  run $CORDON run --backend worktree --tmp-size 8M -- true
  [ "$status" -eq 125 ]
  [[ "$output" == *"backend worktree does not enforce tmp_size (--tmp-size)"* ]]
}
