#!/usr/bin/env bats
# Interrupting cordon while sandboxes run. SIGINT, SIGTERM or SIGHUP: cordon kills what runs,
# destroys what that command made (keeps a session that existed before it), and then dies of the
# same signal. SIGKILL: nothing can be cleaned up, but no sandboxed process outlives cordon. On
# the ns backend; $CORDON is the binary under test, every test runs in a fresh project.

bats_require_minimum_version 1.5.0

setup() {
  PROJECT=$(mktemp -d "${TMPDIR:-/tmp}/cordon-interrupt.XXXXXX")
  KEYS=$(mktemp -d "${TMPDIR:-/tmp}/cordon-interrupt-keys.XXXXXX")
  export CORDON_PROJECT=$PROJECT
  export CORDON_KEY_DIR=$KEYS/keys
  cd "$PROJECT"
  if ! "$CORDON" backends --json | python3 -c '
import json, sys
sys.exit(0 if any(b["name"] == "ns" and b["available"] for b in json.load(sys.stdin)) else 1)'; then
    skip "the ns backend is unavailable here: $("$CORDON" backends | grep '^ns' || true)"
  fi
}

teardown() {
  cd /
  if [ -d "$PROJECT/.cordon/sessions" ]; then
    for s in $(ls "$PROJECT/.cordon/sessions"); do "$CORDON" session destroy "$s" || true; done
  fi
  rm -rf "$PROJECT" "$KEYS"
}

sessions_left() { ls "$PROJECT/.cordon/sessions" 2>/dev/null | wc -l; }

# Start `cordon ARGS...` in the background with default signal dispositions (a script's
# background job ignores SIGINT, and a run under nohup ignores SIGHUP: cordon keeps an ignored
# signal ignored, as nohup asks), its output in out and err: PID.
spawn() {
  python3 -c 'import os, signal, sys
for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(sig, signal.SIG_DFL)
os.execvp(sys.argv[1], sys.argv[1:])' "$CORDON" "$@" 3>&- >"$PROJECT/out" 2>"$PROJECT/err" &
  PID=$!
}

# spawn `cordon ARGS...` and wait until `sleep MARKER` runs in its sandbox.
start_until_running() {
  local marker=$1
  shift
  spawn "$@"
  for _ in $(seq 200); do
    pgrep -fx "sleep $marker" >/dev/null && return 0
    sleep 0.05
  done
  echo "sleep $marker never started: $(cat "$PROJECT/err")"
  return 1
}

# The exit status of PID, which must be 128 + the signal's number.
expect_death_by() {
  local status=0
  wait "$PID" || status=$?
  [ "$status" -eq $((128 + $(kill -l "$1"))) ] || {
    echo "exit status $status after SIG$1: $(cat "$PROJECT/err")"
    return 1
  }
}

# No process runs `sleep MARKER` any more (within 3 s).
gone() {
  for _ in $(seq 60); do
    pgrep -fx "sleep $1" >/dev/null || return 0
    sleep 0.05
  done
  echo "sleep $1 outlived cordon"
  return 1
}

@test "run: interrupted, the sandbox is killed and its session removed; killed, the sandbox dies too" {
  for sig in INT TERM HUP KILL; do
    marker=$((300000 + RANDOM))
    start_until_running $marker run --backend ns -- sleep $marker
    kill -s $sig "$PID"
    expect_death_by $sig
    gone $marker
    if [ $sig != KILL ]; then
      [ "$(sessions_left)" -eq 0 ]
      grep -qx "cordon: interrupted" "$PROJECT/err"
    fi
  done
}

@test "session exec: interrupted, the command's tree is killed and the session lives on" {
  S=$("$CORDON" session create --backend ns)
  marker=$((300000 + RANDOM))
  start_until_running $marker session exec "$S" -- sh -c "sleep $marker & wait"
  kill -s TERM "$PID"
  expect_death_by TERM
  gone $marker
  run "$CORDON" session exec "$S" -- echo alive
  [ "$status" -eq 0 ]
  [ "$output" = alive ]
  [ "$(sessions_left)" -eq 1 ]
}

@test "session create: interrupted while the session is being made, it goes again" {
  [ "$(id -u)" -eq 0 ] || skip "forks share one base through overlayfs, which needs root"
  # A base big enough that making the session (restoring the base) takes a while.
  python3 -c 'import os
for i in range(10000):
    d = "tree/d%03d" % (i // 100)
    os.makedirs(d, exist_ok=True)
    open("%s/f%d" % (d, i), "wb").write(os.urandom(1024))'
  ID=$("$CORDON" snapshot take tree)
  spawn session create --backend ns --from "$ID"
  for _ in $(seq 500); do
    [ "$(sessions_left)" -gt 0 ] && break
    sleep 0.01
  done
  kill -s TERM "$PID"
  expect_death_by TERM
  [ "$(sessions_left)" -eq 0 ]
  [ ! -s "$PROJECT/out" ]
}

@test "session create --count: interrupted midway, no session of the batch is kept" {
  [ "$(id -u)" -eq 0 ] || skip "forks share one base through overlayfs, which needs root"
  mkdir tree
  echo base > tree/f
  ID=$("$CORDON" session create --backend ns >/dev/null; "$CORDON" snapshot take tree)
  before=$(sessions_left)
  spawn session create --backend ns --from "$ID" --count 200
  # Interrupt once some sessions of the batch exist.
  for _ in $(seq 200); do
    [ "$(sessions_left)" -gt $((before + 2)) ] && break
    sleep 0.02
  done
  [ "$(sessions_left)" -gt $((before + 2)) ]
  kill -s INT "$PID"
  expect_death_by INT
  [ "$(sessions_left)" -eq "$before" ]
  [ ! -s "$PROJECT/out" ]
  grep -q "none was kept" "$PROJECT/err"
}

@test "race: interrupted, every candidate is killed, no session is left and no receipt written" {
  [ "$(id -u)" -eq 0 ] || skip "forks share one base through overlayfs, which needs root"
  "$CORDON" key init >/dev/null
  mkdir tree
  echo base > tree/f
  BASE=$("$CORDON" snapshot take tree)
  marker=$((300000 + RANDOM))
  start_until_running $marker race --backend ns --base "$BASE" --k 3 --out "$PROJECT/r.json" \
    -- sleep $marker
  kill -s TERM "$PID"
  expect_death_by TERM
  gone $marker
  [ "$(sessions_left)" -eq 0 ]
  [ ! -e "$PROJECT/r.json" ]
  grep -q "interrupted" "$PROJECT/err"
}

# Alive and not a zombie (an orphan's reaper may be slow to reap it).
alive() { [ -e "/proc/$1" ] && ! grep -q '^[0-9]* (.*) Z ' "/proc/$1/stat"; }
# Not `! alive`: bash's errexit ignores a negated command, so that line could never fail.
dead() { ! alive "$1"; }

@test "session destroy finds a holder through its cgroup when its cordon was killed before recording it" {
  S=$("$CORDON" session create --backend ns)
  state=".cordon/sessions/$S/state.json"
  read -r holder cgroup < <(python3 -c 'import json, sys
b = json.load(open(sys.argv[1]))["backend_state"]
print(b["holder_pid"], b.get("cgroup_v2", ""))' "$state")
  [ -n "$cgroup" ] || skip "no cgroup v2 for the session here"
  alive "$holder"
  # The state a session has between its early write and the holder's clone: no holder yet.
  python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
d["backend_state"]["holder_pid"] = 0
d["backend_state"]["holder_start"] = 0
json.dump(d, open(sys.argv[1], "w"))' "$state"
  run "$CORDON" session destroy "$S"
  [ "$status" -eq 0 ]
  for _ in $(seq 60); do
    alive "$holder" || break
    sleep 0.05
  done
  dead "$holder"
  [ ! -e "$cgroup" ]
  [ "$(sessions_left)" -eq 0 ]
}

@test "cordon gc removes the session of a cordon run killed with SIGKILL, and only that" {
  keep=$("$CORDON" session create --backend ns)
  # Another backend's session: gc must not read it as an ns session (ASan caught that once).
  other=$("$CORDON" session create --backend worktree)
  live=$((300000 + RANDOM))
  start_until_running $live run --backend ns -- sleep $live
  live_pid=$PID
  before=$(ls .cordon/sessions)
  dead=$((300000 + RANDOM))
  start_until_running $dead run --backend ns -- sleep $dead
  lost=$(ls .cordon/sessions | grep -vxF "$before")
  [ -n "$lost" ]
  kill -s KILL "$PID"
  expect_death_by KILL
  gone $dead
  [ "$(sessions_left)" -eq 4 ]
  # The engine may be unreachable here (exit 4): the ns part is done and reported anyway.
  run "$CORDON" gc --dry-run
  [[ "$output" == *"would remove session $lost: the cordon process"*"is gone"* ]]
  [ "$(sessions_left)" -eq 4 ]
  run "$CORDON" gc
  [ "$status" -eq 0 ] || [[ "$output" == *"cannot reach the Docker engine"* ]]
  [[ "$output" == *"removed session $lost"* ]]
  [ "$(sessions_left)" -eq 3 ]
  [ -d ".cordon/sessions/$keep" ]
  [ -d ".cordon/sessions/$other" ]
  pgrep -fx "sleep $live" >/dev/null
  kill -s TERM "$live_pid"
  PID=$live_pid
  expect_death_by TERM
  [ "$(sessions_left)" -eq 2 ]
}

holder_of() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["backend_state"]["holder_pid"])' "$1"; }

@test "a session whose directory is deleted (its project removed with rm -rf) ends by itself" {
  doomed=$(mktemp -d "${TMPDIR:-/tmp}/cordon-deleted.XXXXXX")
  S=$(CORDON_PROJECT=$doomed "$CORDON" session create --backend ns)
  keep=$("$CORDON" session create --backend ns)
  holder=$(holder_of "$doomed/.cordon/sessions/$S/state.json")
  cgroup=$(python3 -c 'import json, sys
print(json.load(open(sys.argv[1]))["backend_state"].get("cgroup_v2", ""))' \
    "$doomed/.cordon/sessions/$S/state.json")
  kept=$(holder_of ".cordon/sessions/$keep/state.json")
  marker=$((300000 + RANDOM))
  CORDON_PROJECT=$doomed "$CORDON" session exec "$S" -- sleep $marker 3>&- >/dev/null 2>&1 &
  client=$!
  for _ in $(seq 200); do
    pgrep -fx "sleep $marker" >/dev/null && break
    sleep 0.05
  done
  pgrep -fx "sleep $marker" >/dev/null
  rm -rf "$doomed"
  # The holder looks every 5 s.
  for _ in $(seq 160); do
    alive "$holder" || break
    sleep 0.05
  done
  dead "$holder"
  gone $marker
  local status=0
  wait "$client" || status=$?
  [ "$status" -ne 0 ]
  # A session whose directory stays lives on.
  alive "$kept"
  run "$CORDON" session exec "$keep" -- true
  [ "$status" -eq 0 ]
  [ -n "$cgroup" ] || return 0 # no cgroup v2 here: nothing left behind to collect
  # What it leaves is an empty cgroup, which `cordon gc` (of any project) removes. The engine
  # may be unreachable here (exit 4): the ns part is done and reported anyway.
  [ -d "$cgroup" ]
  run "$CORDON" gc --dry-run
  [[ "$output" == *"would remove session $S: its directory $doomed/.cordon/sessions/$S is gone"* ]]
  [[ "$output" != *"session $keep"* ]]
  [ -d "$cgroup" ]
  run "$CORDON" gc
  [ "$status" -eq 0 ] || [[ "$output" == *"cannot reach the Docker engine"* ]]
  [[ "$output" == *"removed session $S: its directory"*"its cgroup $cgroup is empty"* ]]
  [ ! -e "$cgroup" ]
  # An empty cgroup whose session directory is still there is its project's to clean up
  # (`session destroy`), not the sweep's.
  kept_cgroup=$(python3 -c 'import json, sys
print(json.load(open(sys.argv[1]))["backend_state"].get("cgroup_v2", ""))' \
    ".cordon/sessions/$keep/state.json")
  kill -s KILL "$kept"
  for _ in $(seq 60); do
    alive "$kept" || break
    sleep 0.05
  done
  dead "$kept"
  grep -qx 'populated 0' "$kept_cgroup/cgroup.events"
  run "$CORDON" gc
  [[ "$output" != *"session $keep"* ]]
  [ -d "$kept_cgroup" ]
  run "$CORDON" session destroy "$keep"
  [ "$status" -eq 0 ]
  [ ! -e "$kept_cgroup" ]
}

# The store's temporary files: staged blobs in tmp/ (streamed files, packs being written) and in
# the shards (.tmp-*).
store_temps() {
  { ls -A "$PROJECT/.cordon/cas/tmp" 2>/dev/null
    find "$PROJECT/.cordon/cas" -mindepth 2 -maxdepth 2 -name '.tmp-*' 2>/dev/null; } | wc -l
}

# Wait until a staged file appears in the store's tmp directory (a big file being hashed).
until_staging() {
  for _ in $(seq 400); do
    [ -n "$(ls -A "$PROJECT/.cordon/cas/tmp" 2>/dev/null)" ] && return 0
    sleep 0.05
  done
  echo "nothing was staged: $(cat "$PROJECT/err")"
  return 1
}

@test "snapshot take: interrupted, it stops and removes its temporary files; killed, cas gc does" {
  mkdir tree
  truncate -s 64G tree/huge # a minute of hashing its holes: long enough to interrupt
  for sig in INT TERM; do
    spawn snapshot take --max-snapshot-bytes unlimited tree
    until_staging
    kill -s $sig "$PID"
    expect_death_by $sig
    [ "$(store_temps)" -eq 0 ]
    [ ! -s "$PROJECT/out" ]
    grep -qx "cordon: interrupted" "$PROJECT/err"
  done
  run -0 "$CORDON" cas verify
  # SIGKILL leaves the staged file; `cas gc` removes it.
  spawn snapshot take --max-snapshot-bytes unlimited tree
  until_staging
  kill -s KILL "$PID"
  expect_death_by KILL
  [ "$(store_temps)" -gt 0 ]
  run -0 "$CORDON" cas gc
  [ "$(store_temps)" -eq 0 ]
  run -0 "$CORDON" cas verify
}

@test "race: interrupted while a candidate's snapshot is taken, no temporary file is left" {
  "$CORDON" key init >/dev/null
  mkdir base
  echo a > base/a
  BASE=$("$CORDON" snapshot take base)
  spawn race --backend worktree --base "$BASE" --k 1 --out "$PROJECT/receipt.json" \
    --max-snapshot-bytes unlimited -- truncate -s 64G huge
  until_staging
  kill -s INT "$PID"
  expect_death_by INT
  [ "$(store_temps)" -eq 0 ]
  [ "$(sessions_left)" -eq 0 ]
  [ ! -e "$PROJECT/receipt.json" ]
  run -0 "$CORDON" cas verify
}
