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
