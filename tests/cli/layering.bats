#!/usr/bin/env bats
# scripts/check-layering against small made-up trees: a clean one passes, an include that
# reaches up a floor, one across a floor and one between two backends' folders each fail with
# the file and line named. $CHECK_LAYERING is the script under test.

bats_require_minimum_version 1.5.0

setup() {
  TREE=$(mktemp -d "${TMPDIR:-/tmp}/cordon-layering.XXXXXX")
  mkdir -p "$TREE/src/base" "$TREE/src/store" "$TREE/src/protocol" "$TREE/src/backends/ns" \
    "$TREE/src/backends/docker"
  printf '#include <stdio.h>\n' >"$TREE/src/base/fs.h"
  printf '#include "base/fs.h"\n#include <cordon/cas.h>\n' >"$TREE/src/store/cas.c"
  printf '#include "store/cas.h"\n#include "protocol/context.h"\n' >"$TREE/src/protocol/context.c"
  printf '#include "backends/ns/ns.h"\n#include "backends/builtin.h"\n' >"$TREE/src/backends/ns/ns.c"
  printf '#include "protocol/context.h"\n' >"$TREE/src/backends/docker/docker.c"
}

teardown() {
  rm -rf "$TREE"
}

@test "layering: a tree whose includes all run down the floors passes with a summary" {
  run "$CHECK_LAYERING" "$TREE/src"
  [ "$status" -eq 0 ]
  [ "${#lines[@]}" -eq 1 ]
  [[ "$output" == "check-layering: 5 files"* ]]
}

@test "layering: an include of a higher floor fails and names file, line and floors" {
  printf '#include <errno.h>\n#include "protocol/context.h"\n' >>"$TREE/src/store/cas.c"
  run "$CHECK_LAYERING" "$TREE/src"
  [ "$status" -eq 1 ]
  [[ "$output" == *"$TREE/src/store/cas.c:4: src/store (floor 1) includes protocol/context.h (floor 3)"* ]]
}

@test "layering: an include of the same floor fails" {
  mkdir -p "$TREE/src/crypto"
  printf '#include "store/cas.h"\n' >"$TREE/src/crypto/keys.c"
  run "$CHECK_LAYERING" "$TREE/src"
  [ "$status" -eq 1 ]
  [[ "$output" == *"crypto/keys.c:1: src/crypto (floor 1) includes store/cas.h (floor 1)"* ]]
}

@test "layering: one backend's folder including another's fails" {
  printf '#include "backends/ns/proto.h"\n' >>"$TREE/src/backends/docker/docker.c"
  run "$CHECK_LAYERING" "$TREE/src"
  [ "$status" -eq 1 ]
  [[ "$output" == *"backends/docker/docker.c:2: src/backends/docker includes backends/ns/proto.h (another backend)"* ]]
}

@test "layering: a module without a floor fails" {
  mkdir -p "$TREE/src/attic"
  printf 'int x;\n' >"$TREE/src/attic/old.c"
  run "$CHECK_LAYERING" "$TREE/src"
  [ "$status" -eq 1 ]
  [[ "$output" == *"attic/old.c:1: src/attic has no floor"* ]]
}
