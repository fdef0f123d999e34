#!/usr/bin/env bats
# `cordon agent`'s host isolation tier and agent CLI adapters (issue 18, items 6 and 7), as a
# user types them: the declared tier through its chain (flag, CORDON_HOST_ISOLATION, the
# project's, the user's and the system's config.yaml), its audit event, and an adapter's flags,
# variables and state directories. The agent is a stand-in script that prints what it got.

bats_require_minimum_version 1.5.0

setup() {
  # Not under /tmp: the agent gets a private /tmp, and the ns mechanism cannot grant a
  # read-write directory beneath it (the HOME state directory an adapter grants).
  WORK=$(mktemp -d /var/tmp/cordon-agent-tier.XXXXXX 2>/dev/null ||
    mktemp -d "${TMPDIR:-/tmp}/cordon-agent-tier.XXXXXX")
  PROJECT=$WORK/project
  mkdir -p "$PROJECT/bin" "$WORK/home"
  export CORDON_PROJECT=$PROJECT
  export CORDON_KEY_DIR=$WORK/keys
  export HOME=$WORK/home
  export XDG_CONFIG_HOME=$WORK/home/.config
  # The system layer's file, so no test reads or writes /etc.
  export CORDON_SYSTEM_CONFIG=$WORK/system.yaml
  unset CORDON_HOST_ISOLATION CORDON_HOST_ISOLATION_EVIDENCE CORDON_SANDBOX
  # The stand-in agent: its argv, one line each, then what it sees of two provider keys; given
# write-state, it writes its state directory and tries the rest of HOME.
  cat >"$PROJECT/bin/claude" <<'SH'
#!/bin/sh
for a in "$@"; do
  echo "arg:$a"
  if [ "$a" = write-state ]; then
    echo written >"$HOME/.claude/state" || exit 3
    echo no >"$HOME/outside" 2>/dev/null
  fi
done
echo "anthropic:${ANTHROPIC_API_KEY-unset}"
echo "openai:${OPENAI_API_KEY-unset}"
SH
  chmod +x "$PROJECT/bin/claude"
  cd "$PROJECT"
}

teardown() {
  cd /
  [ -z "${WORK:-}" ] || rm -rf "$WORK"
}

# The details of the newest sandbox.host_isolation_declared entry, compact JSON.
declared() {
  "$CORDON" audit show --json |
    jq -cs 'map(select(.event == "sandbox.host_isolation_declared")) | last | .details'
}

# Unconfined by the operator's explicit choice: cordon's own tier is then none, so only the
# declared host tier decides.
agent_off() { "$CORDON" agent --mechanism off --no-require-enforcement "$@"; }

@test "agent tier: --help names --host-isolation, its evidence and --adapter" {
  run "$CORDON" agent --help
  [ "$status" -eq 0 ]
  [[ "$output" == *"--host-isolation"* ]]
  [[ "$output" == *"--host-isolation-evidence"* ]]
  [[ "$output" == *"--adapter"* ]]
}

@test "agent tier: a declared vm drops claude's own sandbox and records tier, evidence, layer" {
  export ANTHROPIC_API_KEY=sk-ant-test OPENAI_API_KEY=sk-openai-secret
  run agent_off --host-isolation vm --host-isolation-evidence "firecracker, one VM per run" \
    --adapter claude -- ./bin/claude -p hello
  [ "$status" -eq 0 ]
  # The flag goes right after argv[0]; the caller's own arguments follow unchanged.
  [[ "$output" == *"arg:--dangerously-skip-permissions"$'\n'"arg:-p"$'\n'"arg:hello"* ]]
  # The adapter's auth variable passes; another provider's key does not.
  [[ "$output" == *"anthropic:sk-ant-test"* ]]
  [[ "$output" == *"openai:unset"* ]]
  [[ "$output" != *"sk-openai-secret"* ]]
  [ "$(declared | jq -r '.tier, .layer, .evidence, .agent_sandbox_dropped')" = "vm
flag
firecracker, one VM per run
true" ]
  run "$CORDON" audit verify
  [ "$status" -eq 0 ]
}

@test "agent tier: at process or none the CLI's own sandbox stays" {
  for tier in none process; do
    run agent_off --host-isolation "$tier" --adapter claude -- ./bin/claude go
    [ "$status" -eq 0 ]
    [[ "$output" != *"--dangerously-skip-permissions"* ]]
    [[ "$output" == *"arg:go"* ]]
    [ "$(declared | jq -r '.tier, .agent_sandbox_dropped')" = "$tier
false" ]
  done
}

@test "agent tier: cordon's container confinement alone drops it (host tier none)" {
  run "$CORDON" agent --adapter claude -- ./bin/claude go
  if [ "$status" -eq 4 ]; then
    skip "no container-tier mechanism on this machine: $output"
  fi
  [ "$status" -eq 0 ]
  [[ "$output" == *"arg:--dangerously-skip-permissions"$'\n'"arg:go"* ]]
  [ "$(declared | jq -r '.tier, .layer, .agent_sandbox_dropped')" = "none
default
true" ]
}

@test "agent tier: the adapter's state directory is writable inside, the rest of HOME is not" {
  run "$CORDON" agent --adapter claude -- ./bin/claude write-state
  if [ "$status" -eq 4 ]; then
    skip "no confinement mechanism on this machine: $output"
  fi
  [ "$status" -eq 0 ]
  # On the host: the state landed; the other write either failed or stayed inside (a private
  # view), never reaching the host's HOME.
  [ "$(cat "$HOME/.claude/state")" = written ]
  [ ! -e "$HOME/outside" ]
  [ "$(stat -c %a "$HOME/.claude")" = 700 ]
}

@test "agent tier: the config chain, layer by layer, the first that declares wins" {
  run agent_off -- true
  [ "$status" -eq 0 ]
  [ "$(declared | jq -r '.tier, .layer, .evidence')" = "none
default
null" ]
  printf 'host_isolation: process\nevidence: the system file\n' >"$WORK/system.yaml"
  agent_off -- true
  [ "$(declared | jq -r '.tier, .layer, .evidence')" = "process
system
the system file" ]
  # A user file with other settings only does not hide the system's declaration.
  mkdir -p "$XDG_CONFIG_HOME/cordon"
  printf 'editor: vi\n' >"$XDG_CONFIG_HOME/cordon/config.yaml"
  agent_off -- true
  [ "$(declared | jq -r .layer)" = system ]
  printf 'host_isolation: container\neditor: vi\n' >"$XDG_CONFIG_HOME/cordon/config.yaml"
  agent_off -- true
  [ "$(declared | jq -r '.tier, .layer')" = "container
user" ]
  mkdir -p .cordon
  printf 'host_isolation: vm\nevidence: "CI runner VM"\n' >.cordon/config.yaml
  agent_off -- true
  [ "$(declared | jq -r '.tier, .layer, .evidence')" = "vm
project
CI runner VM" ]
  CORDON_HOST_ISOLATION=process agent_off -- true
  [ "$(declared | jq -r '.tier, .layer')" = "process
env" ]
  CORDON_HOST_ISOLATION=process agent_off --host-isolation none -- true
  [ "$(declared | jq -r '.tier, .layer')" = "none
flag" ]
  run "$CORDON" audit verify
  [ "$status" -eq 0 ]
}

@test "agent tier: a bad tier is refused, naming the accepted ones, and the agent never starts" {
  run agent_off --host-isolation kvm -- touch started
  [ "$status" -eq 2 ]
  [[ "$output" == *"kvm"*"none, process, container, vm"* ]]
  run env CORDON_HOST_ISOLATION=VM "$CORDON" agent --mechanism off --no-require-enforcement \
    -- touch started
  [ "$status" -eq 2 ]
  [[ "$output" == *"CORDON_HOST_ISOLATION"* ]]
  mkdir -p .cordon
  printf 'host_isolation: hypervisor\n' >.cordon/config.yaml
  run agent_off -- touch started
  [ "$status" -ne 0 ]
  [[ "$output" == *".cordon/config.yaml"*"host_isolation"* ]]
  printf 'host_isolation: [vm]\n' >.cordon/config.yaml
  run agent_off -- touch started
  [ "$status" -ne 0 ]
  [[ "$output" == *"host_isolation"* ]]
  [ ! -e started ]
  run "$CORDON" audit show --json
  [[ "$output" != *"sandbox.host_isolation_declared"* ]]
}

@test "agent tier: an unknown adapter exits 2 listing the adapters" {
  run agent_off --adapter cursor -- touch started
  [ "$status" -eq 2 ]
  [[ "$output" == *"cursor"*"aider, claude, codex, gemini, generic"* ]]
  [ ! -e started ]
}

@test "agent tier: --print shows the adapter's flags as the mechanism would add them, records nothing" {
  run "$CORDON" agent --print bwrap --adapter codex -- codex exec hi
  [ "$status" -eq 0 ]
  [[ "$output" == *" -- codex --dangerously-bypass-approvals-and-sandbox exec hi" ]]
  # The generic adapter (the default) adds nothing.
  run "$CORDON" agent --print bwrap -- codex exec hi
  [ "$status" -eq 0 ]
  [[ "$output" == *" -- codex exec hi" ]]
  run "$CORDON" audit show --json
  [[ "$output" != *"sandbox.host_isolation_declared"* ]]
}

@test "agent tier: refused enforcement records no declaration and never starts the agent" {
  run "$CORDON" agent --mechanism off --host-isolation vm --adapter claude -- touch started
  [ "$status" -eq 4 ]
  [ ! -e started ]
  run "$CORDON" audit show --json
  [[ "$output" != *"sandbox.host_isolation_declared"* ]]
}

@test "agent tier: under bwrap too the state directory is writable and the rest of HOME is not" {
  command -v bwrap >/dev/null && bwrap --unshare-all --ro-bind / / true 2>/dev/null ||
    skip "bubblewrap is not installed or cannot make namespaces here"
  run "$CORDON" agent --mechanism bwrap --adapter claude -- ./bin/claude write-state
  [ "$status" -eq 0 ]
  [[ "$output" == *"arg:--dangerously-skip-permissions"* ]]
  [ "$(cat "$HOME/.claude/state")" = written ]
  [ ! -e "$HOME/outside" ]
  [ "$(declared | jq -r '.adapter, .agent_sandbox_dropped')" = "claude
true" ]
}

@test "agent tier: landlock is process-tier: the CLI's sandbox stays unless the host declares more" {
  run "$CORDON" agent --mechanism landlock --adapter claude -- ./bin/claude go
  if [ "$status" -eq 4 ]; then
    skip "landlock cannot confine here: $output"
  fi
  [ "$status" -eq 0 ]
  [[ "$output" != *"--dangerously-skip-permissions"* ]]
  [[ "$output" == *"arg:go"* ]]
  [ "$(declared | jq -r '.tier, .agent_sandbox_dropped')" = "none
false" ]
  run "$CORDON" agent --mechanism landlock --host-isolation container --adapter claude \
    -- ./bin/claude go
  [ "$status" -eq 0 ]
  [[ "$output" == *"arg:--dangerously-skip-permissions"$'\n'"arg:go"* ]]
  [ "$(declared | jq -r '.tier, .agent_sandbox_dropped')" = "container
true" ]
}
