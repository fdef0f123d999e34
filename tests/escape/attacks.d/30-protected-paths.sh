# shellcheck shell=bash
# Findings 4 and 5 of issue 14: read-only and hidden paths that cannot be carried away by renaming
# a writable parent, nor read (or written) through another name. Sourced by ../escape.sh.

# ---- finding 4: a protected path stays at its host path whatever happens to its parents ------
mkdir -p "$ws/deep/hooks"
echo hook > "$ws/deep/hooks/file"
[ "$backend" = docker ] && chown -R 65534:65534 "$ws/deep"

# holds FILE CONTENT WHAT: the real assertion, on the host
holds() {
  if [ "$(cat "$1" 2>/dev/null)" = "$2" ]; then ok "on the host $3 still holds what it held"
  else not_ok "on the host $3 now holds: $(cat "$1" 2>&1)"; fi
}
# put_back DIR: undo a parent swap that escaped, so the later attacks see the fixture
put_back() {
  if [ -d "$1.aside" ]; then rm -rf "$1"; mv "$1.aside" "$1"; fi
  rm -rf "$1.new"
}

attack "carry --ro deep/hooks away: move deep aside, recreate deep/hooks/file" --ro deep/hooks \
  -- replace-parent /workspace/deep /workspace/deep/hooks/file
holds "$ws/deep/hooks/file" hook "the read-only deep/hooks/file"
put_back "$ws/deep"
attack "carry --ro deep/hooks away: swap deep with a planted copy (RENAME_EXCHANGE)" \
  --ro deep/hooks -- exchange-parent /workspace/deep /workspace/deep/hooks/file
holds "$ws/deep/hooks/file" hook "the read-only deep/hooks/file"
put_back "$ws/deep"
attack "carry hidden conf/token away: move conf aside, recreate conf/token" \
  -- replace-parent /workspace/conf /workspace/conf/token
holds "$ws/conf/token" token "the hidden conf/token"
put_back "$ws/conf"
attack "carry hidden conf/token away: swap conf with a planted copy (RENAME_EXCHANGE)" \
  -- exchange-parent /workspace/conf /workspace/conf/token
holds "$ws/conf/token" token "the hidden conf/token"
put_back "$ws/conf"
# The protected paths themselves were mount points already: they stay so.
attack "move the read-only ro aside and recreate it" -- replace-parent /workspace/ro /workspace/ro/file
holds "$ws/ro/file" read-only "the read-only ro/file"
put_back "$ws/ro"
attack "swap the hidden hidden-dir with a planted copy" \
  -- exchange-parent /workspace/hidden-dir /workspace/hidden-dir/secret
holds "$ws/hidden-dir/secret" secret "the hidden hidden-dir/secret"
put_back "$ws/hidden-dir"
control "the parent of a protected path stays writable" --ro deep/hooks \
  -- write-file /workspace/deep/written
rm -f "$ws/deep/written"

# ---- finding 5: no protected file is reachable through another name (a hard link) ----------
mkdir -p "$ws/links"
echo linked-secret > "$ws/links/secret"
ln "$ws/links/secret" "$ws/secret-link"
[ "$backend" = docker ] && chown -R 65534:65534 "$ws/links" "$ws/secret-link"

# refused NAME WANT... -- [flags...] -- VERB ARGS...: the sandbox is refused before anything runs
# (run: 125, session create: 4), by one line naming every WANT; the probe never ran.
refused() {
  local name=$1 wants=() flags=()
  shift
  while [ "$1" != "--" ]; do wants+=("$1"); shift; done
  shift
  while [ "$1" != "--" ]; do flags+=("$1"); shift; done
  shift
  local expect
  if [ "$mode" = session ]; then
    out=$("$CORDON" session create --backend "$backend" "${policy[@]}" "${flags[@]}" 2>&1)
    code=$?
    expect=4
    if [ "$code" -eq 0 ]; then
      local id=$out
      out=$("$CORDON" session exec "$id" -- /workspace/probe "$@" 2>&1)
      "$CORDON" session destroy "$id" >/dev/null 2>&1
      code=0
    fi
  else
    out=$("$CORDON" run --backend "$backend" "${policy[@]}" "${flags[@]}" -- /workspace/probe "$@" 2>&1)
    code=$?
    expect=125
  fi
  local missing=""
  for w in "${wants[@]}"; do echo "$out" | grep -qF -- "$w" || missing="$missing $w"; done
  if [ "$code" -eq "$expect" ] && [ -z "$missing" ] && [ "$(echo "$out" | wc -l)" -eq 1 ]; then
    ok "$name: refused: $out"
  else
    not_ok "$name: exit $code (expected $expect, one line naming${missing:- all}): $out"
  fi
}

refused "a hidden file with another name" links/secret secret-link -- --hide links/secret \
  -- read-file /workspace/secret-link
refused "a hidden directory holding a file with another name outside it" links secret-link \
  -- --hide links -- read-file /workspace/secret-link
refused "a read-only file with a writable other name" links/secret secret-link \
  -- --ro links/secret -- write-file /workspace/secret-link
holds "$ws/links/secret" linked-secret "the read-only links/secret"
attack "read a hidden file whose every name is hidden" --hide links/secret --hide secret-link \
  -- read-file /workspace/secret-link
rm -f "$ws/secret-link"
attack "read a hidden file once its other name is gone" --hide links/secret \
  -- read-file /workspace/links/secret

# A session resumed from a snapshot (an overlay workspace as root) pins the same directories.
if [ "$mode" = session ] && [ "$backend" = ns ]; then
  if id=$("$CORDON" session create --backend ns --workspace "$ws" 2>&1) &&
    snap=$("$CORDON" session snapshot "$id" 2>&1) &&
    "$CORDON" session destroy "$id" >/dev/null 2>&1 &&
    id=$("$CORDON" session create --backend ns --from "$snap" --ro deep/hooks 2>&1); then
    out=$("$CORDON" session exec "$id" -- /workspace/probe replace-parent /workspace/deep \
      /workspace/deep/hooks/file 2>&1)
    code=$?
    case $code in
      1) ok "carry --ro deep/hooks away in a resumed session: $(echo "$out" | tail -1)" ;;
      0) not_ok "carry --ro deep/hooks away in a resumed session ESCAPED: $out" ;;
      *) not_ok "carry --ro deep/hooks away in a resumed session: exit $code: $out" ;;
    esac
    "$CORDON" session destroy "$id" >/dev/null 2>&1
  else
    not_ok "carry --ro deep/hooks away in a resumed session: no session to attack: $id $snap"
  fi
fi
