#!/usr/bin/env bash
# Compile-checks the libcamera bridge with -Wall -Wextra -Werror against each libcamera a Pi runs,
# so an API change there breaks CI here rather than a build on a Pi:
#   system   the machine's own (Debian 12's 0.0.3, which the unit tier also builds and links)
#   trixie   Debian 13's 0.4
#   sid      Debian unstable's 0.7.x (string controls are std::string_view from 0.6)
# Another suite's headers are fetched once into the cache (fetch-libcamera-headers.sh).
#
# usage: Cross/check-libcamera.sh [SUITE...]   (default: system trixie sid)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
suites=("$@")
[ ${#suites[@]} -gt 0 ] || suites=(system trixie sid)
for suite in "${suites[@]}"; do
	if [ "$suite" = system ]; then
		inc=$(pkg-config --variable=includedir libcamera)/libcamera
	else
		inc=$("$here/fetch-libcamera-headers.sh" "$suite")
	fi
	version=$(sed -n 's/#define LIBCAMERA_VERSION_\(MAJOR\|MINOR\|PATCH\)[[:space:]]*\([0-9]*\)/\2/p' "$inc/libcamera/version.h" | paste -sd.)
	g++ -std=c++17 -Wall -Wextra -Werror -fsyntax-only \
		-I "$root/Sources/C/CLibcameraBridge/include" -I "$inc" \
		"$root/Sources/C/CLibcameraBridge/bridge.cpp"
	echo "bridge compiles against libcamera $version ($suite)"
done
