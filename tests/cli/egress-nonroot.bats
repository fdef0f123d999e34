#!/usr/bin/env bats
# The egress proxy's daemon when cordon runs as another user than root: it makes a user
# namespace of its own, and in it the same mount namespace as under root (a read-only tmpfs
# root with only what name resolution reads), and keeps no capability. The user here is
# nobody (setpriv), in a project it owns. No traffic leaves loopback: the one request goes to
# a name pinned to 127.0.0.1 on a port nothing listens on.

bats_require_minimum_version 1.5.0

load common

setup_file() {
  backends_check_once ns
}

setup() {
  [ "$(id -u)" -eq 0 ] || skip "needs root to run cordon as nobody (setpriv)"
  command -v setpriv >/dev/null || skip "setpriv is not installed"
  project_enter egress-nonroot
  chown 65534:65534 "$PROJECT"
  chmod 755 "$PROJECT"
  mkdir -p "$PROJECT/.home"
  chown 65534:65534 "$PROJECT/.home"
  as_nobody unshare -U true 2>/dev/null ||
    skip "user namespaces are not offered to an unprivileged user here"
}

teardown() {
  project_leave
}

as_nobody() {
  setpriv --reuid=65534 --regid=65534 --clear-groups \
    env HOME="$PROJECT/.home" XDG_STATE_HOME="$PROJECT/.home/state" CORDON_PROJECT="$PROJECT" \
    "$@"
}

# The egress daemons (their comm) holding session $1's event log open.
egress_pids() {
  local pid
  for pid in $(pgrep -x cordon-egress 2>/dev/null); do
    ls -l "/proc/$pid/fd" 2>/dev/null | grep -q "sessions/$1/events.jsonl" && echo "$pid"
  done
  return 0
}

@test "egress nonroot: the proxy's daemon has its own user and mount namespaces, no capability, no host files" {
  need_ns
  local id pids pid root port
  echo secret >"$PROJECT/project-file"
  id=$(as_nobody "$CORDON" session create --net restricted --allow-domain pinned.test \
    --allow-cidr 127.0.0.0/8 --resolve pinned.test:127.0.0.1)
  [ -n "$id" ]
  pids=$(egress_pids "$id")
  [ -n "$pids" ]
  for pid in $pids; do
    [ "$(stat -c %u "/proc/$pid")" = 65534 ]
    [ "$(readlink "/proc/$pid/ns/user")" != "$(readlink /proc/self/ns/user)" ]
    [ "$(readlink "/proc/$pid/ns/mnt")" != "$(readlink /proc/self/ns/mnt)" ]
    grep -q '^CapEff:[[:space:]]*0*$' "/proc/$pid/status"
    grep -q '^CapPrm:[[:space:]]*0*$' "/proc/$pid/status"
    root=/proc/$pid/root
    ls -la "$root" "$root/etc"
    [ -e "$root/etc/resolv.conf" ] || [ ! -e /etc/resolv.conf ]
    [ ! -e "$root/root" ]
    [ ! -e "$root/home" ]
    [ ! -e "$root/proc" ]
    [ ! -e "$root/etc/passwd" ]
    [ ! -e "$root$PROJECT/project-file" ]
    ! touch "$root/planted" 2>/dev/null
  done
  # It still serves: the pinned name is allowed and dialled; nothing listens there.
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  run as_nobody "$CORDON" session exec "$id" -- curl -sS --max-time 20 "http://pinned.test:$port/"
  [[ "$output" == *"connect-failed"* ]]
  as_nobody "$CORDON" session destroy "$id"
}
