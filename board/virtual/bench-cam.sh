#!/bin/bash
# Peer measurement on the virtual board: the same frames from the same vimc configuration
# (viewfinder 636x480 RGB888) through `shutterbug stream` and libcamera's own `cam`, alternated,
# ROUNDS times each in one boot. A benchmark, not a test: emulated-CPU timing is not a Pi's, so
# read the ratios, not the absolute figures.
#
# Steady-state CPU per frame: each program's CPU time (all threads: the kernel's thread-group
# CPU clock, in nanoseconds) is read when its output reaches frame SKIP and again at frame
# FRAMES - SKIP, while it runs, so start-up (dynamic loading takes seconds under emulation and
# varies by as much as the whole measurement) stays out of the figure. The figure is the CPU
# those frames took divided by their count. bench-cam.py does the measuring: it reads the
# programs' output from a pipe and starts nothing while they run.
#
# The emulated board's speed wanders between one program run and the next, so one run of this
# script alternates the two programs ROUNDS times and its figure is the ratio of the two
# medians; each round's figures are printed too.
#
# usage: board/virtual/bench-cam.sh [FRAMES] [ROUNDS]   (boots the board; default 600 frames, 5 rounds)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
frames=${1:-600}
rounds=${2:-5}
case "$frames$rounds" in *[!0-9]*) echo "usage: $0 [FRAMES 20...100000] [ROUNDS 1...99]" >&2; exit 2 ;; esac
if [ "$frames" -lt 20 ] || [ "$frames" -gt 100000 ] || [ "$rounds" -lt 1 ] || [ "$rounds" -gt 99 ]; then
	echo "bench-cam.sh: FRAMES must be in 20...100000 and ROUNDS in 1...99, not $frames and $rounds" >&2
	exit 2
fi
if [ "${SHUTTERBUG_BOARD:-}" != virtual ]; then
	# idle=poll: an emulated CPU with nothing to run spins rather than halts. A halted vCPU
	# woken for a frame charges its wake-up to whatever thread it then runs: measured quietly,
	# cam's own figure came out 5 ms/frame, and 1 ms/frame beside a busy shell loop; polling,
	# 1.4-1.6 ms/frame either way (one boot, alternated). The figure is then the programs' work.
	export SHUTTERBUG_BOARD_CMDLINE="idle=poll${SHUTTERBUG_BOARD_CMDLINE:+ $SHUTTERBUG_BOARD_CMDLINE}"
	exec "$here/run.sh" --timeout 1800 -- bash "$here/bench-cam.sh" "$frames" "$rounds"
fi

build=${SHUTTERBUG_BUILD_DIR:-.build/release}
[ -x "$build/shutterbug" ] || build=.build/debug
exec python3 "$here/bench-cam.py" "$frames" "$rounds" "$build"
