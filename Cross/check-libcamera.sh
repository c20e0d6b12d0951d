#!/usr/bin/env bash
# Compile-checks the libcamera bridge against another libcamera's headers (by default Debian 13's
# 0.4), so an API change there breaks CI here rather than a build on a Pi.
#
# usage: Cross/check-libcamera.sh [SUITE...]   (default: trixie)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
suites=("$@")
[ ${#suites[@]} -gt 0 ] || suites=(trixie)
for suite in "${suites[@]}"; do
	inc=$("$here/fetch-libcamera-headers.sh" "$suite")
	version=$(sed -n 's/#define LIBCAMERA_VERSION_\(MAJOR\|MINOR\|PATCH\)[[:space:]]*\([0-9]*\)/\2/p' "$inc/libcamera/version.h" | paste -sd.)
	g++ -std=c++17 -Wall -Wextra -Werror -fsyntax-only \
		-I "$root/Sources/C/CLibcameraBridge/include" -I "$inc" \
		"$root/Sources/C/CLibcameraBridge/bridge.cpp"
	echo "bridge compiles against libcamera $version ($suite)"
done
