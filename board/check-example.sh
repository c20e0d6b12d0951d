#!/usr/bin/env bash
# Builds and runs Examples/BracketExample, a package that depends on Shutterbug through its git
# URL (file://, which SwiftPM treats as a remote dependency: it refuses unsafe build flags in the
# products used), and takes a bracket on the simulated camera with the library's API. What it
# builds is the committed state of SHUTTERBUG_GIT_REF (default: main), as another package would
# see it.
#
# usage: board/check-example.sh
set -euo pipefail
cd "$(dirname "$0")/../Examples/BracketExample"
swift build 2>&1 | tail -n 3
out=$(timeout 300 swift run --skip-build BracketExample)
echo "$out"
[ "$(grep -c '^step ' <<<"$out")" -eq 3 ] || { echo "check-example: expected 3 photos from the example"; exit 1; }
echo "check-example: Shutterbug's libraries build and run as another package's dependency"
