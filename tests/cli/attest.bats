#!/usr/bin/env bats
# `cordon attest` and `cordon attest verify` (issue 22, items 1-3): probes on every local
# backend through real sessions, honest verdicts for a host-run fake VM and a lying plugin,
# byte-identical re-attestation, tampering refused, verify's exit codes. $LIAR_PLUGIN_DIR holds
# the lying plugin (tests/conformance/liar-plugin.c); docker skips without an engine.

bats_require_minimum_version 1.5.0

load common

setup_file() {
  export DOCKER_HOST=${DOCKER_HOST:-unix:///run/cordon-docker/docker.sock}
  backends_check_once ns docker
}

setup() {
  project_enter attest
  export CORDON_KEY_DIR=$PROJECT/keys
  unset CORDON_PLUGIN_PATH
  "$CORDON" key init >/dev/null
  KID=$("$CORDON" key show | sed -n 's/^kid: //p')
  [ ${#KID} -eq 43 ]
}

teardown() {
  project_leave
}

# The backend entry $2 of attestation $1 as compact JSON.
entry() {
  jq -c --arg b "$2" '.body.backends[] | select(.name == $b)' "$1"
}

# The verdict of probe $3 of backend $2 in attestation $1.
probe_verdict() {
  jq -r --arg b "$2" --arg p "$3" \
    '.body.backends[] | select(.name == $b) | .probes[] | select(.name == $p) | .verdict' "$1"
}

@test "attest ns: every declared capability observed, the boundary measured, tier container" {
  need_ns
  run "$CORDON" attest --backend ns --out att.json
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  [[ "$output" == *"signed by $KID"* ]]
  e=$(entry att.json ns)
  [ "$(jq -c .observed <<<"$e")" = "$(jq -c .declared <<<"$e")" ]
  [ "$(jq -r .tier <<<"$e")" = container ]
  for p in host_processes_invisible host_files_invisible not_root_on_host seccomp_in_force \
    memory_limit_enforced pids_limit_enforced no_route_off; do
    [ "$(probe_verdict att.json ns $p)" = observed ] || { echo "$p"; false; }
  done
  [ "$(probe_verdict att.json ns own_kernel)" = refuted ]
  [ "$(probe_verdict att.json ns egress_class)" = observed ]
  run "$CORDON" attest verify att.json --expected-keyid "$KID"
  [ "$status" -eq 0 ]
  [[ "$output" == "verified: att.json signed by $KID; 1 backends;"* ]]
}

@test "attest worktree: capabilities observed, the boundary refuted, tier none" {
  run "$CORDON" attest --backend worktree --out att.json
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  [ "$(jq -r '.body.backends[0].tier' att.json)" = none ]
  [ "$(probe_verdict att.json worktree host_files_invisible)" = refuted ]
  [ "$(probe_verdict att.json worktree host_processes_invisible)" = refuted ]
  [ "$(probe_verdict att.json worktree memory_limit_enforced)" = refuted ]
  [ "$(jq -c '.body.backends[0].observed' att.json)" = '["exec","file_rw","network","snapshot"]' ]
}

@test "attest docker: tier container, capabilities observed" {
  need_docker
  run "$CORDON" attest --backend docker --out att.json
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  e=$(entry att.json docker)
  [ "$(jq -r .tier <<<"$e")" = container ]
  [ "$(jq -c .observed <<<"$e")" = "$(jq -c .declared <<<"$e")" ]
  [ "$(probe_verdict att.json docker host_processes_invisible)" = observed ]
  [ "$(probe_verdict att.json docker not_root_on_host)" = observed ]
}

@test "attest microvm with the fake monitor: commands on the host are no VM (tier none)" {
  CORDON_MICROVM_MONITOR=fake run "$CORDON" attest --backend microvm --out att.json
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  [ "$(jq -r '.body.backends[0].tier' att.json)" = none ]
  [ "$(probe_verdict att.json microvm own_kernel)" = refuted ]
  [ "$(probe_verdict att.json microvm host_files_invisible)" = refuted ]
  [ "$(probe_verdict att.json microvm host_processes_invisible)" = refuted ]
  # It declares a memory limit; the fake does not hold it.
  [ "$(probe_verdict att.json microvm memory_limit_enforced)" = refuted ]
}

@test "attest an unavailable backend: listed with the reason, every capability unverifiable" {
  CORDON_MICROVM_MONITOR=firecracker run "$CORDON" attest --backend microvm --out att.json
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  e=$(entry att.json microvm)
  [ "$(jq -c .unverifiable <<<"$e")" = "$(jq -c .declared <<<"$e")" ]
  [ "$(jq -c .observed <<<"$e")" = '[]' ]
  [ "$(jq -r .tier <<<"$e")" = none ]
  [ "$(jq -r '[.probes[].reason] | unique | join(",")' <<<"$e")" = backend_unavailable ]
  jq -r '.probes[0].evidence' <<<"$e" | grep -q firecracker
}

@test "a plugin that declares egress none and leaves the network open is refuted" {
  export CORDON_PLUGIN_PATH=$LIAR_PLUGIN_DIR
  run "$CORDON" attest --backend liar --out att.json
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  e=$(entry att.json liar)
  [ "$(jq -c .refuted <<<"$e")" = '["network"]' ]
  [ "$(probe_verdict att.json liar egress_class)" = refuted ]
  # Its boundary cannot be observed (its commands might run anywhere): unverifiable, tier none,
  # though it declares container.
  [ "$(probe_verdict att.json liar boundary)" = unverifiable ]
  [ "$(jq -r .tier <<<"$e")" = none ]
}

@test "conformance of the lying plugin fails, and names each failure again on one line after its summary" {
  export CORDON_PLUGIN_PATH=$LIAR_PLUGIN_DIR
  run "$CORDON" conformance liar
  [ "$status" -eq 1 ] || { echo "$output"; false; }
  # Everything after the summary line: the failures, so a log cut to its tail still names them.
  tail_lines=$(sed -n '/^[0-9]* passed, [0-9]* failed, [0-9]* skipped$/,$p' <<<"$output" | tail -n +2)
  [ "$(grep -c '^fail ' <<<"$output")" -eq "$(wc -l <<<"$tail_lines")" ]
  grep -qx 'failed net-none-no-interface: an interface other than lo exists inside: .*' <<<"$tail_lines"
  # A newline in the command's output is shown as \n, not a second line.
  grep -q '^failed sandbox-user-1000: .*expected "1000:1000:cordon\\n"' <<<"$tail_lines"
}

@test "attesting an unchanged host twice gives byte-identical documents; an audit event each" {
  export CORDON_PLUGIN_PATH=$LIAR_PLUGIN_DIR
  "$CORDON" attest --backend worktree --backend liar --out one.json
  "$CORDON" attest --backend liar --backend worktree >two.json
  cmp one.json two.json
  # Sorted by name whatever the order asked.
  [ "$(jq -r '[.body.backends[].name] | join(",")' one.json)" = liar,worktree ]
  [ "$(jq -r '.body.type' one.json)" = cordon.isolation-attestation.v1 ]
  [ "$(jq -r '.body.signer.kid' one.json)" = "$KID" ]
  # No time, no run id in the body; host facts from the allowlist and their digest.
  [ "$(jq -r '.body | keys | join(",")' one.json)" = backends,host_facts,host_facts_digest,signer,type ]
  [ "$(jq -r '.body.host_facts | keys | join(",")' one.json)" = \
    architecture,cgroup_layout,cordon_version,kernel_release,kvm,landlock_abi,seccomp,user_namespaces ]
  digest=$(sha256sum one.json | cut -d' ' -f1)
  run "$CORDON" audit show --json
  [ "$status" -eq 0 ]
  [ "$(jq -rs '[.[] | select(.event == "sandbox.attested")] | length' <<<"$output")" -eq 2 ]
  [ "$(jq -rs '[.[] | select(.event == "sandbox.attested")][0].resource_id' <<<"$output")" = "$digest" ]
}

@test "--host-facts: allowlisted facts laid over the measured ones; others refused" {
  printf '{"kernel_release":"9.9.9-test","kvm":"absent"}' >facts.json
  "$CORDON" attest --backend worktree --host-facts facts.json --out att.json
  [ "$(jq -r .body.host_facts.kernel_release att.json)" = 9.9.9-test ]
  "$CORDON" attest verify att.json --expected-keyid "$KID"
  printf '{"hostname":"x"}' >bad.json
  run "$CORDON" attest --backend worktree --host-facts bad.json --out att2.json
  [ "$status" -eq 2 ]
  [[ "$output" == *"'hostname' is not an allowed fact"* ]]
  [ ! -e att2.json ]
  run "$CORDON" attest --backend nosuch
  [ "$status" -eq 3 ]
}

@test "attest verify: exit codes 0, 3, 1, 2, 4, 64" {
  "$CORDON" attest --backend worktree --out att.json
  run "$CORDON" attest verify att.json --expected-keyid "$KID"
  [ "$status" -eq 0 ]
  run "$CORDON" attest verify att.json
  [ "$status" -eq 3 ]
  [[ "$output" == unanchored:* ]]
  run "$CORDON" attest verify att.json --expected-keyid "$(printf 'A%.0s' $(seq 43))"
  [ "$status" -eq 1 ]
  # A consistent edit re-signed by nobody: the signature fails.
  sed 's/"tier":"none"/"tier":"vm"/' att.json >tampered.json
  run "$CORDON" attest verify tampered.json --expected-keyid "$KID"
  [ "$status" -eq 1 ]
  run "$CORDON" attest verify absent.json --expected-keyid "$KID"
  [ "$status" -eq 2 ]
  mkfifo fifo.json
  run timeout 20 "$CORDON" attest verify fifo.json --expected-keyid "$KID"
  [ "$status" -eq 4 ]
  mkdir dir.json
  run "$CORDON" attest verify dir.json
  [ "$status" -eq 4 ]
  run "$CORDON" attest verify
  [ "$status" -eq 64 ]
  run "$CORDON" attest verify att.json --expected-keyid short
  [ "$status" -eq 64 ]
  run "$CORDON" attest verify att.json --json --expected-keyid "$KID"
  [ "$status" -eq 0 ]
  [ "$(jq -r .verdict <<<"$output")" = verified ]
  # A receipt is not an attestation, nor an attestation a receipt.
  run "$CORDON" receipt verify att.json --expected-keyid "$KID"
  [ "$status" -eq 1 ]
}

@test "flipping bytes of an attestation makes verify fail (every 7th position and the ends)" {
  # Every position is flipped in the unit test (tests/unit/test-attest.c, in-process); here
  # the CLI sees a spread of them, the first and last bytes included.
  "$CORDON" attest --backend worktree --out att.json
  run perl -e '
    my ($cordon, $kid) = @ARGV;
    open(my $in, "<:raw", "att.json") or die; local $/; my $doc = <$in>; close $in;
    my $n = length($doc); my $bad = 0;
    for (my $i = 0; $i < $n; $i += ($i == 0 ? 1 : 7)) {
      for my $at ($i, $n - 1) {
        my $copy = $doc; substr($copy, $at, 1) = chr(ord(substr($copy, $at, 1)) ^ 0x01);
        open(my $out, ">:raw", "flipped.json") or die; print $out $copy; close $out;
        my $pid = fork();
        if ($pid == 0) { open(STDOUT, ">/dev/null"); open(STDERR, ">/dev/null");
          exec($cordon, "attest", "verify", "flipped.json", "--expected-keyid", $kid) or exit 99; }
        waitpid($pid, 0); my $code = $? >> 8;
        if ($code != 1) { print "byte $at: exit $code\n"; $bad++; }
      }
    }
    exit($bad ? 1 : 0);' "$CORDON" "$KID"
  [ "$status" -eq 0 ] || { echo "$output"; false; }
}

@test "attest --help, and the verb in cordon --help" {
  run "$CORDON" attest --help
  [ "$status" -eq 0 ]
  [[ "$output" == *"--host-facts FILE"* ]]
  [[ "$output" == *"3 unanchored"* ]]
  run "$CORDON" --help
  [[ "$output" == *"attest [--backend NAME]"* ]]
  run "$CORDON" attest --bogus
  [ "$status" -eq 2 ]
}

@test "attest ns with GPU nodes: gpu declared and probed through a grant; a node that opens nothing is refuted, and select refuses gpu" {
  need_ns
  [ "$(id -u)" -eq 0 ] || skip "mknod of the fake GPU nodes needs root"
  dev=$(mktemp -d "${TMPDIR:-/tmp}/cordon-attest-gpu.XXXXXX") # outside the project: granted nodes live on the host
  chmod 755 "$dev" # the sandbox's holder reaches the nodes by path
  # /dev/null's numbers stand in for a GPU that opens (this machine has none).
  mknod -m 666 "$dev/nvidia0" c 1 3
  mknod -m 666 "$dev/nvidiactl" c 1 3
  run env CORDON_DEV_ROOT="$dev" "$CORDON" attest --backend ns --out gpu.json
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  entry gpu.json ns | jq -e '(.declared | index("gpu")) and (.observed | index("gpu"))'
  [ "$(probe_verdict gpu.json ns device_node)" = observed ]
  # NVIDIA's own numbers with no driver on this host: the node is there but opens nothing.
  rm "$dev/nvidia0" "$dev/nvidiactl"
  mknod -m 666 "$dev/nvidia0" c 195 0
  mknod -m 666 "$dev/nvidiactl" c 195 255
  run env CORDON_DEV_ROOT="$dev" "$CORDON" attest --backend ns --out nogpu.json
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  entry nogpu.json ns | jq -e '.refuted | index("gpu")'
  [ "$(probe_verdict nogpu.json ns device_node)" = refuted ]
  run --separate-stderr env CORDON_DEV_ROOT="$dev" "$CORDON" select --require exec,gpu \
    --attestation nogpu.json
  [ "$status" -eq 4 ]
  [[ "$stderr" == *"ns: gpu refuted by the attestation"* ]]
  rm -r "$dev"
}
