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
	{ time "$@" >/dev/null 2>&1; } 2>&1 | tail -1
}
# One warm-up each so both start with the libraries in the page cache.
measure cam -c 1 --capture=5 -s role=viewfinder,width=636,height=480,pixelformat=RGB888 >/dev/null
measure "$build/shutterbug" stream --frames 5 --size 636x480 >/dev/null
read -r cw cu cs < <(measure cam -c 1 --capture="$frames" -s role=viewfinder,width=636,height=480,pixelformat=RGB888)
read -r sw su ss < <(measure "$build/shutterbug" stream --frames "$frames" --size 636x480)
awk -v n="$frames" -v cw="$cw" -v cu="$cu" -v cs="$cs" -v sw="$sw" -v su="$su" -v ss="$ss" -v b="$build" 'BEGIN {
	ccpu = (cu + cs) / n * 1000; scpu = (su + ss) / n * 1000
	printf "bench vs cam: %d frames, vimc viewfinder 636x480 RGB888, shutterbug from %s\n", n, b
	printf "  %-12s CPU %.3f ms/frame  wall %.2f s\n", "cam", ccpu, cw
	printf "  %-12s CPU %.3f ms/frame  wall %.2f s\n", "shutterbug", scpu, sw
	printf "  ratio shutterbug/cam: CPU %.2f, wall %.2f\n", scpu / ccpu, sw / cw
}'
