#!/usr/bin/env bats
# The ns backend's device cgroup rule (src/confine/devfilter.c): an eBPF program on the session's
# cgroup v2 that lets the sandbox open the nodes its /dev holds and the granted ones, nothing
# else, on every sandbox that has a cgroup: every session, and every one-shot run with a limit or
# a grant (a bare one-shot run has no cgroup: docs/security.md). The nodes are made here with mknod: copies of /dev/null's
# numbers (which every sandbox may open) and of /dev/fuse's (10:229, which none may unless it
# is granted; opening one only makes an idle fuse channel). The attack that only the rule
# stops: a device node handed in as stdin (run -i; the host path is not nodev) reopened from
# inside through /proc/self/fd/0 (the same command on a build without the rule reopens it). As nobody, where the program cannot be loaded, --device is refused.

bats_require_minimum_version 1.5.0

load common

setup_file() {
  backends_check_once ns
}

setup() {
  need_ns
  [ "$(id -u)" -eq 0 ] || skip "mknod and the device cgroup program need root"
  project_enter devices-cgroup
  export CORDON_KEY_DIR=$PROJECT/keys XDG_STATE_HOME=$PROJECT/state
  mkdir -p "$CORDON_KEY_DIR" "$XDG_STATE_HOME" && chmod 700 "$CORDON_KEY_DIR"
  NODES=$(mktemp -d "${TMPDIR:-/tmp}/cordon-devices-cgroup-nodes.XXXXXX")
  chmod 755 "$NODES"
  mknod -m 666 "$NODES/nullish" c 1 3 || skip "cannot mknod in $NODES"
  mknod -m 666 "$NODES/fuse" c 10 229
  mknod -m 666 "$NODES/fuse2" c 10 229
  # The host opens them: what fails inside fails there alone (a nodev $TMPDIR would stop this).
  (exec 3<>"$NODES/fuse") 2>/dev/null || skip "a copy of /dev/fuse's numbers does not open here"
  (exec 3<"$NODES/fuse2") 2>/dev/null || skip "cannot open $NODES/fuse2"
}

teardown() {
  project_leave
  rm -rf "$NODES"
}

# The session's cgroup v2 (cordon-ID beneath the v2 hierarchy).
session_cgroup() {
  local mp
  for mp in /sys/fs/cgroup/unified /sys/fs/cgroup; do
    [ "$(stat -f -c %T "$mp" 2>/dev/null)" = cgroup2fs ] || continue
    find "$mp" -maxdepth 6 -type d -name "cordon-$1" -print -quit 2>/dev/null
    return 0
  done
}

# How many device programs bpf(BPF_PROG_QUERY) finds attached to cgroup directory $1.
device_programs() {
  python3 - "$1" <<'EOF'
import ctypes, os, platform, struct, sys
nr = {"x86_64": 321, "aarch64": 280}[platform.machine()]
BPF_PROG_QUERY, BPF_CGROUP_DEVICE = 16, 6
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
# union bpf_attr.query: target_fd, attach_type, query_flags, attach_flags, prog_ids, prog_cnt
attr = ctypes.create_string_buffer(struct.pack("=IIIIQI", fd, BPF_CGROUP_DEVICE, 0, 0, 0, 0), 128)
libc = ctypes.CDLL(None, use_errno=True)
if libc.syscall(nr, BPF_PROG_QUERY, attr, 128) < 0:
    sys.exit("BPF_PROG_QUERY: " + os.strerror(ctypes.get_errno()))
print(struct.unpack_from("=I", attr.raw, 24)[0])
EOF
}

@test "devices cgroup: a node handed in as stdin reopens when its numbers are allowed (the control)" {
  # Without this, the next test could pass for another reason (stdin relayed, not reopened).
  run --separate-stderr "$CORDON" run -i --backend ns -- sh -c \
    'readlink /proc/self/fd/0; if (exec 3<>/proc/self/fd/0); then echo reopened; fi' <"$NODES/nullish"
  [ "$status" -eq 0 ]
  [[ "$output" == *"$NODES/nullish"* ]]
  [[ "$output" == *reopened* ]]
}

@test "devices cgroup: a node not granted, handed in as stdin, cannot be reopened inside (EPERM)" {
  # --pids: a one-shot run with a limit has a cgroup, and so the rule
  run --separate-stderr "$CORDON" run -i --backend ns --pids 64 -- sh -c \
    'readlink /proc/self/fd/0; if (exec 3<>/proc/self/fd/0); then echo REOPENED; fi; true' <"$NODES/fuse"
  [ "$status" -eq 0 ]
  [[ "$output" == *"$NODES/fuse"* ]]
  [[ "$output" != *REOPENED* ]]
  [[ "$stderr" == *"Operation not permitted"* ]]
  # as root inside too: the rule does not care for the sandbox's uid
  run --separate-stderr "$CORDON" run -i --backend ns --pids 64 --user root -- sh -c \
    'if (exec 3<>/proc/self/fd/0); then echo REOPENED; fi; true' <"$NODES/fuse"
  [ "$status" -eq 0 ]
  [[ "$output" != *REOPENED* ]]
  [[ "$stderr" == *"Operation not permitted"* ]]
}

@test "devices cgroup: the granted node opens; another of other numbers, handed in, does not" {
  mknod -m 666 "$NODES/other" c 10 200 # tun's numbers, never granted
  run --separate-stderr "$CORDON" run -i --backend ns --device "$NODES/fuse:/dev/granted" -- sh -c '
    if (exec 3<>/dev/granted); then echo granted-opens; fi
    if (exec 4<>/proc/self/fd/0); then echo OTHER-REOPENED; fi
    true' <"$NODES/other"
  [ "$status" -eq 0 ]
  [[ "$output" == *granted-opens* ]]
  [[ "$output" != *OTHER-REOPENED* ]]
  [[ "$stderr" == *"Operation not permitted"* ]]
}

@test "devices cgroup: the program is attached to the session's cgroup and holds for each exec" {
  command -v python3 >/dev/null || skip "python3 reads the program back"
  run --separate-stderr "$CORDON" session create --backend ns --device "$NODES/fuse"
  [ "$status" -eq 0 ]
  id=$output
  cg=$(session_cgroup "$id")
  [ -n "$cg" ]
  run device_programs "$cg"
  [ "$status" -eq 0 ]
  [ "$output" = 1 ]
  run --separate-stderr "$CORDON" session exec -i "$id" -- sh -c \
    'if (exec 3<>/dev/fuse); then echo granted-opens; fi; if (exec 4<>/proc/self/fd/0); then echo REOPENED; fi; true' \
    <"$NODES/fuse2"
  [ "$status" -eq 0 ]
  [[ "$output" == *granted-opens* ]]
  # fuse2 has the granted node's numbers: the rule is by numbers, and allows it
  [[ "$output" == *REOPENED* ]]
  run --separate-stderr "$CORDON" session exec -i "$id" -- sh -c \
    'if (exec 4<>/proc/self/fd/0); then echo REOPENED; fi; true' <"$NODES/nullish"
  [[ "$output" == *REOPENED* ]]
  # and one of other numbers is refused in a session's exec as in a run
  mknod -m 666 "$NODES/other" c 10 200
  run --separate-stderr "$CORDON" session exec -i "$id" -- sh -c \
    'if (exec 4<>/proc/self/fd/0); then echo REOPENED; fi; true' <"$NODES/other"
  [ "$status" -eq 0 ]
  [[ "$output" != *REOPENED* ]]
  [[ "$stderr" == *"Operation not permitted"* ]]
  # a session without --device gets it too
  run --separate-stderr "$CORDON" session create --backend ns
  [ "$status" -eq 0 ]
  cg=$(session_cgroup "$output")
  [ -n "$cg" ]
  run device_programs "$cg"
  [ "$output" = 1 ]
}

@test "devices cgroup: as nobody (no CAP_BPF) --device is refused by name; without it runs" {
  command -v setpriv >/dev/null || skip "setpriv is not installed"
  chown 65534:65534 "$PROJECT"
  mkdir -p "$PROJECT/.home" && chown 65534:65534 "$PROJECT/.home"
  nobody() {
    setpriv --reuid=65534 --regid=65534 --clear-groups env HOME="$PROJECT/.home" \
      XDG_STATE_HOME="$PROJECT/.home/state" CORDON_KEY_DIR="$PROJECT/.home/keys" \
      CORDON_PROJECT="$PROJECT" "$@"
  }
  nobody "$CORDON" run --backend ns -- true 2>/dev/null || skip "the ns backend does not run as nobody here"
  run --separate-stderr nobody "$CORDON" run --backend ns --device "$NODES/fuse" -- true
  [ "$status" -ne 0 ]
  [[ "$stderr" == *"--device/--gpu cannot be enforced"* ]]
  [ "$(printf '%s\n' "$stderr" | grep -c .)" -eq 1 ]
  # session create says so with the exit code of what cannot be enforced here (4)
  run --separate-stderr nobody "$CORDON" session create --backend ns --device "$NODES/fuse"
  [ "$status" -eq 4 ]
  [[ "$stderr" == *"--device/--gpu cannot be enforced"* ]]
}

@test "devices cgroup: with no cgroup v2 for the session (a v1-only host's case) --device is refused, a run without it goes on" {
  # CORDON_CGROUP_ROOT naming a v2 directory that does not exist: no session cgroup can be made,
  # as on a host with no v2 hierarchy at all.
  local mp
  for mp in /sys/fs/cgroup/unified /sys/fs/cgroup; do
    [ "$(stat -f -c %T "$mp" 2>/dev/null)" = cgroup2fs ] && break
    mp=
  done
  [ -n "$mp" ] || skip "no cgroup v2 hierarchy here"
  run --separate-stderr env CORDON_CGROUP_ROOT="$mp/cordon-missing-$$" "$CORDON" run --backend ns \
    --device "$NODES/fuse" -- true
  [ "$status" -eq 125 ]
  [[ "$stderr" == *"--device/--gpu cannot be enforced: its device cgroup rule needs a cgroup v2"* ]]
  run env CORDON_CGROUP_ROOT="$mp/cordon-missing-$$" "$CORDON" run --backend ns -- echo ran
  [ "$status" -eq 0 ]
  [ "$output" = ran ]
}
