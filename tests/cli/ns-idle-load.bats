#!/usr/bin/env bats
# An idle ns session adds nothing to the host's load average: none of its processes (the
# holder, its workers and their waiting command processes) sleeps uninterruptibly (state D,
# which the load average counts); a worker used to, as the vfork parent of its command process,
# for the whole life of the session. And an idle worker takes signals: SIGSTOP stops it, SIGCONT
# resumes it, and the session still serves execs. $CORDON is the binary under test.

bats_require_minimum_version 1.5.0
load common

setup_file() {
  backends_check_once ns
}

setup() {
  project_enter ns-idle-load
  mkdir ws
}

teardown() {
  project_leave
}

holder_of() {
  grep -o '"holder_pid": *[0-9]*' ".cordon/sessions/$1/state.json" | grep -o '[0-9]*$'
}

# "PID STATE" of process $1 and of every descendant, one a line, from /proc/*/stat (the state
# and the parent follow the last ')', since a command name may hold spaces or parentheses). In
# a bash of its own, away from the trap bats runs at every command, and no python: on a loaded
# host either took seconds, and the samples must come close together.
session_tree() {
  bash -s "$1" <<'EOF'
declare -A parent=() state=()
for f in /proc/[0-9]*/stat; do
  { read -r line <"$f"; } 2>/dev/null || continue
  pid=${line%% *}
  rest=${line##*) }
  state[$pid]=${rest%% *}
  rest=${rest#* }
  parent[$pid]=${rest%% *}
done
todo=("$1")
while [ ${#todo[@]} -gt 0 ]; do
  p=${todo[0]}
  todo=("${todo[@]:1}")
  [ -n "${state[$p]:-}" ] || continue
  echo "$p ${state[$p]}"
  for c in "${!parent[@]}"; do
    [ "${parent[$c]}" != "$p" ] || todo+=("$c")
  done
done
EOF
}

# Wait up to 10 s until the tree under holder $1 holds at least $2 processes, then a little
# more: its command processes then wait in accept().
settled() {
  local tree i
  for i in $(seq 100); do
    tree=$(session_tree "$1")
    [ "$(printf '%s\n' "$tree" | grep -c .)" -ge "$2" ] && break
    sleep 0.1
  done
  echo "$tree"
  [ "$(printf '%s\n' "$tree" | grep -c .)" -ge "$2" ]
  sleep 0.3
}

# Once the tree under holder $1 holds at least $2 processes, sample it 10 times over a second:
# fail, naming the process and its wait channel, when any sample finds one in D.
no_process_in_d() {
  local holder=$1 i pid state
  settled "$holder" "$2"
  for i in $(seq 10); do
    while read -r pid state; do
      if [ "$state" = D ]; then
        echo "process $pid is in state D (wchan $(cat /proc/$pid/wchan 2>/dev/null))"
        session_tree "$holder"
        return 1
      fi
    done < <(session_tree "$holder")
    sleep 0.1
  done
}

@test "ns: no process of an idle session sleeps in state D" {
  need_ns
  ID=$($CORDON session create --backend ns --workspace ws)
  H=$(holder_of "$ID")
  # The holder, its worker and the worker's command process.
  no_process_in_d "$H" 3
  # After an exec the holder keeps two idle pairs: five processes.
  run $CORDON session exec "$ID" -- true
  [ "$status" -eq 0 ]
  no_process_in_d "$H" 5
  # The same with what an exec leaves running in the background (a keeper worker).
  run $CORDON session exec "$ID" -- sh -c 'sleep 60 >/dev/null 2>&1 &'
  [ "$status" -eq 0 ]
  no_process_in_d "$H" 7
  run $CORDON session destroy "$ID"
  [ "$status" -eq 0 ]
}

@test "ns: an idle worker stops on SIGSTOP and goes on after SIGCONT" {
  need_ns
  ID=$($CORDON session create --backend ns --workspace ws)
  H=$(holder_of "$ID")
  settled "$H" 3
  # The holder's only child is the worker.
  W=$(session_tree "$H" | awk -v h="$H" '$1 != h {print $1; exit}')
  [ "$(sed 's/.*) //' "/proc/$W/stat" | cut -d' ' -f2)" = "$H" ]
  kill -STOP "$W"
  stopped=
  for _ in $(seq 50); do
    [ "$(sed 's/.*) //' "/proc/$W/stat" | cut -d' ' -f1)" = T ] && { stopped=1; break; }
    sleep 0.1
  done
  state=$(sed 's/.*) //' "/proc/$W/stat" | cut -d' ' -f1)
  kill -CONT "$W"
  echo "worker $W after SIGSTOP: $state"
  [ -n "$stopped" ]
  run $CORDON session exec "$ID" -- echo served
  [ "$status" -eq 0 ]
  [ "$output" = served ]
  run $CORDON session destroy "$ID"
  [ "$status" -eq 0 ]
}
