#!/usr/bin/env bats
# The same flags mean the same on every backend (issue 16): without --net a confining backend
# gives egress loopback (a private lo, up, and nothing else: a test suite's local server works),
# --net none gives no interface up at all (ns; docker refuses it by name, its engine keeps lo
# up), and commands run as the same non-root user on ns and docker (uid/gid 1000, "cordon"),
# for `run`, created and resumed sessions alike. --user root is uid 0 of the ns sandbox's user
# namespace, still nobody on the host. $CORDON is the binary under test; the docker tests use the
# engine DOCKER_HOST names and skip, with the reason, without one. Network traffic stays on
# 127.0.0.1 inside the sandboxes.

bats_require_minimum_version 1.5.0

load common

setup_file() {
  backends_check_once ns docker
}

setup() {
  project_enter parity
  export CORDON_KEY_DIR=$PROJECT/.keys
  unset CORDON_QUIET CORDON_SANDBOX CORDON_BACKEND CORDON_SANDBOX_ALLOW
}

teardown() {
  project_leave
}

# A server on 127.0.0.1 and a client of it, inside: "reached" or "unreachable: WHY".
# python3 (ns sees the host's /usr) or busybox nc (the docker test image).
SERVER_CLIENT='
if command -v python3 >/dev/null 2>&1; then
  python3 -c "
import socket
try:
    s = socket.socket(); s.bind((\"127.0.0.1\", 0)); s.listen(1)
    c = socket.create_connection(s.getsockname(), timeout=5); a, _ = s.accept()
    c.sendall(b\"ping\"); print(\"reached\" if a.recv(4) == b\"ping\" else \"garbled\")
except OSError as e:
    print(\"unreachable: %s\" % e)"
else
  # The server reads a fifo this shell holds open, as the conformance probe does: at EOF on its
  # stdin busybox nc half-closes at once, and a client that saw that FIN before reading its own
  # stdin ended without sending the ping (1 run in 6 to 12 under load). Up to 10 s each for the
  # server to listen and for its copy of the ping.
  mkfifo /tmp/got.in; exec 3<>/tmp/got.in
  busybox nc -l -p 47312 <&3 > /tmp/got 2>/dev/null & server=$!
  i=0; while [ $i -lt 100 ]; do
    echo ping | busybox nc -w 2 127.0.0.1 47312 2>/dev/null && break; sleep 0.1; i=$((i+1))
  done
  i=0; while [ $i -lt 100 ] && [ ! -s /tmp/got ]; do sleep 0.1; i=$((i+1)); done
  kill $server 2>/dev/null; wait $server 2>/dev/null; exec 3>&-
  if [ "$(cat /tmp/got)" = ping ]; then echo reached; else echo "unreachable: no answer"; fi
fi'

# Interfaces inside other than lo, from /proc/net/dev (no /sys in the ns sandbox).
OTHER_IFACES='tail -n +3 /proc/net/dev | grep -v "^ *lo:" | cut -d: -f1 | tr -d " "'

# The docker user tests: the workspace goes to uid 1000 only when cordon runs as root.
need_root_for_docker_user() {
  [ "$(id -u)" -eq 0 ] || skip "cordon gives its docker workspace to uid 1000 only as root"
}

@test "parity: without --net, ns gives loopback: a server on 127.0.0.1 inside is reachable, lo is the only interface" {
  need_ns
  run "$CORDON" run --backend ns -- sh -c "$SERVER_CLIENT"
  [ "$status" -eq 0 ]
  [ "$output" = reached ]
  run "$CORDON" run --backend ns -- sh -c "$OTHER_IFACES"
  [ "$status" -eq 0 ]
  [ -z "$output" ]
  # A session too, not only `run`.
  sid=$("$CORDON" session create --backend ns)
  run "$CORDON" session exec "$sid" -- sh -c "$SERVER_CLIENT"
  "$CORDON" session destroy "$sid"
  [ "$output" = reached ]
}

@test "parity: --net none on ns has no interface up: connecting to 127.0.0.1 fails, lo is down" {
  need_ns
  run "$CORDON" run --backend ns --net none -- sh -c "$SERVER_CLIENT"
  [ "$status" -eq 0 ]
  [[ "$output" == unreachable:* ]]
  run "$CORDON" run --backend ns --net none -- sh -c "$OTHER_IFACES"
  [ -z "$output" ]
  # lo exists but is not UP (busybox's ip reads its flags without /sys).
  if command -v busybox >/dev/null; then
    run "$CORDON" run --backend ns --net none -- busybox ip link show lo
    [ "$status" -eq 0 ]
    [[ "$output" != *"UP"* ]]
    run "$CORDON" run --backend ns -- busybox ip link show lo
    [[ "$output" == *"<LOOPBACK,UP"* ]]
  fi
}

@test "parity: without --net, docker gives loopback too; --net none is refused by name" {
  need_docker
  run "$CORDON" run --backend docker -- sh -c "$SERVER_CLIENT"
  [ "$status" -eq 0 ]
  [ "$output" = reached ]
  run "$CORDON" run --backend docker -- sh -c "$OTHER_IFACES"
  [ "$status" -eq 0 ]
  [ -z "$output" ]
  run "$CORDON" run --backend docker --net none -- true
  [ "$status" -eq 125 ]
  [[ "$output" == *"does not enforce net_none (--net none)"* ]]
}

@test "parity: the default egress is loopback in --help, and worktree keeps open" {
  run "$CORDON" run --help
  [[ "$output" == *"--net CLASS"*"default: loopback"* ]]
  run "$CORDON" run --backend worktree --quiet -- true
  [ "$status" -eq 0 ]
}

@test "parity: ns runs commands as uid/gid 1000 named cordon, in run, created and resumed sessions" {
  need_ns
  run "$CORDON" run --backend ns -- sh -c 'echo "$(id -u):$(id -g):$(id -un)"'
  [ "$output" = "1000:1000:cordon" ]
  sid=$("$CORDON" session create --backend ns)
  run "$CORDON" session exec "$sid" -- sh -c 'echo "$(id -u):$(id -g):$(id -un)"'
  [ "$output" = "1000:1000:cordon" ]
  snap=$("$CORDON" session snapshot "$sid")
  "$CORDON" session destroy "$sid"
  sid=$("$CORDON" session create --backend ns --from "$snap")
  run "$CORDON" session exec "$sid" -- sh -c 'echo "$(id -u):$(id -g):$(id -un)"'
  "$CORDON" session destroy "$sid"
  [ "$output" = "1000:1000:cordon" ]
}

@test "parity: docker runs commands as the same user as ns, in run, created and resumed sessions" {
  need_docker
  need_root_for_docker_user
  run "$CORDON" run --backend docker -- sh -c 'echo "$(id -u):$(id -g):$(id -un)"'
  [ "$status" -eq 0 ]
  [ "$output" = "1000:1000:cordon" ]
  sid=$("$CORDON" session create --backend docker)
  run "$CORDON" session exec "$sid" -- sh -c 'echo "$(id -u):$(id -g):$(id -un)"'
  [ "$output" = "1000:1000:cordon" ]
  # What the command writes stays readable and removable by the host user.
  run "$CORDON" session exec "$sid" -- sh -c 'mkdir -p out/deep && echo made > out/deep/file'
  [ "$status" -eq 0 ]
  ws=$PROJECT/.cordon/sessions/$sid/workspace
  [ "$(cat "$ws/out/deep/file")" = made ]
  rm -r "$ws/out"
  [ ! -e "$ws/out" ]
  # A file the host writes into the session is the sandbox user's to change.
  echo host | "$CORDON" session write "$sid" from-host/note
  run "$CORDON" session exec "$sid" -- sh -c 'echo more >> from-host/note && echo ok'
  [ "$output" = ok ]
  snap=$("$CORDON" session snapshot "$sid")
  "$CORDON" session destroy "$sid"
  sid=$("$CORDON" session create --backend docker --from "$snap")
  run "$CORDON" session exec "$sid" -- sh -c 'echo "$(id -u):$(id -g):$(id -un)"'
  "$CORDON" session destroy "$sid"
  [ "$output" = "1000:1000:cordon" ]
}

@test "parity: ns and docker print the same id -u and id -un" {
  need_ns
  need_docker
  need_root_for_docker_user
  ns=$("$CORDON" run --backend ns -- sh -c 'id -u; id -un')
  docker=$("$CORDON" run --backend docker -- sh -c 'id -u; id -un')
  [ "$ns" = "$docker" ]
  [ "$ns" = "$(printf '1000\ncordon')" ]
}

@test "parity: files the ns command writes in the workspace belong to the host user afterwards" {
  need_ns
  mkdir ws
  run "$CORDON" run --backend ns --workspace ws -- sh -c 'mkdir -p out/deep && echo made > out/deep/file'
  [ "$status" -eq 0 ]
  [ "$(stat -c %u ws/out/deep/file)" = "$(id -u)" ]
  [ "$(cat ws/out/deep/file)" = made ]
  rm -r ws/out
}

@test "parity: --user root on ns is uid 0 inside and still nobody on the host" {
  need_ns
  [ "$(id -u)" -eq 0 ] || skip "the host-root-only file and /proc/sys need cordon to run as root"
  mkdir ws grant
  echo secret > grant/root-only
  chmod 600 grant/root-only
  chmod 755 grant
  run "$CORDON" run --backend ns --user root --workspace ws --allow-ro "$PROJECT/grant" -- sh -c \
    'echo "$(id -u):$(id -g):$(id -un)"; cat '"$PROJECT"'/grant/root-only 2>&1;
     echo 1 > /proc/sys/kernel/ns_last_pid 2>&1 || echo procsys-refused;
     cat /etc/shadow 2>&1 || echo shadow-refused; touch made && echo touched'
  echo "$output"
  [ "${lines[0]}" = "0:0:root" ]
  [[ "$output" != *secret* ]]
  [[ "$output" == *"Permission denied"* ]]
  [[ "$output" == *procsys-refused* ]]
  [[ "$output" == *shadow-refused* ]]
  [[ "$output" == *touched* ]]
  # What root inside wrote is the workspace owner's on the host, not a host root escalation.
  [ "$(stat -c %u ws/made)" = "$(stat -c %u ws)" ]
  # A session takes --user too.
  sid=$("$CORDON" session create --backend ns --user root)
  run "$CORDON" session exec "$sid" -- id -u
  "$CORDON" session destroy "$sid"
  [ "$output" = 0 ]
}

@test "parity: --user root is refused where it cannot be given safely; other users are a usage error" {
  run "$CORDON" run --backend worktree --quiet --user root -- true
  [ "$status" -eq 125 ]
  [[ "$output" == *"--user root is refused"* ]]
  run "$CORDON" run --user bob -- true
  [ "$status" -eq 125 ]
  [[ "$output" == *"--user bob"* ]]
  run "$CORDON" session create --user bob
  [ "$status" -eq 2 ]
}

@test "parity: docker refuses --user root on an engine without userns-remap, naming what is missing" {
  need_docker
  if docker_info=$(DOCKER_HOST=${DOCKER_HOST:-} docker info --format '{{.SecurityOptions}}' 2>/dev/null) &&
     [[ "$docker_info" == *userns* ]]; then
    skip "this engine runs with userns-remap: --user root is offered there"
  fi
  run "$CORDON" run --backend docker --user root -- id -u
  [ "$status" -eq 125 ]
  [[ "$output" == *"userns-remap"* ]]
  [ -z "$(ls .cordon/sessions 2>/dev/null)" ]
}
