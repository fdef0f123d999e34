#!/usr/bin/env bats
# scripts/build-guest's default kernel (issue 19, Measure): the minimal kernel unless
# --debian-kernel (or CORDON_GUEST_KERNEL=debian) asks for Debian's, a bad CORDON_GUEST_KERNEL
# refused as a usage error, and an up-to-date minimal guest left alone. Nothing is downloaded
# or built: the tools the next step needs are left off PATH, so each run stops where the test
# looks.

setup() {
  src=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
  work=$(mktemp -d)
  mkdir "$work/bin"
}

teardown() {
  rm -rf "$work"
}

# A PATH holding only the named tools (and what every shell script needs).
tools() {
  for t in sh cat sed grep head cut tr date mkdir rm cp mv find sort sha256sum mktemp chmod ls \
    dirname printf env wc "$@"; do
    p=$(PATH=/usr/sbin:/usr/bin:/sbin:/bin command -v "$t") && ln -sf "$p" "$work/bin/$t"
  done
  true
}

@test "build-guest --help: the minimal kernel is the default, --debian-kernel picks Debian's" {
  run "$src/scripts/build-guest" --help
  [ "$status" -eq 0 ]
  [[ "$output" == *"the minimal kernel (the default; --minimal-kernel)"* ]]
  [[ "$output" == *"--debian-kernel: Debian's generic kernel"* ]]
  [[ "$output" == *"CORDON_GUEST_KERNEL=debian"* ]]
}

@test "build-guest: CORDON_GUEST_KERNEL other than minimal or debian is a usage error" {
  CORDON_GUEST_KERNEL=tiny run "$src/scripts/build-guest" --out "$work/guest"
  [ "$status" -eq 2 ]
  [ "${#lines[@]}" -eq 1 ]
  [[ "$output" == *"CORDON_GUEST_KERNEL must be minimal or debian, not tiny"* ]]
  [ ! -e "$work/guest" ]
}

@test "build-guest: with no option it tries the minimal kernel first (loudly when it cannot)" {
  # No apt: the minimal kernel cannot know its source (the loud warning), and the fallback to
  # Debian's kernel then stops at once for want of apt-get: nothing is downloaded.
  tools
  PATH="$work/bin" CORDON_GUEST_KERNEL_CACHE="$work/kcache" run "$src/scripts/build-guest" --out "$work/guest"
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"WARNING: the minimal guest kernel could not be built: no linux-source-6.1 package known"* ]]
  [[ "$output" == *"build-guest: apt-get is missing"* ]]
}

@test "build-guest --debian-kernel and CORDON_GUEST_KERNEL=debian do not try the minimal kernel" {
  tools
  PATH="$work/bin" run "$src/scripts/build-guest" --debian-kernel --out "$work/guest"
  [ "$status" -eq 1 ]
  [[ "$output" != *"WARNING"* ]]
  [[ "$output" == *"build-guest: apt-get is missing"* ]]
  PATH="$work/bin" CORDON_GUEST_KERNEL=debian run "$src/scripts/build-guest" --out "$work/guest"
  [ "$status" -eq 1 ]
  [[ "$output" != *"WARNING"* ]]
}

@test "build-guest: an up-to-date minimal guest is left alone; Debian's is not taken for it" {
  command -v apt-cache >/dev/null || skip "no apt-cache"
  srcver=$(apt-cache policy linux-source-6.1 2>/dev/null | sed -n 's/^ *Candidate: //p')
  case $srcver in '' | '(none)') skip "apt knows no linux-source-6.1" ;; esac
  command -v gcc >/dev/null || skip "no gcc"
  # The key as build-guest computes it: the fragment's settings, the source version, gcc.
  key=$({ grep -E '^(CONFIG_[A-Za-z0-9_]+=|# CONFIG_[A-Za-z0-9_]+ is not set$)' "$src/guest/kernel.config"
    echo "$srcver"; gcc --version | head -n1; } | sha256sum | cut -c1-16)
  mkdir "$work/guest"
  echo "not a kernel" >"$work/guest/vmlinux"
  echo "not an archive" >"$work/guest/initramfs.cpio"
  echo "cordon-minimal $srcver $key" >"$work/guest/kernel-version"
  (cd "$work/guest" && sha256sum vmlinux initramfs.cpio kernel-version >SHA256SUMS)
  run "$src/scripts/build-guest" --out "$work/guest"
  [ "$status" -eq 0 ]
  [[ "$output" == *"is up to date (cordon-minimal $srcver $key)"* ]]
  [ "$(cat "$work/guest/vmlinux")" = "not a kernel" ]
  # The same directory holding Debian's kernel: the default wants the minimal one, so it builds
  # (here it cannot: no flex on PATH, and no apt-get for the fallback).
  echo "6.1.0-99-amd64" >"$work/guest/kernel-version"
  (cd "$work/guest" && sha256sum vmlinux initramfs.cpio kernel-version >SHA256SUMS)
  tools apt-cache gcc make bison bc xz
  PATH="$work/bin" CORDON_GUEST_KERNEL_CACHE="$work/kcache" run "$src/scripts/build-guest" --out "$work/guest"
  echo "$output"
  [[ "$output" != *"up to date"* ]]
  [[ "$output" == *"WARNING: the minimal guest kernel could not be built: flex is missing"* ]]
}
