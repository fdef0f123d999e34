#!/usr/bin/env bats
# The sandbox's environment as a user meets it: a private HOME outside the workspace, `--ro .`,
# `--cpus N` as the CPUs the command sees, `--hide-if-exists`, and resource limits for a user
# who is not root through a delegated cgroup. $CORDON is the binary under test; every test
# runs in a fresh project directory. ns tests skip where the ns backend is unavailable, docker
# tests where no engine answers (DOCKER_HOST).

bats_require_minimum_version 1.5.0

setup_file() {
  local probe
  probe=$(mktemp -d "${TMPDIR:-/tmp}/cordon-env-probe.XXXXXX")
  if ! CORDON_PROJECT=$probe "$CORDON" backends --json 2>/dev/null | tr -d '\n ' |
    grep -q '"name":"ns"[^}]*"available":true'; then
    export NS_SKIP="the ns backend is unavailable on this host"
  fi
  local why
  why=$(CORDON_PROJECT=$probe "$CORDON" backends --json 2>&1 | tr -d '\n' |
    grep -o '"name": "docker"[^}]*' | grep -o '"unavailable_reason": "[^"]*"' || true)
  [ -z "$why" ] || export DOCKER_SKIP="docker backend unavailable: ${why#*: }"
  rm -rf "$probe"
}

setup() {
  PROJECT=$(mktemp -d "${TMPDIR:-/tmp}/cordon-env.XXXXXX")
  export CORDON_PROJECT=$PROJECT
  export CORDON_QUIET=1
  export CORDON_KEY_DIR=$PROJECT.keys # waivers are audited (worktree)
  cd "$PROJECT"
}

teardown() {
  cd /
  rm -rf "$PROJECT" "$PROJECT.keys"
}

need_ns() { [ -z "${NS_SKIP:-}" ] || skip "$NS_SKIP"; }
need_docker() { [ -z "${DOCKER_SKIP:-}" ] || skip "$DOCKER_SKIP"; }

# The files of the workspace that a test's command could have left, .cordon/ apart.
workspace_files() { find "$PROJECT" -mindepth 1 -path "$PROJECT/.cordon" -prune -o -print; }

cache_cmd='mkdir -p ~/.cache && echo x > ~/.cache/f && echo hist >> ~/.sh_history; echo $HOME'

# ---- HOME --------------------------------------------------------------------------------------

@test "ns: HOME is a private writable directory outside the workspace" {
  need_ns
  run -0 "$CORDON" run --workspace . -- sh -c "$cache_cmd"
  [ "${lines[-1]}" = /home/sandbox ]
  [ -z "$(workspace_files)" ]
  # Named as the sandbox user's home in its /etc/passwd.
  run -0 "$CORDON" run -- sh -c 'grep "^cordon:" /etc/passwd | cut -d: -f6; test -w ~ && echo w'
  [ "${lines[0]}" = /home/sandbox ]
  [ "${lines[1]}" = w ]
}

@test "ns: a session keeps its HOME across execs, and its snapshot does not include it" {
  need_ns
  s=$("$CORDON" session create --workspace .)
  run -0 "$CORDON" session exec "$s" -- sh -c "$cache_cmd; echo data > ws-file"
  [ "${lines[-1]}" = /home/sandbox ]
  run -0 "$CORDON" session exec "$s" -- cat /home/sandbox/.cache/f
  [ "$output" = x ]
  [ "$(workspace_files)" = "$PROJECT/ws-file" ]
  run -0 "$CORDON" session snapshot "$s"
  snap=$output
  run -0 "$CORDON" snapshot show "$snap"
  [[ "$output" == *ws-file* ]]
  [[ "$output" != *.cache* && "$output" != *sh_history* ]]
  "$CORDON" session destroy "$s"
}

@test "worktree: HOME is a directory in the session's state, not the workspace" {
  run -0 "$CORDON" run --backend worktree --no-require-enforcement --workspace . -- sh -c "$cache_cmd"
  home=${lines[-1]}
  [[ "$home" == "$PROJECT/.cordon/sessions/"*/home ]]
  [ -z "$(workspace_files)" ]
  s=$("$CORDON" session create --backend worktree --no-require-enforcement --workspace .)
  run -0 "$CORDON" session exec "$s" -- sh -c "$cache_cmd"
  run -0 "$CORDON" session exec "$s" -- sh -c 'cat ~/.cache/f'
  [ "$output" = x ]
  "$CORDON" session destroy "$s"
}

@test "docker: HOME is a private writable tmpfs outside the workspace" {
  need_docker
  s=$("$CORDON" session create --backend docker --workspace .)
  run -0 "$CORDON" session exec "$s" -- sh -c "$cache_cmd"
  [ "${lines[-1]}" = /home/sandbox ]
  run -0 "$CORDON" session exec "$s" -- cat /home/sandbox/.cache/f
  [ "$output" = x ]
  [ -z "$(workspace_files)" ]
  "$CORDON" session destroy "$s"
}

# ---- --ro . -------------------------------------------------------------------------------------

# Every way to write in the workspace, from inside; prints one line per write that got through.
ro_attack='for p in new-file old-file sub/new sub/old; do (echo x > "$p") 2>/dev/null && echo "WROTE $p"; done
mkdir made 2>/dev/null && echo "WROTE made"; rm -f old-file 2>/dev/null; [ -e old-file ] || echo "REMOVED old-file"
mv sub moved 2>/dev/null && echo "MOVED sub"; ln -s /etc link 2>/dev/null && echo "WROTE link"
touch ~/home-ok && echo home-writable; echo x > /tmp/t && echo tmp-writable; cat old-file'

ro_workspace() {
  echo old >old-file
  mkdir sub
  echo old >sub/old
}

ro_check() {
  [[ "$output" != *WROTE* && "$output" != *REMOVED* && "$output" != *MOVED* ]]
  [[ "$output" == *home-writable* && "$output" == *tmp-writable* ]]
  [ "${lines[-1]}" = old ]
  [ "$(cat "$PROJECT/old-file")" = old ]
  [ ! -e "$PROJECT/new-file" ] && [ ! -e "$PROJECT/made" ] && [ -d "$PROJECT/sub" ]
}

@test "ns: --ro . makes the whole workspace read-only (run and session)" {
  need_ns
  ro_workspace
  run -0 "$CORDON" run --workspace . --ro . -- sh -c "$ro_attack"
  ro_check
  s=$("$CORDON" session create --workspace . --ro ./ --hide sub/old)
  run -0 "$CORDON" session exec "$s" -- sh -c "$ro_attack"
  ro_check
  "$CORDON" session destroy "$s"
  # Without it the same commands write (the attack can tell).
  run -0 "$CORDON" run --workspace . -- sh -c 'echo x > new-file && echo WROTE'
  [ "$output" = WROTE ]
}

@test "docker: --ro . makes the whole workspace read-only" {
  need_docker
  ro_workspace
  s=$("$CORDON" session create --backend docker --workspace . --ro . --hide sub/old)
  run -0 "$CORDON" session exec "$s" -- sh -c "$ro_attack"
  ro_check
  "$CORDON" session destroy "$s"
}

@test "--ro with '..' or an absolute path is still refused" {
  need_ns
  run "$CORDON" run --workspace . --ro .. -- true
  [ "$status" -ne 0 ]
  run "$CORDON" run --workspace . --ro / -- true
  [ "$status" -ne 0 ]
}

# ---- --cpus N ------------------------------------------------------------------------------------

count_cpus='nproc; if command -v python3 >/dev/null; then python3 -c "import os;print(len(os.sched_getaffinity(0)))"; else nproc; fi'

@test "ns: --cpus 1 is the number of CPUs the command sees (run and session)" {
  need_ns
  [ "$(nproc)" -ge 2 ] || skip "this host has one CPU: --cpus 1 would change nothing"
  run -0 "$CORDON" run --cpus 1 -- sh -c "$count_cpus"
  [ "${lines[0]}" = 1 ] && [ "${lines[1]}" = 1 ]
  s=$("$CORDON" session create --cpus 1)
  run -0 "$CORDON" session exec "$s" -- sh -c "$count_cpus"
  [ "${lines[0]}" = 1 ] && [ "${lines[1]}" = 1 ]
  "$CORDON" session destroy "$s"
  # A fraction keeps the quota only; no limit, every CPU.
  run -0 "$CORDON" run --cpus 0.5 -- nproc
  [ "$output" = "$(nproc)" ]
  run -0 "$CORDON" run -- nproc
  [ "$output" = "$(nproc)" ]
}

@test "--cpus above the host's CPU count is a clear error" {
  need_ns
  n=$(($(nproc) + 1))
  run "$CORDON" run --cpus "$n" -- true
  [ "$status" -eq 125 ]
  [[ "$output" == *"--cpus $n is more than the $(nproc) CPU"* ]]
}

@test "docker: --cpus 1 is the number of CPUs the command sees" {
  need_docker
  [ "$(nproc)" -ge 2 ] || skip "this host has one CPU: --cpus 1 would change nothing"
  s=$("$CORDON" session create --backend docker --cpus 1 --workspace .)
  run -0 "$CORDON" session exec "$s" -- nproc
  [ "$output" = 1 ]
  "$CORDON" session destroy "$s"
  run "$CORDON" run --backend docker --workspace . --cpus "$(($(nproc) + 1))" -- true
  [ "$status" -eq 125 ]
  [[ "$output" == *"is more than the $(nproc) CPU"* ]]
}

# ---- --hide-if-exists ------------------------------------------------------------------------------

@test "ns: --hide-if-exists hides what exists and skips what does not; --hide of a missing path fails" {
  need_ns
  echo secret >.env
  mkdir -p .aws && echo key >.aws/credentials
  run -0 "$CORDON" run --workspace . --hide-if-exists .env --hide-if-exists .aws \
    --hide-if-exists .npmrc --hide-if-exists no/such/dir -- \
    sh -c 'cat .env .aws/credentials 2>/dev/null; ls -A .aws; echo end'
  [[ "$output" != *secret* && "$output" != *key* && "$output" != *credentials* ]]
  [ "${lines[-1]}" = end ]
  s=$("$CORDON" session create --workspace . --hide-if-exists .env --hide-if-exists .npmrc)
  run -0 "$CORDON" session exec "$s" -- sh -c 'cat .env; echo end'
  [ "$output" = end ]
  "$CORDON" session destroy "$s"
  # In a fresh workspace, what --file puts there counts.
  run -0 "$CORDON" run --file .env=.env --hide-if-exists .env -- sh -c 'cat .env; echo end'
  [ "$output" = end ]
  run "$CORDON" run --workspace . --hide .npmrc -- true
  [ "$status" -eq 125 ]
  [[ "$output" == *".npmrc"* ]]
  # Not a way around the checks of --hide.
  run "$CORDON" run --workspace . --hide-if-exists ../x -- true
  [ "$status" -eq 125 ]
  [[ "$output" == *"'..'"* ]]
}

@test "docker: --hide-if-exists hides what exists and skips what does not" {
  need_docker
  echo secret >.env
  s=$("$CORDON" session create --backend docker --workspace . --hide-if-exists .env \
    --hide-if-exists .npmrc)
  run -0 "$CORDON" session exec "$s" -- sh -c 'cat .env; echo end'
  [ "$output" = end ]
  "$CORDON" session destroy "$s"
}

@test "--hide-if-exists is in the --help of run and session create" {
  run -0 "$CORDON" run --help
  [[ "$output" == *"--hide-if-exists PATH"* ]]
  run -0 "$CORDON" session create --help
  [[ "$output" == *"--hide-if-exists PATH"* ]]
}

# ---- rootless ------------------------------------------------------------------------------------

# Run cordon as uid 65534 (no capabilities, no groups) in a project that user owns, the way
# tests/conformance/rootless.sh does; the binary is copied where that user can execute it.
rootless_setup() {
  [ "$(id -u)" -eq 0 ] || skip "needs root to become uid 65534"
  as_user="setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all"
  $as_user unshare -U true 2>/dev/null || skip "unprivileged user namespaces are unavailable here"
  RL=$(mktemp -d "${TMPDIR:-/tmp}/cordon-env-rootless.XXXXXX")
  chmod 755 "$RL"
  cp "$CORDON" "$RL/cordon"
  mkdir "$RL/project" "$RL/home" # cordon's own state goes under the user's HOME, not the project
  chown 65534:65534 "$RL/project" "$RL/home"
}

rootless_cordon() {
  (cd "$RL/project" && $as_user env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$RL/home" \
    LANG=C.UTF-8 CORDON_PROJECT="$RL/project" ${CGROOT:+CORDON_CGROUP_ROOT=$CGROOT} \
    "$RL/cordon" "$@")
}

@test "rootless: HOME is private and writable, outside the workspace" {
  need_ns
  rootless_setup
  run -0 rootless_cordon run --workspace . -- sh -c "$cache_cmd"
  [ "${lines[-1]}" = /home/sandbox ]
  [ -z "$(find "$RL/project" -mindepth 1 -path "$RL/project/.cordon" -prune -o -print)" ]
  rm -rf "$RL"
}

@test "rootless: a limit with no delegated cgroup is refused, saying how to delegate one" {
  need_ns
  rootless_setup
  run rootless_cordon run --memory 64M -- true
  rm -rf "$RL"
  [ "$status" -eq 125 ]
  [[ "$output" == *"memory limit cannot be enforced"* ]]
  [[ "$output" == *"delegate a cgroup v2 subtree"*"CORDON_CGROUP_ROOT"* ]]
  [ "${#lines[@]}" -eq 1 ]
}

# The v2 hierarchy's mount point, when it offers the memory and pids controllers.
v2_with_controllers() {
  local mp
  mp=$(awk '$9 == "cgroup2" { print $5; exit }' /proc/self/mountinfo)
  [ -n "$mp" ] || return 1
  grep -qw memory "$mp/cgroup.controllers" && grep -qw pids "$mp/cgroup.controllers" || return 1
  echo "$mp"
}

# As root, delegate a v2 subtree to uid 65534 (its controllers enabled), with a leaf for the
# caller's own process; $1: "env" names it in CORDON_CGROUP_ROOT, "own" lets cordon find it.
delegated_limit() {
  need_ns
  rootless_setup
  local mp
  mp=$(v2_with_controllers) ||
    skip "the cgroup v2 hierarchy here does not offer memory and pids (a hybrid host: they are on v1)"
  local parent
  parent=$mp$(awk -F: '$1 == "0" { print $3 }' /proc/self/cgroup)
  [ "$parent" != "$mp/" ] || parent=$mp
  echo "+memory +pids" >"$parent/cgroup.subtree_control" 2>/dev/null ||
    skip "cannot enable memory and pids for the children of $parent"
  D=$parent/cordon-test-delegated-$$
  mkdir "$D" "$D/leaf"
  chown 65534:65534 "$D" "$D/cgroup.procs" "$D/cgroup.subtree_control" "$D/cgroup.threads" \
    "$D/leaf" "$D/leaf/cgroup.procs"
  [ "$1" = env ] && CGROOT=$D
  # The caller's shell is born in the leaf, as a user's login would be in its session.
  run sh -c "echo \$\$ > '$D/leaf/cgroup.procs' && exec \"\$@\"" sh \
    bash -c "$(declare -f rootless_cordon); as_user='$as_user' RL='$RL' CGROOT='${CGROOT:-}';
      rootless_cordon run --memory 64M --pids 32 -- sh -c 'cat /sys/fs/cgroup/memory.max 2>/dev/null; echo ran'"
  rmdir "$D/leaf" "$D"/cordon-* "$D" 2>/dev/null || true
  rm -rf "$RL"
  [ "$status" -eq 0 ]
  [ "${lines[-1]}" = ran ]
}

@test "rootless: limits in the operator's delegated cgroup (CORDON_CGROUP_ROOT)" {
  delegated_limit env
}

@test "rootless: limits in the user's own delegated cgroup" {
  delegated_limit own
}

# The placement alone, which any v2 hierarchy shows (even one without controllers): a rootless
# session's cgroup goes into the delegated subtree, beside the caller's leaf, not inside it.
delegated_placement() {
  need_ns
  rootless_setup
  local mp own
  mp=$(awk '$9 == "cgroup2" { print $5; exit }' /proc/self/mountinfo)
  [ -n "$mp" ] || skip "no cgroup v2 hierarchy here"
  own=$(awk -F: '$1 == "0" { print $3 }' /proc/self/cgroup)
  D=$mp${own%/}/cordon-test-placement-$$
  mkdir "$D" "$D/leaf" || skip "cannot make a cgroup under $mp$own"
  chown 65534:65534 "$D" "$D/cgroup.procs" "$D/cgroup.subtree_control" "$D/cgroup.threads" \
    "$D/leaf" "$D/leaf/cgroup.procs"
  [ "$1" = env ] && CGROOT=$D
  local in_leaf="echo \$\$ > '$D/leaf/cgroup.procs' && exec \"\$@\""
  local fns
  fns="$(declare -f rootless_cordon); as_user='$as_user' RL='$RL' CGROOT='${CGROOT:-}'"
  s=$(sh -c "$in_leaf" sh bash -c "$fns; rootless_cordon session create")
  placed=$(find "$D" -maxdepth 1 -name "cordon-$s")
  run sh -c "$in_leaf" sh bash -c "$fns; rootless_cordon session exec $s -- cat /proc/self/cgroup"
  sh -c "$in_leaf" sh bash -c "$fns; rootless_cordon session destroy $s"
  rmdir "$D/leaf" "$D" 2>/dev/null || true
  rm -rf "$RL"
  [ -n "$placed" ]
  [ "$status" -eq 0 ]
  [[ "$output" == *"0::/exec-"* ]]
}

@test "rootless: a session's cgroup goes in CORDON_CGROUP_ROOT" {
  delegated_placement env
}

@test "rootless: a session's cgroup goes in the user's own delegated cgroup" {
  delegated_placement own
}
