#!/usr/bin/env bats
# Devices in the sandbox: --device HOST[:PATH] and --gpu all|N on `cordon run` and
# `cordon session create` (ns; docker when DOCKER_HOST's engine is up, else skipped). The nodes
# are made here with mknod, copies of /dev/null's and /dev/zero's numbers; GPU discovery reads
# a directory of such copies named like NVIDIA and DRI nodes (CORDON_DEV_ROOT).

bats_require_minimum_version 1.5.0

setup() {
  PROJECT=$(mktemp -d "${TMPDIR:-/tmp}/cordon-devices-cli.XXXXXX")
  export CORDON_PROJECT=$PROJECT
  export CORDON_KEY_DIR=$PROJECT/keys
  export XDG_STATE_HOME=$PROJECT/state
  mkdir -p "$CORDON_KEY_DIR" "$XDG_STATE_HOME/cordon" "$PROJECT/.cordon"
  chmod 700 "$CORDON_KEY_DIR"
  cd "$PROJECT"
  NODES=$(mktemp -d "${TMPDIR:-/tmp}/cordon-devices-nodes.XXXXXX")
  chmod 755 "$NODES"
  unset CORDON_DEV_ROOT
}

teardown() {
  cd /
  local id
  for id in $("$CORDON" session list 2>/dev/null | awk '{print $1}'); do
    "$CORDON" session destroy "$id" >/dev/null 2>&1 || true
  done
  rm -rf "$PROJECT" "$NODES"
}

ns_or_skip() {
  "$CORDON" run --backend ns -- true >/dev/null 2>&1 || skip "ns backend unavailable here"
}

# granted: a copy of /dev/null; other: a copy of /dev/zero, never granted.
make_nodes() {
  [ "$(id -u)" -eq 0 ] || skip "mknod needs root"
  mknod -m 666 "$NODES/granted" c 1 3 || skip "cannot mknod in $NODES"
  mknod -m 666 "$NODES/other" c 1 5
}

# Fake GPU nodes under $NODES/gpu (copies of /dev/null), the directory CORDON_DEV_ROOT names.
make_gpus() {
  [ "$(id -u)" -eq 0 ] || skip "mknod needs root"
  mkdir -p "$NODES/gpu/dri"
  mknod -m 666 "$NODES/gpu/nvidia0" c 1 3 || skip "cannot mknod in $NODES"
  mknod -m 666 "$NODES/gpu/nvidia1" c 1 3
  mknod -m 666 "$NODES/gpu/nvidiactl" c 1 3
  mknod -m 666 "$NODES/gpu/dri/card0" c 1 3
}

docker_or_skip() {
  [ -n "${DOCKER_HOST:-}" ] || export DOCKER_HOST=unix:///run/cordon-docker/docker.sock
  "$CORDON" backends --json | python3 -c '
import json, sys
sys.exit(0 if any(b["name"] == "docker" and b["available"] for b in json.load(sys.stdin)) else 1)' ||
    skip "docker engine unreachable at $DOCKER_HOST"
}

@test "--help of run and session create describes --device and --gpu" {
  run "$CORDON" run --help
  [ "$status" -eq 0 ]
  [[ "$output" == *"--device HOST[:PATH]"* ]]
  [[ "$output" == *"--gpu all|N[,N...]"* ]]
  run "$CORDON" session create --help
  [[ "$output" == *"--device HOST[:PATH]"* ]]
  [[ "$output" == *"--gpu"* ]]
}

@test "ns: a granted node is usable inside; one not granted is absent and cannot be made" {
  ns_or_skip
  make_nodes
  run --separate-stderr "$CORDON" run --backend ns --device "$NODES/granted" -- sh -c '
    test -c /dev/granted && echo is-char
    echo data > /dev/granted && echo wrote
    head -c 3 /dev/granted | wc -c
    ls /dev/other 2>/dev/null || echo other-absent
    ls "'"$NODES"'/other" 2>/dev/null || echo host-path-absent
    mknod /dev/other c 1 5 2>/dev/null && echo MADE-IN-DEV
    mknod /tmp/other c 1 5 2>/dev/null && echo MADE-IN-TMP
    mknod "$HOME/other" c 1 5 2>/dev/null && echo MADE-IN-HOME
    true'
  [ "$status" -eq 0 ]
  [[ "$output" == *is-char* ]]
  [[ "$output" == *wrote* ]]
  [[ "$output" == *other-absent* ]]
  [[ "$output" == *host-path-absent* ]]
  [[ "$output" != *MADE-IN* ]]
  # a null device reads nothing: 0 bytes
  [[ "$output" == *$'\n0'* ]]
}

@test "ns: even as --user root a node cannot be made, and the granted one stays the only one" {
  ns_or_skip
  make_nodes
  run "$CORDON" run --backend ns --user root --device "$NODES/granted" -- sh -c '
    mknod /tmp/other c 1 5 2>/dev/null && echo MADE-IN-TMP
    mknod /dev/other c 1 5 2>/dev/null && echo MADE-IN-DEV
    ls /dev/other 2>/dev/null || echo other-absent
    test -c /dev/granted && echo is-char'
  [ "$status" -eq 0 ]
  [[ "$output" != *MADE-IN* ]]
  [[ "$output" == *other-absent* ]]
  [[ "$output" == *is-char* ]]
}

@test "ns: without --device no such node exists inside (today's /dev)" {
  ns_or_skip
  make_nodes
  run "$CORDON" run --backend ns -- sh -c 'ls /dev/granted 2>/dev/null || echo absent'
  [ "$status" -eq 0 ]
  [ "$output" = absent ]
}

@test "ns: --device HOST:PATH puts the node at PATH beneath /dev; session create takes it too" {
  ns_or_skip
  make_nodes
  run "$CORDON" run --backend ns --device "$NODES/granted:/dev/sub/dir/mine" -- \
    sh -c 'test -c /dev/sub/dir/mine && echo ok'
  [ "$status" -eq 0 ]
  [ "$output" = ok ]
  run --separate-stderr "$CORDON" session create --backend ns --device "$NODES/granted"
  [ "$status" -eq 0 ]
  id=$output
  run "$CORDON" session exec "$id" -- sh -c 'test -c /dev/granted && echo ok'
  [ "$status" -eq 0 ]
  [ "$output" = ok ]
}

@test "--device refuses what is not a character device, a target outside /dev, a sandbox node" {
  make_nodes
  run "$CORDON" run --backend ns --device /etc/passwd -- true
  [ "$status" -ne 0 ]
  [[ "$output" == *"device /etc/passwd is not a character device node"* ]]
  run "$CORDON" run --backend ns --device "$NODES/missing" -- true
  [ "$status" -ne 0 ]
  [[ "$output" == *"device $NODES/missing"* ]]
  run "$CORDON" run --backend ns --device "$NODES/granted:/etc/x" -- true
  [ "$status" -ne 0 ]
  [[ "$output" == *"only beneath /dev"* ]]
  run "$CORDON" run --backend ns --device "$NODES/granted:/dev/../etc/x" -- true
  [ "$status" -ne 0 ]
  [[ "$output" == *"only beneath /dev"* ]]
  run "$CORDON" run --backend ns --device "$NODES/granted:/dev/null" -- true
  [ "$status" -ne 0 ]
  [[ "$output" == *"one of the sandbox's own nodes"* ]]
  run "$CORDON" run --backend ns --device relative -- true
  [ "$status" -ne 0 ]
  [[ "$output" == *"absolute path"* ]]
}

@test "a backend that cannot pass devices is refused them by name" {
  make_nodes
  run "$CORDON" run --backend worktree --device "$NODES/granted" -- true
  [ "$status" -ne 0 ]
  [[ "$output" == *"backend worktree cannot pass devices"* ]]
}

@test "--gpu on a host without GPUs is refused, naming that; gpu is not declared" {
  export CORDON_DEV_ROOT=$NODES/empty
  mkdir -p "$CORDON_DEV_ROOT"
  run "$CORDON" run --backend ns --gpu all -- true
  [ "$status" -ne 0 ]
  [[ "$output" == *"--gpu all: this host has no GPU"* ]]
  run "$CORDON" backends --json
  [ "$status" -eq 0 ]
  echo "$output" | python3 -c '
import json, sys
for b in json.load(sys.stdin):
    assert "gpu" not in b.get("capabilities", []), b'
}

@test "--gpu on this machine's own /dev: refused by name when it has no GPU" {
  if ls /dev/nvidia[0-9]* /dev/dri/card* >/dev/null 2>&1; then
    skip "this host has GPU nodes"
  fi
  run "$CORDON" run --backend ns --gpu all -- true
  [ "$status" -ne 0 ]
  [[ "$output" == *"this host has no GPU"* ]]
  run "$CORDON" backends --json
  echo "$output" | python3 -c '
import json, sys
assert not any("gpu" in b.get("capabilities", []) for b in json.load(sys.stdin))'
}

@test "ns: --gpu all and --gpu 0 pass the discovered nodes; an index not found is refused" {
  ns_or_skip
  make_gpus
  export CORDON_DEV_ROOT=$NODES/gpu
  run "$CORDON" backends --json
  echo "$output" | python3 -c '
import json, sys
caps = {b["name"]: b.get("capabilities", []) for b in json.load(sys.stdin)}
assert "gpu" in caps["ns"] and "gpu" in caps["docker"], caps
assert "gpu" not in caps["worktree"], caps'
  run "$CORDON" run --backend ns --gpu all -- sh -c 'cd /dev && ls -d nvidia* dri/*'
  [ "$status" -eq 0 ]
  [ "$output" = "$(printf 'dri/card0\nnvidia0\nnvidia1\nnvidiactl')" ]
  run "$CORDON" run --backend ns --gpu 0 -- sh -c 'cd /dev && ls -d nvidia* dri/*; echo x > /dev/nvidia0 && echo wrote'
  [ "$status" -eq 0 ]
  [ "$output" = "$(printf 'dri/card0\nnvidia0\nnvidiactl\nwrote')" ]
  run "$CORDON" run --backend ns --gpu 1 -- sh -c 'ls /dev/nvidia0 2>/dev/null || echo no-gpu0'
  [ "$status" -eq 0 ]
  [ "$output" = no-gpu0 ]
  run "$CORDON" run --backend ns --gpu 0,5 -- true
  [ "$status" -ne 0 ]
  [[ "$output" == *"--gpu 0,5: no GPU 5 on this host"* ]]
  run "$CORDON" run --backend ns --gpu first -- true
  [ "$status" -ne 0 ]
  [[ "$output" == *"expected all or GPU indices"* ]]
}

@test "docker: a granted node is usable inside; one not granted is absent and cannot be made" {
  docker_or_skip
  make_nodes
  run "$CORDON" run --backend docker --device "$NODES/granted" -- sh -c '
    test -c /dev/granted && echo is-char
    echo data > /dev/granted && echo wrote
    ls /dev/other 2>/dev/null || echo other-absent
    mknod /dev/other c 1 5 2>/dev/null && echo MADE-IN-DEV
    mknod /tmp/other c 1 5 2>/dev/null && echo MADE-IN-TMP
    true'
  [ "$status" -eq 0 ]
  [[ "$output" == *is-char* ]]
  [[ "$output" == *wrote* ]]
  [[ "$output" == *other-absent* ]]
  [[ "$output" != *MADE-IN* ]]
}
