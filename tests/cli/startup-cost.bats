#!/usr/bin/env bats
# What every `cordon` start-up pays, kept from growing back (issue 15, cold start): the
# executable maps no shared object but libc (libmicrohttpd and its GnuTLS chain are loaded by
# `cordon serve` only, which tests/cli/serve.bats exercises; libcrypto, jansson, libseccomp and libyaml are linked in), and it has no
# thread-local storage to speak of (the loader zeroes all of it at every start). $CORDON is the
# executable under test.

bats_require_minimum_version 1.5.0

@test "the cordon executable loads no shared library but libc at start-up" {
  command -v readelf >/dev/null || skip "readelf (binutils) is not installed"
  run readelf -dW "$CORDON"
  [ "$status" -eq 0 ]
  needed=$(printf '%s\n' "$output" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')
  echo "NEEDED: $needed"
  [ -n "$needed" ] # a dynamic executable: the check below reads something
  # A sanitizer build (the ASan+UBSan pass) links the sanitizers' runtimes, and libm for them:
  # those, and only those, are allowed there on top of libc.
  sanitized=""
  [[ " $needed" == *" libasan.so."* ]] && sanitized=1
  for lib in $needed; do
    case "$lib" in
      libc.so.*|ld-linux*) ;;
      libasan.so.*|libubsan.so.*|libm.so.*) [ -n "$sanitized" ] || { echo "start-up loads $lib"; false; } ;;
      *) echo "start-up loads $lib"; false ;;
    esac
  done
}

@test "the cordon executable has at most 4 KiB of thread-local storage" {
  command -v readelf >/dev/null || skip "readelf (binutils) is not installed"
  run readelf -lW "$CORDON"
  [ "$status" -eq 0 ]
  [[ "$output" == *LOAD* ]]
  tls=$(printf '%s\n' "$output" | awk '$1 == "TLS" { print $6 }')
  echo "TLS memory size: ${tls:-none}"
  [ $((${tls:-0})) -le 4096 ]
}
