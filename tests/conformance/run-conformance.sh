#!/bin/sh
# Run `cordon conformance BACKEND` in a scratch project, so each run starts clean.
# usage: run-conformance.sh CORDON BACKEND
set -eu
cordon=$1
backend=$2
project=$(mktemp -d "${TMPDIR:-/tmp}/cordon-conformance.XXXXXX")
trap 'rm -rf "$project"' EXIT
CORDON_PROJECT=$project "$cordon" conformance "$backend"
