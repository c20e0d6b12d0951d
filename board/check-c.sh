#!/usr/bin/env bash
# Compile-checks the C shims with -Wall -Wextra -Werror. Package.swift gives its library targets
# no compiler flags (SwiftPM refuses unsafe flags in a package used as a dependency, and another
# package must be able to use Shutterbug's libraries), so the warnings are enforced here, in the
# unit tier, instead. The C++ bridge is checked the same way against every libcamera by
# Cross/check-libcamera.sh.
#
# usage: board/check-c.sh
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
for f in Sources/C/*/*.c; do
	dir=$(dirname "$f")
	extra=()
	# The codecs implement callbacks whose signatures libtiff and libjpeg fix.
	[ "$(basename "$dir")" = CImageCodecs ] && extra=(-Wno-unused-parameter)
	if gcc -std=gnu11 -Wall -Wextra -Werror "${extra[@]}" -fsyntax-only -I "$dir/include" -I Sources/C/CRawCodecs/include "$f"; then
		echo "check-c: $f compiles without warnings"
	else
		echo "check-c: $f has warnings (above)"
		status=1
	fi
done
exit $status
