#!/usr/bin/env bash
# Builds and runs Examples/BracketExample, a package that depends on Shutterbug through its git
# URL and takes a bracket on the simulated camera with the library's API. The dependency is on a
# version, as a released library is used: SwiftPM refuses unsafe build flags in the products of
# such a dependency (a branch or revision dependency may use them), so a library target with
# compiler flags fails here. The version is a tag (the release's, from Version.swift) in a bare
# clone of what is committed, made in a temporary folder.
#
# usage: board/check-example.sh
set -euo pipefail
# As another package builds it: without this repository's opt-ins (Package.swift).
unset SHUTTERBUG_OPTIMIZED_SIMULATOR
root=$(cd "$(dirname "$0")/.." && pwd)
version=$(sed -n 's/.*static let number = "\(.*\)"/\1/p' "$root/Sources/Commands/shutterbug/Version.swift")
[ -n "$version" ] || { echo "check-example: no version in Version.swift"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git clone --quiet --bare "$root" "$tmp/Shutterbug.git"
git -C "$tmp/Shutterbug.git" tag "$version" HEAD
export SHUTTERBUG_GIT_URL="file://$tmp/Shutterbug.git" SHUTTERBUG_GIT_VERSION="$version"
cd "$root/Examples/BracketExample"
# A new clone each run: forget the previous one's resolution.
rm -f Package.resolved
swift build 2>&1 | tail -n 3
out=$(timeout 300 swift run --skip-build BracketExample)
echo "$out"
[ "$(grep -c '^step ' <<<"$out")" -eq 3 ] || { echo "check-example: expected 3 photos from the example"; exit 1; }
echo "check-example: Shutterbug's libraries build and run as another package's dependency"
