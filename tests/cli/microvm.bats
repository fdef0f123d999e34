#!/usr/bin/env bats
# The microvm backend above its monitor shim, driven through the CLI with the fake monitor
# (commands on the host, in the workspace: everything above the shim without a VM), and the
# refusals of the monitors that cannot run here: by name, exit 4, never replaced by another.
# $CORDON is the binary under test.

bats_require_minimum_version 1.5.0
load common

setup_file() {
  backends_check_once ns
}

setup() {
  project_enter microvm
  EMPTY=$(mktemp -d "${TMPDIR:-/tmp}/cordon-microvm-empty.XXXXXX")
  export CORDON_KEY_DIR=$PROJECT/keys
  export CORDON_MICROVM_MONITOR=fake
}

teardown() {
  cd /
  for s in "$PROJECT"/.cordon/sessions/*; do
    [ -d "$s" ] && "$CORDON" session destroy "$(basename "$s")" >/dev/null 2>&1
  done
  rm -rf "$PROJECT" "$EMPTY"
}

fake() { "$CORDON" "$@" --backend microvm --monitor fake; }

@test "microvm: cordon backends lists it with tier vm, its capabilities, and why not when not" {
  run -0 env -u CORDON_MICROVM_MONITOR "$CORDON" backends
  line=$(printf '%s\n' "$output" | grep '^microvm ')
  [[ "$line" == *" vm "* ]]
  [[ "$line" == *"file_rw,exec,snapshot,caller_stdio"* ]]
  # qemu, the default: where it cannot run, the line says why.
  if [[ "$line" == *" no "* ]]; then
    [[ "$line" == *"unavailable: qemu: "* ]]
  fi
  run -0 env CORDON_MICROVM_MONITOR=libkrun "$CORDON" backends --json
  [[ "$output" == *'"unavailable_reason": "libkrun: '*'/dev/kvm'* ]] ||
    [[ "$output" == *'"unavailable_reason": "libkrun: '*'libkrun.so.1'* ]]
  # The fake monitor is available and says it isolates nothing.
  run -0 "$CORDON" backends
  line=$(printf '%s\n' "$output" | grep '^microvm ')
  [[ "$line" == *" yes "* ]]
  [[ "$line" == *"monitor fake: NO isolation"* ]]
}

@test "microvm --monitor fake: session create, write, exec, read, ls, snapshot, resume, destroy" {
  id=$(fake session create --memory 128M --cpus 2 --net none)
  printf 'payload\n' | "$CORDON" session write "$id" dir/in.txt
  run -0 "$CORDON" session exec "$id" -- sh -c 'cat dir/in.txt; echo made > out.txt'
  [ "$output" = "payload" ]
  run -0 "$CORDON" session read "$id" out.txt
  [ "$output" = "made" ]
  run -0 "$CORDON" session ls "$id"
  [[ "$output" == *dir* && "$output" == *out.txt* ]]
  # The control directory is the runtime directory: nothing of the VM is in the workspace.
  [ "$(ls -A "$PROJECT/.cordon/sessions/$id/workspace" | sort | tr '\n' ' ')" = "dir out.txt " ]
  snap=$("$CORDON" session snapshot "$id")
  [[ "$snap" =~ ^[0-9a-f]{64}$ ]]
  resumed=$(fake session create --from "$snap")
  run -0 "$CORDON" session exec "$resumed" -- cat out.txt dir/in.txt
  [ "$output" = "$(printf 'made\npayload')" ]
  run -0 "$CORDON" session destroy "$id"
  run -0 "$CORDON" session destroy "$resumed"
  [ -z "$(ls "$PROJECT/.cordon/sessions")" ]
}

@test "microvm --monitor fake: a command's own 125, 126 and 127 are reported as themselves" {
  id=$(fake session create)
  for code in 125 126 127; do
    run -"$code" "$CORDON" session exec "$id" -- sh -c "exit $code"
    [ -z "$output" ] # cordon adds nothing: it did start the command
  done
  run "$CORDON" run --backend microvm --monitor fake -- sh -c 'exit 126'
  [ "$status" -eq 126 ]
  # cordon failing to start it is told apart: a message on stderr.
  run -127 "$CORDON" session exec "$id" -- /no/such/program
  [[ "$output" == *"/no/such/program"* ]]
}

@test "microvm: the snapshot id is ns's for the same tree" {
  need_ns
  vm=$(fake session create)
  ns=$("$CORDON" session create --backend ns)
  for s in "$vm" "$ns"; do
    printf 'one\n' | "$CORDON" session write "$s" a.txt
    "$CORDON" session exec "$s" -- sh -c 'mkdir -p sub && printf two > sub/b && chmod 600 sub/b && ln -s ../a.txt sub/link'
  done
  [ "$("$CORDON" session snapshot "$vm")" = "$("$CORDON" session snapshot "$ns")" ]
}

@test "microvm: race --backend microvm --monitor fake records tier vm in the receipt" {
  mkdir tree && printf 'base\n' > tree/a
  base=$("$CORDON" snapshot take tree)
  run -0 "$CORDON" race --backend microvm --monitor fake --base "$base" --k 2 --out r.json -- \
    sh -c 'echo "$CORDON_CANDIDATE_INDEX" > out'
  grep -q '"isolation_tier": *"vm"' r.json
  ! grep -q '"isolation_tier": *"container"' r.json
  run -0 "$CORDON" receipt verify r.json --expected-keyid "$("$CORDON" key show --kid)"
}

@test "microvm: --monitor qemu without a built guest exits 4 naming what is missing" {
  run env CORDON_GUEST_DIR="$EMPTY" "$CORDON" session create --backend microvm --monitor qemu
  [ "$status" -eq 4 ]
  [[ "$output" == *"qemu: "* ]]
  [[ "$output" != *"fake"* ]] # never replaced by another monitor
  [ -z "$(ls "$PROJECT/.cordon/sessions" 2>/dev/null)" ]
}

@test "microvm: firecracker and libkrun refuse by name, every missing requirement, exit 4" {
  run env PATH="$EMPTY" CORDON_GUEST_DIR="$EMPTY" "$CORDON" session create --backend microvm \
    --monitor firecracker
  [ "$status" -eq 4 ]
  [[ "$output" == *"no firecracker binary in PATH"* ]]
  [[ "$output" == *"$EMPTY/vmlinux"* && "$output" == *"$EMPTY/rootfs.ext4"* ]]
  [[ "$output" == *"vsock"* ]]
  run env CORDON_GUEST_DIR="$EMPTY" LD_LIBRARY_PATH="$EMPTY" "$CORDON" session create \
    --backend microvm --monitor libkrun
  [ "$status" -eq 4 ]
  [[ "$output" == *"libkrun: "* && "$output" == *"$EMPTY/rootfs"* ]]
  [[ "$output" != *"fake"* ]]
}

@test "microvm: --monitor bogus and --monitor with another backend are usage errors (exit 2)" {
  run "$CORDON" session create --backend microvm --monitor bogus
  [ "$status" -eq 2 ]
  [[ "$output" == *"bogus"* && "$output" == *"qemu, firecracker, libkrun, fake"* ]]
  run "$CORDON" session create --backend ns --monitor fake
  [ "$status" -eq 2 ]
  [[ "$output" == *"--monitor"* && "$output" == *"ns"* ]]
  run "$CORDON" session create --backend worktree --monitor qemu
  [ "$status" -eq 2 ]
  mkdir tree && printf 'base\n' > tree/a
  base=$("$CORDON" snapshot take tree)
  run "$CORDON" race --backend worktree --monitor fake --base "$base" --k 1 --out r.json -- true
  [ "$status" -eq 2 ]
  [[ "$output" == *"--monitor"* ]]
  [ ! -e r.json ]
  # run: cordon's own failures are 125 there, the message the same.
  run "$CORDON" run --backend ns --monitor fake -- true
  [ "$status" -eq 125 ]
  [[ "$output" == *"--monitor"* ]]
}

@test "microvm: --monitor is in the help of run, session create and race" {
  run -0 "$CORDON" run --help
  [[ "$output" == *"--monitor NAME"* ]]
  run -0 "$CORDON" session create --help
  [[ "$output" == *"--monitor NAME"* ]]
  run -0 "$CORDON" race --help
  [[ "$output" == *"--monitor NAME"* ]]
}

@test "microvm: a share of a vCPU and egress open are refused by name, not rounded or widened" {
  run fake session create --cpus 0.5
  [ "$status" -eq 4 ]
  [[ "$output" == *"whole vCPUs"* ]]
  run fake session create --net open
  [ "$status" -eq 4 ]
  [[ "$output" == *"no network interface to the outside"* ]]
  # --pids is the guest agent's RLIMIT_NPROC of the sandbox user: root is exempt, so refused.
  run fake session create --pids 10 --user root
  [ "$status" -eq 4 ]
  [[ "$output" == *"pids"* ]]
}

@test "microvm --monitor fake: --env reaches the command, in a run and in a session" {
  # The session layer keeps --env in the session's runtime directory before the backend starts:
  # the backend must take that directory, not make a second one.
  run "$CORDON" run --backend microvm --monitor fake --env K=V -- sh -c 'echo "$K"'
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  [ "$output" = V ]
  id=$(fake session create --env K=W)
  run "$CORDON" session exec "$id" -- sh -c 'echo "$K"'
  [ "$status" -eq 0 ] && [ "$output" = W ]
  "$CORDON" session destroy "$id"
}

@test "microvm: a memory size the guest cannot boot in is refused by name, before any VM" {
  run "$CORDON" run --backend microvm --monitor fake --memory 64M -- true
  [ "$status" -eq 125 ]
  [[ "$output" == *"--memory 64 MiB"*"at least 96 MiB"* ]]
  [ -z "$(ls -A .cordon/sessions 2>/dev/null)" ]
}
