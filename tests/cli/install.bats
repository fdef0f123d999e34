#!/usr/bin/env bats
# What `meson install` adds for users besides the binary: the manual pages and the bash
# completion. Each page must render without a warning and name every long option its verb's
# --help prints, so the pages cannot drift from the code; the completion must complete.
# $CORDON is the binary under test; BUILD_ROOT, SOURCE_ROOT, PREFIX, MANDIR and DATADIR come
# from meson.

bats_require_minimum_version 1.5.0

setup() {
  DEST=$(mktemp -d "${TMPDIR:-/tmp}/cordon-install.XXXXXX")
}

teardown() {
  rm -rf "$DEST"
}

# An install directory as meson resolves it: relative ones are under the prefix.
installed() {
  case $1 in
  /*) printf '%s\n' "$DEST$1" ;;
  *) printf '%s\n' "$DEST$PREFIX/$1" ;;
  esac
}

# Every page of the manual: a page added to docs/man is checked without being listed here.
PAGES=$(cd "$SOURCE_ROOT/docs/man" && ls ./*.1 | sed 's|^\./||; s|\.1$||')

@test "meson install puts the man pages in man1 and the completion in bash-completion" {
  command -v meson >/dev/null || skip "meson not found"
  run meson install -C "$BUILD_ROOT" --no-rebuild --destdir "$DEST"
  [ "$status" -eq 0 ]
  local man1 completions
  man1=$(installed "$MANDIR")/man1
  completions=$(installed "$DATADIR")/bash-completion/completions
  for page in $PAGES; do
    [ -f "$man1/$page.1" ]
    cmp "$man1/$page.1" "$SOURCE_ROOT/docs/man/$page.1"
  done
  [ -f "$completions/cordon" ]
  cmp "$completions/cordon" "$SOURCE_ROOT/completions/cordon.bash"
}

@test "every man page renders without warnings" {
  command -v groff >/dev/null || skip "groff not found (groff-base)"
  for page in $PAGES; do
    run --separate-stderr groff -man -ww -z "$SOURCE_ROOT/docs/man/$page.1"
    [ "$status" -eq 0 ]
    [ -z "$stderr" ] || {
      echo "$page.1: $stderr"
      false
    }
    if command -v man >/dev/null; then
      run --separate-stderr env MANWIDTH=80 man --warnings -l "$SOURCE_ROOT/docs/man/$page.1"
      [ "$status" -eq 0 ]
      [ -z "$stderr" ] || {
        echo "$page.1 (man): $stderr"
        false
      }
    fi
  done
}

# The long options a help text prints, one per line.
long_options() { # (an "Example:" at the end of a --help may use other verbs' options)
  "$CORDON" "$@" --help | sed '/^Example/,$d' | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u
}

# Every long option of `cordon VERB... --help` is in PAGE (roff's \- read as -).
check_page() {
  local page=$1
  shift
  local text missing=""
  text=$(sed 's/\\-/-/g' "$SOURCE_ROOT/docs/man/$page.1")
  local opts
  opts=$(long_options "$@")
  [ -n "$opts" ]
  for opt in $opts; do
    grep -qE -- "$opt([^a-z0-9-]|\$)" <<<"$text" || missing="$missing $opt"
  done
  [ -z "$missing" ] || {
    echo "$page.1 lacks what 'cordon $* --help' prints:$missing"
    false
  }
}

@test "each verb group's man page names every long option its --help prints" {
  check_page cordon-run run
  check_page cordon-session session
  check_page cordon-session session create
  check_page cordon-snapshot snapshot
  check_page cordon-race race
  check_page cordon-cas cas
  check_page cordon-receipt receipt
  check_page cordon-audit audit
  check_page cordon-key key
  check_page cordon-backends backends
  check_page cordon-backends conformance
  check_page cordon-gc gc
  check_page cordon-volume volume
  check_page cordon-pool pool
  check_page cordon-pool pool submit
  check_page cordon-pool pool warm
  check_page cordon-worker worker
  check_page cordon-worker worker run
  check_page cordon-agent agent
  check_page cordon-gate gate
  check_page cordon-build build
  check_page cordon-events events
  check_page cordon-plan plan
  check_page cordon-plan plan run
  check_page cordon-serve serve
  check_page cordon-token token
  check_page cordon-token token create
  check_page cordon-attest attest
  check_page cordon-select select
}

# The verbs `cordon --help` lists (the first word of each entry in its verb sections).
help_verbs() {
  "$CORDON" --help | sed -n '/^sandboxes:$/,/^Options may come/p' |
    sed -n 's/^  \([a-z][a-z]*\).*/\1/p' | sort -u
}

@test "every verb is in cordon --help, the completion and the manual" {
  local verbs completion entries missing=""
  verbs=$(help_verbs)
  [ "$(wc -l <<<"$verbs")" -ge 20 ]
  completion=$(complete_words cordon "" | sort -u)
  entries=$(sed 's/\\f[BRI]//g' "$SOURCE_ROOT/docs/man/cordon.1")
  for v in $verbs; do
    grep -qx -- "$v" <<<"$completion" || missing="$missing completion:$v"
    # cordon(1) has an entry for it (.B VERB, or .B VERB\fR, \fBOTHER: font escapes removed).
    grep -qE "^\.B ([a-z]+, )*$v(,|$)" <<<"$entries" || missing="$missing cordon.1:$v"
  done
  for v in $(grep -vE '^-' <<<"$completion"); do
    grep -qx -- "$v" <<<"$verbs" || missing="$missing help:$v"
  done
  for page in $(grep -oE 'cordon\\-[a-z]+' "$SOURCE_ROOT/docs/man/cordon.1" | sort -u); do
    [ -f "$SOURCE_ROOT/docs/man/${page/\\/}.1" ] || missing="$missing page:${page/\\/}"
  done
  [ -z "$missing" ] || {
    echo "not everywhere:$missing"
    false
  }
}

# Complete the words given (the last one being typed); the candidates, one per line.
complete_words() {
  bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
           _cordon; printf "%s\n" "${COMPREPLY[@]}"' _ "$SOURCE_ROOT/completions/cordon.bash" "$@"
}

@test "the completion completes verbs, options, backends and session ids" {
  run complete_words cordon sess
  [ "$status" -eq 0 ]
  [ "$output" = session ]
  run complete_words cordon run --me
  [ "$output" = --memory ]
  run complete_words cordon snapshot ta
  [ "$output" = take ]
  run complete_words cordon run --backend w
  [ "$output" = worktree ]
  mkdir -p "$DEST/project/.cordon/sessions/0123456789abcdef" "$DEST/project/sub"
  cd "$DEST/project/sub"
  run complete_words cordon session exec 01
  [ "$output" = 0123456789abcdef ]
  cd /
}

# (gc's --help also names --env, the option of run whose values it cleans up: not checked.)
@test "the completion's option lists match each verb's --help" {
  check_completion() {
    local opts missing=""
    opts=$(long_options "$@")
    local got
    got=$(complete_words cordon "$@" --)
    for opt in $opts; do
      grep -qx -- "$opt" <<<"$got" || missing="$missing $opt"
    done
    [ -z "$missing" ] || {
      echo "completion of 'cordon $*' lacks:$missing"
      false
    }
  }
  check_completion run
  check_completion session create
  check_completion race
  check_completion backends
  check_completion pool warm
  check_completion worker run
}
