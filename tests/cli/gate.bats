#!/usr/bin/env bats
# `cordon gate baseline|check`: the accuracy gate (issue 18, item 8). A baseline records what
# protected paths hold; a check names each changed, added or removed path, files inside a
# protected directory by their own name. $CORDON is the binary under test; SOURCE_ROOT (from
# meson) is the source tree, for the man page check.

bats_require_minimum_version 1.5.0

setup() {
  PROJECT=$(mktemp -d "${TMPDIR:-/tmp}/cordon-gate.XXXXXX")
  export CORDON_PROJECT=$PROJECT CORDON_KEY_DIR=$PROJECT-keys
  cd "$PROJECT"
  mkdir -p tests/unit
  printf 'def test_a(): assert f() == 1\n' > tests/test_a.py
  printf 'def test_b(): pass\n' > tests/unit/test_b.py
  printf 'expected\n' > answers.txt
}

teardown() {
  cd /
  rm -rf "$PROJECT" "$PROJECT-keys"
}

@test "gate --help names both subverbs; a bad subverb is a usage error" {
  run "$CORDON" gate --help
  [ "$status" -eq 0 ]
  [[ "$output" == *"baseline --out FILE PATH..."* ]]
  [[ "$output" == *"check FILE"* ]]
  run "$CORDON" gate frob
  [ "$status" -eq 2 ]
  run "$CORDON" gate baseline tests
  [ "$status" -eq 2 ]
  [[ "$output" == *"--out"* ]]
}

@test "unchanged protected paths: check exits 0 and prints nothing" {
  run "$CORDON" gate baseline --out base tests answers.txt
  [ "$status" -eq 0 ]
  [ "$output" = "$PROJECT/.cordon/gates/base" ]
  [ -f .cordon/gates/base ]
  run "$CORDON" gate check base
  [ "$status" -eq 0 ]
  [ -z "$output" ]
  run "$CORDON" gate check --json base
  [ "$status" -eq 0 ]
  [[ "$output" == *'"unchanged": true'* ]]
}

@test "a changed protected file is named, exit 1" {
  "$CORDON" gate baseline --out base tests answers.txt
  printf 'cheated\n' > answers.txt
  run "$CORDON" gate check base
  [ "$status" -eq 1 ]
  [ "$output" = "changed: answers.txt" ]
}

@test "a file's mode counts as a change" {
  "$CORDON" gate baseline --out base answers.txt
  chmod 600 answers.txt
  run "$CORDON" gate check base
  [ "$status" -eq 1 ]
  [ "$output" = "changed: answers.txt" ]
}

@test "inside a protected directory: changed, added and removed files each named" {
  "$CORDON" gate baseline --out base tests
  printf 'def test_a(): assert True\n' > tests/test_a.py
  printf 'x\n' > tests/unit/conftest.py
  rm tests/unit/test_b.py
  run "$CORDON" gate check base
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "changed: tests/test_a.py" ]
  [ "${lines[1]}" = "added: tests/unit/conftest.py" ]
  [ "${lines[2]}" = "removed: tests/unit/test_b.py" ]
  [ "${#lines[@]}" -eq 3 ]
  run "$CORDON" gate check --json base
  [ "$status" -eq 1 ]
  [[ "$output" == *'"change": "removed"'* ]]
  [[ "$output" == *'"path": "tests/unit/test_b.py"'* ]]
}

@test "a protected path that appears or disappears is added or removed" {
  "$CORDON" gate baseline --out base answers.txt not-yet.txt
  rm answers.txt
  touch not-yet.txt
  run "$CORDON" gate check base
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "removed: answers.txt" ]
  [ "${lines[1]}" = "added: not-yet.txt" ]
}

@test "a protected file replaced by a symlink to the same content is a change" {
  "$CORDON" gate baseline --out base answers.txt
  cp answers.txt .copy && rm answers.txt && ln -s .copy answers.txt
  run "$CORDON" gate check base
  [ "$status" -eq 1 ]
  [ "$output" = "changed: answers.txt" ]
}

@test "a protected path through a symlink is refused when recorded" {
  ln -s tests linked
  run "$CORDON" gate baseline --out base linked/test_a.py
  [ "$status" -eq 4 ]
  [[ "$output" == *"symlink"* ]]
}

@test "a baseline outside the project's .cordon/ is refused (exit 4)" {
  run "$CORDON" gate baseline --out "$PROJECT/base.json" tests
  [ "$status" -eq 4 ]
  [[ "$output" == *"outside"* ]]
  [ ! -e "$PROJECT/base.json" ]
  mkdir -p .cordon/mine
  run "$CORDON" gate baseline --out .cordon/mine/b.json tests
  [ "$status" -eq 0 ]
  run "$CORDON" gate check .cordon/mine/b.json
  [ "$status" -eq 0 ]
}

@test "a protected path with .. or an absolute one is refused (exit 4)" {
  run "$CORDON" gate baseline --out base ../etc
  [ "$status" -eq 4 ]
  [[ "$output" == *".."* ]]
  run "$CORDON" gate baseline --out base /etc
  [ "$status" -eq 4 ]
}

@test "a tampered baseline is one clear line, exit 65" {
  "$CORDON" gate baseline --out base tests answers.txt
  # An edited digest: the snapshot it names is not in the store.
  sed -i 's/"snapshot":"[0-9a-f]/"snapshot":"f/' .cordon/gates/base
  sed -i 's/"snapshot":"f\([0-9a-f]\)/"snapshot":"0\1/' .cordon/gates/base
  run "$CORDON" gate check base
  [ "$status" -eq 65 ]
  [ "${#lines[@]}" -eq 1 ]
  [[ "$output" == *"gate baseline"* ]]
  # Not canonical JSON (a space added).
  "$CORDON" gate baseline --out base2 answers.txt
  sed -i 's/{"format"/{ "format"/' .cordon/gates/base2
  run "$CORDON" gate check base2
  [ "$status" -eq 65 ]
  [ "${#lines[@]}" -eq 1 ]
  # Not JSON at all.
  printf 'garbage' > .cordon/gates/base3
  run "$CORDON" gate check base3
  [ "$status" -eq 65 ]
  [ "${#lines[@]}" -eq 1 ]
  # A missing baseline is not found.
  run "$CORDON" gate check nope
  [ "$status" -eq 3 ]
}

@test "the baseline is canonical JSON in the documented format" {
  "$CORDON" gate baseline --out base tests answers.txt gone
  run cat .cordon/gates/base
  [[ "$output" == '{"format":"cordon-gate-baseline/1","paths":[{"kind":"file","mode":"0644","path":"answers.txt","sha256":"'* ]]
  [[ "$output" == *'{"kind":"absent","path":"gone"}'* ]]
  [[ "$output" == *'{"kind":"directory","path":"tests","snapshot":"'* ]]
  digest=$(sha256sum answers.txt | cut -d' ' -f1)
  [[ "$output" == *"\"sha256\":\"$digest\""* ]]
}

@test "the man page names every option gate --help prints" {
  [ -n "${SOURCE_ROOT-}" ] || skip "SOURCE_ROOT not set (run through meson test)"
  page=$(sed 's/\\-/-/g' "$SOURCE_ROOT/docs/man/cordon-gate.1")
  for opt in $("$CORDON" gate --help | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u); do
    grep -qE -- "$opt([^a-z0-9-]|\$)" <<<"$page" || { echo "cordon-gate.1 lacks $opt"; false; }
  done
}
