# Shared by the pool tests (pool.bats, pool-dispatch.bats, pool-live.bats): a project of the
# test's own (project, key directory, state home, a signing key), its teardown, and helpers.

# pool_project_enter NAME: a fresh project under $TMPDIR, entered, with its key.
pool_project_enter() {
  PROJECT=$(mktemp -d "${TMPDIR:-/tmp}/cordon-$1.XXXXXX")
  export CORDON_PROJECT=$PROJECT
  export CORDON_KEY_DIR=$PROJECT/keys
  export XDG_STATE_HOME=$PROJECT/state
  mkdir -p "$XDG_STATE_HOME" "$PROJECT/.cordon"
  cd "$PROJECT"
  "$CORDON" key init >/dev/null 2>&1
}

# pool_project_leave: kill what the test left in the background ($BACKGROUND), destroy its
# sessions, remove the project.
pool_project_leave() {
  cd /
  local pid id
  for pid in ${BACKGROUND:-}; do kill -9 "$pid" 2>/dev/null || true; done
  for id in $("$CORDON" session list 2>/dev/null | awk '{print $1}'); do
    CORDON_PROJECT=$PROJECT "$CORDON" session destroy "$id" >/dev/null 2>&1 || true
  done
  rm -rf "$PROJECT"
}

ns_or_skip() {
  "$CORDON" run --backend ns -- true >/dev/null 2>&1 || skip "ns backend unavailable here"
}

# pool_spec_exposing EXPOSED NAME MAX_CONCURRENCY LANG [TEMPLATE_EXTRA]: a pool on ns whose body
# changes with LANG, exposing EXPOSED (JSON strings, comma-separated).
pool_spec_exposing() {
  printf '{"name": "%s", "backend_allowlist": ["ns"],
 "template": {"env": {"LANG": "%s"}, "timeout_seconds": 60, "net": "loopback",
              "capabilities": ["exec", "file_rw"]%s},
 "exposed_fields": [%s], "max_concurrency": %s,
 "capability_ceiling": ["exec", "file_rw"], "network_egress_class": "loopback",
 "credential_env_allowlist": []}\n' "$2" "$4" "${5:-}" "$1" "$3"
}

# The CAS path of a digest.
blob() { printf '%s/.cordon/cas/%s/%s' "$PROJECT" "${1:0:2}" "$1"; }

# Flip the low bit of byte OFFSET of FILE (blobs are read-only).
flip() {
  chmod u+w "$1"
  python3 - "$1" "$2" <<'PY'
import sys
path, offset = sys.argv[1], int(sys.argv[2])
data = bytearray(open(path, 'rb').read())
data[offset] ^= 1
open(path, 'wb').write(bytes(data))
PY
}
