#!/usr/bin/env bats
# Persistent volumes and host binds (-v/--volume) on `cordon run` and `cordon session create`,
# and `cordon volume list|remove`. $CORDON is the binary under test; every test runs in a fresh
# project with its own key directory and state home (so that binding them can be tried).

bats_require_minimum_version 1.5.0

setup() {
  PROJECT=$(mktemp -d "${TMPDIR:-/tmp}/cordon-volume-cli.XXXXXX")
  export CORDON_PROJECT=$PROJECT
  export CORDON_KEY_DIR=$PROJECT/keys
  export XDG_STATE_HOME=$PROJECT/state
  mkdir -p "$CORDON_KEY_DIR" "$XDG_STATE_HOME/cordon" "$PROJECT/.cordon"
  chmod 700 "$CORDON_KEY_DIR"
  cd "$PROJECT"
  HOSTDIR=$(mktemp -d "${TMPDIR:-/tmp}/cordon-volume-host.XXXXXX")
  chmod 755 "$HOSTDIR"
  printf 'from the host\n' > "$HOSTDIR/hello"
}

teardown() {
  cd /
  local id
  for id in $("$CORDON" session list 2>/dev/null | awk '{print $1}'); do
    CORDON_PROJECT=$PROJECT "$CORDON" session destroy "$id" >/dev/null 2>&1 || true
  done
  rm -rf "$PROJECT" "$HOSTDIR"
}

ns_or_skip() {
  "$CORDON" run --backend ns -- true >/dev/null 2>&1 || skip "ns backend unavailable here"
}

@test "--help of run, session create and volume describe -v and the volume verbs" {
  run $CORDON run --help
  [ "$status" -eq 0 ]
  [[ "$output" == *"-v, --volume NAME:PATH[:ro]"* ]]
  run $CORDON session create --help
  [[ "$output" == *"--volume"* ]]
  run $CORDON volume --help
  [ "$status" -eq 0 ]
  [[ "$output" == *"list [--json]"* ]]
  [[ "$output" == *"remove NAME..."* ]]
  run $CORDON --help
  [[ "$output" == *"volume list|remove"* ]]
}

@test "backends: ns and docker declare persistent_volumes, worktree does not" {
  run $CORDON backends --json
  [ "$status" -eq 0 ]
  echo "$output" | tr -d ' \n' | grep -q '"name":"ns"[^}]*persistent_volumes'
  echo "$output" | tr -d ' \n' | grep -q '"name":"docker"[^}]*persistent_volumes'
  ! echo "$output" | tr -d ' \n' | grep -q '"name":"worktree"[^}]*persistent_volumes'
}

@test "ns: a named volume keeps its data across sessions and outlives session destroy" {
  ns_or_skip
  id=$($CORDON session create -v cache:/data)
  run $CORDON session exec "$id" -- sh -c 'echo first > /data/kept; mkdir -p /data/sub; echo deep > /data/sub/f'
  [ "$status" -eq 0 ]
  run $CORDON session destroy "$id"
  [ "$status" -eq 0 ]
  [ -d .cordon/volumes/cache ]
  run $CORDON run --volume cache:/data -- cat /data/kept /data/sub/f
  [ "$status" -eq 0 ]
  [ "$output" = "$(printf 'first\ndeep')" ]
  # a later session sees what this one wrote, through `session exec` in another process
  id=$($CORDON session create -v cache:/mnt/cache)
  run $CORDON session exec "$id" -- sh -c 'echo second >> /mnt/cache/kept'
  [ "$status" -eq 0 ]
  run $CORDON session exec "$id" -- cat /mnt/cache/kept
  [ "$output" = "$(printf 'first\nsecond')" ]
}

@test "ns: a :ro volume refuses every write from inside and keeps its contents" {
  ns_or_skip
  run $CORDON run -v cache:/data -- sh -c 'echo keep > /data/file'
  [ "$status" -eq 0 ]
  run $CORDON run -v cache:/data:ro -- sh -c 'echo no > /data/file'
  [ "$status" -ne 0 ]
  [[ "$output" == *"Read-only file system"* ]]
  run $CORDON run -v cache:/data:ro -- sh -c 'exec 2>/dev/null; touch /data/new || rm /data/file || mkdir /data/d || mv /data/file /data/moved; ls /data; cat /data/file'
  [ "$status" -eq 0 ]
  [ "$output" = "$(printf 'file\nkeep')" ]
  # nor can it be made writable again from inside
  run $CORDON run -v cache:/data:ro -- sh -c 'mount -o remount,rw /data && echo x > /data/file'
  [ "$status" -ne 0 ]
  [ "$(cat .cordon/volumes/cache/file)" = keep ]
}

@test "ns: host binds: rw writes land on the host, :ro writes fail" {
  ns_or_skip
  run $CORDON run -v "$HOSTDIR:/host" -- sh -c 'cat /host/hello; echo back > /host/out'
  [ "$status" -eq 0 ]
  [ "$output" = "from the host" ]
  [ "$(cat "$HOSTDIR/out")" = back ]
  run $CORDON run -v "$HOSTDIR:/host:ro" -- sh -c 'echo no > /host/hello'
  [ "$status" -ne 0 ]
  [ "$(cat "$HOSTDIR/hello")" = "from the host" ]
  run $CORDON run -v "$HOSTDIR:/host:ro" -- cat /host/hello
  [ "$status" -eq 0 ]
  [ "$output" = "from the host" ]
}

@test "host binds of cordon's state, keys, state home or a missing directory are refused" {
  other=$(mktemp -d "${TMPDIR:-/tmp}/cordon-volume-other.XXXXXX")
  mkdir -p "$other/.cordon" "$PROJECT/.cordon/sub"
  for src in "$PROJECT/.cordon" "$PROJECT/.cordon/sub" "$PROJECT" "$other" "$CORDON_KEY_DIR" \
    "$XDG_STATE_HOME/cordon" "$XDG_STATE_HOME"; do
    run $CORDON run -v "$src:/x" -- true
    [ "$status" -ne 0 ]
    [[ "$output" == *"cordon's state"* ]] || { echo "$src: $output"; false; }
  done
  rm -rf "$other"
  run $CORDON run -v /nonexistent/cordon-volume:/x -- true
  [ "$status" -ne 0 ]
  [[ "$output" == *"/nonexistent/cordon-volume"* ]]
  run $CORDON run -v "$HOSTDIR/hello:/x" -- true
  [ "$status" -ne 0 ]
  [[ "$output" == *"not a directory"* ]]
  # nothing was made for a refused run
  [ -z "$(ls .cordon/sessions 2>/dev/null)" ]
}

@test "a named volume replaced by a symlink is refused, never followed" {
  ns_or_skip
  run $CORDON run -v evil:/data -- true
  [ "$status" -eq 0 ]
  rmdir .cordon/volumes/evil
  ln -s "$HOSTDIR" .cordon/volumes/evil
  run $CORDON run -v evil:/data -- sh -c 'echo owned > /data/hello'
  [ "$status" -ne 0 ]
  [[ "$output" == *"volume evil"* ]]
  [ "$(cat "$HOSTDIR/hello")" = "from the host" ]
}

@test "bad volume names, targets and modes are usage errors (run: 125)" {
  long=$(printf 'a%.0s' $(seq 65))
  for spec in 'bad!:/x' '.hidden:/x' '-dash:/x' "$long:/x" 'a/b:/x' 'cache' 'cache:' ':/x' \
    'cache:/x:rx'; do
    run $CORDON session create -v "$spec"
    [ "$status" -eq 2 ] || { echo "$spec: $status $output"; false; }
    run $CORDON run -v "$spec" -- true
    [ "$status" -eq 125 ] || { echo "$spec: $status $output"; false; }
  done
  for target in relative / /usr /usr/local/x /proc/x /dev /tmp/x /etc /workspace /workspace/sub /.cordon-init /x/.cordon /sys /run/x; do
    run $CORDON run -v "cache:$target" -- true
    [ "$status" -ne 0 ] || { echo "$target accepted"; false; }
    [[ "$output" == *"volume target"* ]] || { echo "$target: $output"; false; }
  done
  run $CORDON run -v a:/data -v b:/data/sub -- true
  [ "$status" -ne 0 ]
  [[ "$output" == *"overlaps"* ]]
  [ ! -e .cordon/volumes/cache ]
}

@test "volume list [--json] gives name, size and path; remove removes, unknown is exit 3" {
  ns_or_skip
  run $CORDON volume list
  [ "$status" -eq 0 ]
  [ -z "$output" ]
  run $CORDON run -v alpha:/a -v beta:/b -- sh -c 'printf 12345 > /a/f; mkdir /b/d; printf 1234567 > /b/d/g'
  [ "$status" -eq 0 ]
  run $CORDON volume list
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "$(printf 'alpha\t5\t%s/.cordon/volumes/alpha' "$PROJECT")" ]
  [ "${lines[1]}" = "$(printf 'beta\t7\t%s/.cordon/volumes/beta' "$PROJECT")" ]
  run $CORDON volume list --json
  [ "$status" -eq 0 ]
  echo "$output" | tr -d ' \n' | grep -q '{"name":"alpha","path":"[^"]*/.cordon/volumes/alpha","size":5}'
  run $CORDON volume remove alpha
  [ "$status" -eq 0 ]
  [ ! -e .cordon/volumes/alpha ]
  run $CORDON volume remove alpha
  [ "$status" -eq 3 ]
  [[ "$output" == *"no volume alpha"* ]]
  run $CORDON volume remove 'bad!'
  [ "$status" -eq 2 ]
  run $CORDON volume remove
  [ "$status" -eq 2 ]
}

@test "volume remove refuses (exit 1, naming the session) while a live session uses it" {
  ns_or_skip
  id=$($CORDON session create -v busy:/data)
  run $CORDON volume remove busy
  [ "$status" -eq 1 ]
  [[ "$output" == *"session $id"* ]]
  [ -d .cordon/volumes/busy ]
  grep -q '"name": "busy"' ".cordon/sessions/$id/state.json"
  run $CORDON session destroy "$id"
  [ "$status" -eq 0 ]
  run $CORDON volume remove busy
  [ "$status" -eq 0 ]
  [ ! -e .cordon/volumes/busy ]
}

@test "worktree refuses -v by name before anything is made, even without enforcement" {
  run $CORDON run --backend worktree --quiet -v cache:/data -- true
  [ "$status" -ne 0 ]
  [[ "$output" == *"persistent_volumes"* ]]
  run $CORDON session create --backend worktree --quiet --no-require-enforcement -v cache:/data
  [ "$status" -ne 0 ]
  [[ "$output" == *"persistent_volumes"* ]]
  [ ! -e .cordon/volumes/cache ]
  [ -z "$(ls .cordon/sessions 2>/dev/null)" ]
}

@test "a snapshot of the workspace never holds a volume's files" {
  ns_or_skip
  id=$($CORDON session create -v cache:/data)
  run $CORDON session exec "$id" -- sh -c 'echo ws > in-workspace; echo vol > /data/in-volume'
  [ "$status" -eq 0 ]
  snap=$($CORDON session snapshot "$id")
  run $CORDON snapshot show "$snap"
  [ "$status" -eq 0 ]
  [[ "$output" == *"in-workspace"* ]]
  [[ "$output" != *"in-volume"* ]]
  # nor when the workspace is the project itself, which holds .cordon/volumes/
  id2=$($CORDON session create --workspace "$PROJECT" -v cache:/data)
  run $CORDON session exec "$id2" -- sh -c 'ls -a /workspace/.cordon; cat /data/in-volume'
  [ "$output" = "$(printf '.\n..\nvol')" ]
  snap=$($CORDON session snapshot "$id2")
  run $CORDON snapshot show "$snap"
  [ "$status" -eq 0 ]
  [[ "$output" != *"in-volume"* ]]
}

@test "docker: a named volume keeps its data across sessions, :ro refuses writes" {
  why=$("$CORDON" backends --json 2>&1 | tr -d '\n' | grep -o '"name": "docker"[^}]*' |
    grep -o '"unavailable_reason": "[^"]*"' || true)
  [ -z "$why" ] || skip "docker backend unavailable: ${why#*: }"
  run $CORDON run --backend docker -v dcache:/data -- sh -c 'echo from-docker > /data/f'
  [ "$status" -eq 0 ]
  run $CORDON run --backend docker -v dcache:/data -- cat /data/f
  [ "$status" -eq 0 ]
  [ "$output" = from-docker ]
  run $CORDON run --backend docker -v dcache:/data:ro -- sh -c 'echo no > /data/f'
  [ "$status" -ne 0 ]
  [ "$(cat .cordon/volumes/dcache/f)" = from-docker ]
  run $CORDON run --backend docker -v "$HOSTDIR:/host:ro" -- cat /host/hello
  [ "$status" -eq 0 ]
  [ "$output" = "from the host" ]
}

@test "from inside: a volume cannot be unmounted, and links planted in it are never followed by cordon" {
  ns_or_skip
  run $CORDON run -v trap:/data -- sh -c "ln -s '$HOSTDIR' /data/out && ln -s '$HOSTDIR/hello' /data/file && mkdir /data/d && ln -s / /data/d/root"
  [ "$status" -eq 0 ]
  [ -L .cordon/volumes/trap/out ]
  run $CORDON run -v trap:/data -- sh -c 'umount /data || umount -l /data'
  [ "$status" -ne 0 ]
  # the links count for nothing in the size and go with the volume; their targets stay
  run $CORDON volume list
  [ "${lines[0]}" = "$(printf 'trap\t0\t%s/.cordon/volumes/trap' "$PROJECT")" ]
  run $CORDON volume remove trap
  [ "$status" -eq 0 ]
  [ ! -e .cordon/volumes/trap ]
  [ "$(cat "$HOSTDIR/hello")" = "from the host" ]
}
