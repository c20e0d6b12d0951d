#!/bin/bash
# Peer measurement on the virtual board: the same N frames from the same vimc configuration
# (viewfinder 636x480 RGB888) through `shutterbug stream` and libcamera's own `cam`, one after
# the other in one boot; prints CPU time per frame, wall time, and the ratios. A benchmark, not
# a test: emulated-CPU timing is not a Pi's, so read the ratio, not the absolute figures.
#
# usage: board/virtual/bench-cam.sh [FRAMES]   (boots the board; default 200 frames)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
frames=${1:-200}
if [ "${SHUTTERBUG_BOARD:-}" != virtual ]; then
	exec "$here/run.sh" --timeout 900 -- bash "$here/bench-cam.sh" "$frames"
fi

build=${SHUTTERBUG_BUILD_DIR:-.build/release}
[ -x "$build/shutterbug" ] || build=.build/debug
TIMEFORMAT='%R %U %S'
measure() { # prints "wall user sys" of the command, discarding its output
	local t
	t=$({ time "$@" >/dev/null 2>&1; } 2>&1)
	echo "${t##*$'\n'}"
}
cam_run() { cam -c 1 --capture="$1" -s role=viewfinder,width=636,height=480,pixelformat=BGR888; }
sb_run() { "$build/shutterbug" stream --frames "$1" --size 636x480; }
# One warm-up each so both start with the libraries in the page cache.
measure cam_run 5 >/dev/null
measure sb_run 5 >/dev/null
# Two lengths each: the difference is the per-frame cost without start-up (a dynamically linked
# program takes about a second to start under emulation, which would swamp a short run).
short=$((frames / 5))
read -r cw1 cu1 cs1 <<<"$(measure cam_run "$short")"
read -r cw cu cs <<<"$(measure cam_run "$frames")"
read -r sw1 su1 ss1 <<<"$(measure sb_run "$short")"
read -r sw su ss <<<"$(measure sb_run "$frames")"
awk -v n="$frames" -v m="$short" -v b="$build" \
	-v cw="$cw" -v cc="$(echo "$cu + $cs" | bc)" -v cw1="$cw1" -v cc1="$(echo "$cu1 + $cs1" | bc)" \
	-v sw="$sw" -v sc="$(echo "$su + $ss" | bc)" -v sw1="$sw1" -v sc1="$(echo "$su1 + $ss1" | bc)" 'BEGIN {
	cper = (cc - cc1) / (n - m) * 1000; sper = (sc - sc1) / (n - m) * 1000
	printf "bench vs cam: vimc viewfinder 636x480 BGR888, %d and %d frames each, shutterbug from %s\n", m, n, b
	printf "  %-11s CPU per frame %.3f ms (marginal)  CPU %.2f s and wall %.2f s for %d frames\n", "cam", cper, cc, cw, n
	printf "  %-11s CPU per frame %.3f ms (marginal)  CPU %.2f s and wall %.2f s for %d frames\n", "shutterbug", sper, sc, sw, n
	printf "  ratio shutterbug/cam: CPU per frame %.2f, CPU %.2f, wall %.2f\n", sper / cper, sc / cc, sw / cw
}'
