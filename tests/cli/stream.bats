#!/usr/bin/env bats
# Streaming stdio, -i/--interactive and -t/--tty of `cordon run` and `cordon session exec`:
# without --json the command writes straight to cordon's stdout/stderr, --json still captures
# (bounded). -t tests run cordon under `script` (util-linux), which gives it a terminal.
# ns always (root: the ns tests need it here); docker where DOCKER_HOST's engine answers.
# $CORDON is the binary under test; CORDON_PLUGIN_PATH holds the example plugin (a backend
# without caller_stdio, as a plugin built before the field).

bats_require_minimum_version 1.5.0

load common

setup_file() {
  export BATS_NO_PARALLELIZE_WITHIN_FILE=true
  backends_check_once docker
}

setup() {
  project_enter stream
  [ "$(id -u)" -eq 0 ] || skip "the ns backend here needs root"
}

teardown() {
  if [ -n "${BG:-}" ]; then kill "$BG" 2>/dev/null || true; wait "$BG" 2>/dev/null || true; fi
  project_leave
}

need_script() {
  command -v script >/dev/null || skip "script (util-linux) is not installed"
}

# The first line reaches us while the command still sleeps: read it well before the sleep ends
# (sandbox start-up under load included), and the second is not there yet.
first_line_streams() {
  mkfifo lines
  "$@" -- sh -c 'echo a; sleep 30; echo b' >lines &
  BG=$!
  exec 4<lines
  local line=
  read -t 20 -r line <&4
  [ "$line" = a ]
  ! read -t 1 -r line <&4
  exec 4<&-
}

@test "run streams: a arrives before b (ns)" {
  first_line_streams $CORDON run
}

@test "session exec streams: a arrives before b (ns)" {
  id=$($CORDON session create)
  first_line_streams $CORDON session exec "$id"
}

@test "run: 20 MiB through stdout arrive intact, no cap, and a tar stream is not corrupted" {
  head -c 20971520 /dev/urandom >big.bin
  want=$(sha256sum <big.bin | cut -d' ' -f1)
  got=$($CORDON run --file big.bin=big.bin -- cat big.bin | sha256sum | cut -d' ' -f1)
  [ "$got" = "$want" ]
  got=$($CORDON run --file big.bin=big.bin -- tar c big.bin | tar x -O | sha256sum | cut -d' ' -f1)
  [ "$got" = "$want" ]
  run -0 bash -c "$CORDON run -- sh -c 'head -c 20971520 /dev/zero' | wc -c"
  [ "$output" -eq 20971520 ]
}

@test "run: SIGTERM to cordon after the first line keeps that line" {
  $CORDON run -- sh -c 'echo first; sleep 60; echo never' >out 2>err &
  BG=$!
  for _ in $(seq 200); do grep -q first out && break; sleep 0.1; done
  kill -TERM "$BG"
  local status=0
  wait "$BG" || status=$?
  BG=
  [ "$status" -eq 143 ]
  [ "$(cat out)" = first ]
}

@test "--json still captures, bounded at 16 MiB per stream" {
  run -0 $CORDON run --json -- sh -c 'head -c 20971520 /dev/zero'
  [[ "$output" == *'"stdout_bytes": 20971520'* ]]
  [[ "$output" == *'"stdout_truncated": true'* ]]
  run -0 $CORDON run --json -- sh -c 'echo out; echo err >&2'
  [[ "$output" == *'"stdout": "out\n"'* ]]
  [[ "$output" == *'"stderr": "err\n"'* ]]
}

@test "-i passes cordon's stdin to the command; without it stdin is /dev/null" {
  run -0 bash -c "printf 'hello\nworld\n' | $CORDON run -i -- cat"
  [ "$output" = $'hello\nworld' ]
  run -0 bash -c "printf 'hello\n' | $CORDON run -- cat"
  [ -z "$output" ]
  id=$($CORDON session create)
  run -0 bash -c "printf 'via session\n' | $CORDON session exec $id -i -- cat"
  [ "$output" = "via session" ]
  # --json with -i: stdin is fed as with --stdin -
  run -0 bash -c "printf 'j\n' | $CORDON run --json -i -- cat"
  [[ "$output" == *'"stdout": "j\n"'* ]]
}

@test "-t and -i: usage errors with --json and --stdin, and documented in --help" {
  run $CORDON run -t --json -- true
  [ "$status" -ne 0 ]
  [[ "$output" == *"-t"*"--json"* ]]
  run $CORDON run -i --stdin /dev/null -- true
  [ "$status" -ne 0 ]
  [[ "$output" == *"--stdin"* ]]
  run -0 $CORDON run --help
  [[ "$output" == *"--interactive"* && "$output" == *"--tty"* && "$output" == *"streams"* ]]
  run -0 $CORDON session exec --help
  [[ "$output" == *"--interactive"* && "$output" == *"--tty"* ]]
}

@test "-t: the command's stdin and stdout are a terminal, with the outer window size and TERM" {
  need_script
  run -0 env TERM=cordon-test-term script -qec "stty rows 33 cols 77; $CORDON run -t -- sh -c \
    'test -t 0 && test -t 1 && echo both-tty; stty size; echo term=\$TERM; \
     echo ctty=\$(cut -d\" \" -f7 /proc/self/stat)'" /dev/null </dev/null
  [[ "$output" == *"both-tty"* ]]
  [[ "$output" == *"33 77"* ]]
  [[ "$output" == *"term=cordon-test-term"* ]]
  # tty_nr in /proc/self/stat: the pty is the command's controlling terminal
  [[ "$output" != *"ctty=0"* ]]
  # without -t (and -i) the command's stdin is no terminal even when cordon's is (its output
  # goes straight to cordon's own stdout, a terminal here)
  run -0 script -qec "$CORDON run -- sh -c 'test -t 0 && echo stdin-tty || echo stdin-notty'" \
    /dev/null </dev/null
  [[ "$output" == *"stdin-notty"* ]]
}

@test "-t follows a window change (SIGWINCH) while the command runs" {
  need_script
  cat >winch.sh <<EOF
stty rows 10 cols 20
exec 3<&0
$CORDON run -t -- sh -c 'echo ready; sleep 8; stty size' >winch.out <&3 &
for _ in \$(seq 200); do grep -q ready winch.out && break; sleep 0.1; done
stty rows 44 cols 55
wait
EOF
  run -0 script -qec "sh winch.sh" /dev/null </dev/null
  run cat winch.out
  [[ "$output" == *"44 55"* ]]
}

# Runs "$CORDON run -it -- $*" under script with its input on a fifo; once the command printed
# "ready", writes Ctrl-C to cordon's terminal. $output: everything cordon's terminal showed.
ctrl_c_after_ready() {
  mkfifo keys
  exec 5<>keys
  script -qefc "$CORDON run -it -- $*; echo cordon-exit=\$?" /dev/null <&5 >term.out &
  BG=$!
  for _ in $(seq 300); do grep -q ready term.out && break; sleep 0.1; done
  sleep 0.5
  printf '\003' >&5
  for _ in $(seq 300); do grep -q cordon-exit term.out && break; sleep 0.1; done
  kill "$BG" 2>/dev/null || true
  wait "$BG" || true
  BG=
  exec 5>&-
  output=$(tr -d '\r' <term.out)
}

@test "-t on the worktree backend (host launcher): a terminal that controls the command's session" {
  need_script
  run -0 script -qec "stty rows 12 cols 34; $CORDON run --backend worktree --quiet -t -- sh -c \
    'test -t 0 && test -t 1 && echo both-tty; stty size; \
     echo ctty=\$(cut -d\" \" -f7 /proc/self/stat)'" /dev/null </dev/null
  [[ "$output" == *"both-tty"* && "$output" == *"12 34"* ]]
  [[ "$output" != *"ctty=0"* ]]
  run -0 bash -c "printf 'wt\n' | $CORDON run --backend worktree --quiet -i -- cat"
  [ "$output" = wt ]
}

@test "-it: Ctrl-C interrupts the command through its terminal (exit 130)" {
  need_script
  ctrl_c_after_ready "sh -c 'echo ready; exec sleep 100'"
  [[ "$output" == *"cordon-exit=130"* ]]
  [[ "$output" != *"interrupted"* ]]
}

@test "-it: Ctrl-C reaches the command's foreground job, not cordon (job control)" {
  need_script
  # With job control (set -m) the shell runs sleep as the terminal's foreground job (its own
  # process group, tcsetpgrp on the pty): ^C ends the job, the shell (trapping INT) survives
  # and reports it, and cordon exits with the shell's status.
  ctrl_c_after_ready "sh -c 'set -m; trap \"echo trapped\" INT; echo ready; sleep 100; \
    echo after=\$?; exit 7'"
  [[ "$output" == *"after=130"* ]]
  [[ "$output" == *"cordon-exit=7"* ]]
  # a background job gets a process group of its own (job control is on)
  run -0 script -qec "$CORDON run -t -- sh -c 'set -m; sleep 2 & \
    ps -o pgid= -p \$\$,\$!'" /dev/null </dev/null
  [ "$(printf '%s\n' "$output" | tr -d '\r ' | sort -u | grep -c .)" -eq 2 ]
}

@test "-t: the command cannot inject input into its terminal (TIOCSTI), and -i does not hand it cordon's" {
  need_script
  command -v python3 >/dev/null || skip "python3 is not installed"
  local probe='import fcntl, termios
try:
    fcntl.ioctl(0, termios.TIOCSTI, b"x"); print("ALLOWED")
except OSError as e:
    print("refused", e.errno)'
  printf '%s\n' "$probe" >probe.py
  run -0 script -qec "$CORDON run -t --file probe.py=probe.py -- python3 probe.py" /dev/null \
    </dev/null
  [[ "$output" == *"refused"* ]]
  [[ "$output" != *"ALLOWED"* ]]
  # -i alone: cordon's terminal is its stdin, yet never the command's controlling terminal
  run -0 script -qec "$CORDON run -i --file probe.py=probe.py -- sh -c \
    'python3 probe.py; echo ctty=\$(cut -d\" \" -f7 /proc/self/stat)'" /dev/null </dev/null
  [[ "$output" == *"refused"* ]]
  [[ "$output" == *"ctty=0"* ]]
}

@test "a backend without caller_stdio (an older plugin): output copied after the end, -t refused by name" {
  [ -n "${CORDON_PLUGIN_PATH:-}" ] || skip "CORDON_PLUGIN_PATH (the example plugin) is not set"
  run -0 bash -c "printf 'in\n' | $CORDON run --backend example --quiet --no-require-enforcement \
    -i -- sh -c 'cat; echo err >&2' 2>&1"
  [[ "$output" == *"in"* && "$output" == *"err"* ]]
  run $CORDON run --backend example --quiet --no-require-enforcement -t -- true
  [ "$status" -ne 0 ]
  [[ "$output" == *"backend example cannot give the command a terminal"* ]]
}

@test "docker: run and session exec stream; 20 MiB intact; -i; -t gets a terminal" {
  need_docker
  first_line_streams $CORDON run --backend docker
  kill "$BG" 2>/dev/null || true
  BG=
  id=$($CORDON session create --backend docker)
  run -0 bash -c "printf 'to session\n' | $CORDON session exec $id -i -- sh -c 'cat; echo e >&2' 2>&1"
  [[ "$output" == *"to session"* && "$output" == *"e"* ]]
  run -0 bash -c "$CORDON run --backend docker -- sh -c 'head -c 20971520 /dev/zero' | wc -c"
  [ "$output" -eq 20971520 ]
  run -0 bash -c "printf 'hello\n' | $CORDON run --backend docker -i -- cat"
  [ "$output" = hello ]
  if command -v script >/dev/null; then
    run -0 script -qec "stty rows 21 cols 43; $CORDON run --backend docker -t -- sh -c \
      'test -t 0 && test -t 1 && echo both-tty; stty size'" /dev/null </dev/null
    [[ "$output" == *"both-tty"* && "$output" == *"21 43"* ]]
  fi
}

@test "docker: the Engine API exec path copies output after the end and refuses -t clearly" {
  need_docker
  run -0 bash -c "printf 'api\n' | CORDON_DOCKER_EXEC=api $CORDON run --backend docker -i -- cat"
  [ "$output" = api ]
  run env CORDON_DOCKER_EXEC=api $CORDON run --backend docker -t -- true
  [ "$status" -ne 0 ]
  [[ "$output" == *"Engine API exec path"*"terminal"* ]]
}
