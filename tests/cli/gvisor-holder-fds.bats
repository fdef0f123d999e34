#!/usr/bin/env bats
# The gvisor backend: what /proc/PID/fd of the processes above a command shows it. gVisor lets
# every process of a sandbox list /proc/PID/fd of every other and reopen what is there (this runsc
# makes the directory mode 0555, with no ptrace check), so pid 1 and each exec's wrapper keep
# nothing there but /dev/null and, in the wrapper, its status record, which the command cannot
# reopen (0600, the wrapper's uid). Skipped, with the reason, where runsc cannot run.

bats_require_minimum_version 1.5.0

load common

setup_file() {
  export BATS_NO_PARALLELIZE_WITHIN_FILE=true
  backends_check_once gvisor
}

setup() {
  need_backend gvisor
  project_enter gvisor-holder-fds
}

teardown() {
  project_leave
}

# Every fd of pid 1 and of the command's parent (its wrapper), as "PID TARGET" lines.
# In a one-shot run the wrapper is pid 1 itself.
list_holders='pids=1; [ "$PPID" = 1 ] || pids="1 $PPID"; for p in $pids; do for f in /proc/$p/fd/*; do echo "$p $(readlink "$f")"; done; done'

# Each line /dev/null, or the one status record (a file of the control directory) in the wrapper.
holders_hold_nothing() {
  local records=0 pid target
  while read -r pid target; do
    case $target in
      /dev/null) ;;
      /.cordon-gvisor/*) [ "$pid" != 1 ] || [ "$1" = one-shot ] || return 1; records=$((records + 1)) ;;
      *) echo "pid $pid holds $target" >&2; return 1 ;;
    esac
  done <<<"$2"
  [ "$records" -eq 1 ]
}

# Reopen the wrapper's status record for writing, then exit 5: the record must stay the wrapper's.
forge='for f in /proc/$PPID/fd/*; do case $(readlink "$f") in /.cordon-gvisor/*)
  if echo "exit 0" 2>/dev/null >"$f"; then echo forged; fi ;; esac; done; exit 5'

@test "gvisor holders: a session's pid 1 and wrapper keep /dev/null and the record alone" {
  id=$("$CORDON" session create --backend gvisor)
  run "$CORDON" session exec "$id" -- sh -c "$list_holders"
  [ "$status" -eq 0 ]
  echo "$output"
  [ "$(grep -c '^1 ' <<<"$output")" -eq 3 ]
  holders_hold_nothing session "$output"
  run "$CORDON" session exec "$id" -- sh -c "$forge"
  [ "$status" -eq 5 ]
  [[ "$output" != *forged* ]]
  "$CORDON" session destroy "$id"
}

@test "gvisor holders: a one-shot run's pid 1 (the wrapper) keeps /dev/null and the record alone" {
  run "$CORDON" run --backend gvisor -- sh -c "$list_holders"
  [ "$status" -eq 0 ]
  echo "$output"
  holders_hold_nothing one-shot "$output"
  run "$CORDON" run --backend gvisor -- sh -c "$forge"
  [ "$status" -eq 5 ]
  [[ "$output" != *forged* ]]
}

@test "gvisor holders: the command's own stdio still reaches the caller" {
  run "$CORDON" run --backend gvisor -i -- sh -c 'cat; echo out; echo err >&2' <<<"in"
  [ "$status" -eq 0 ]
  [[ "$output" == *in* && "$output" == *out* && "$output" == *err* ]]
}
