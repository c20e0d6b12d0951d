#!/bin/bash
# Peer measurement on the virtual board: the same frames from the same vimc configuration
# (viewfinder 636x480 RGB888) through `shutterbug stream` and libcamera's own `cam`, alternated,
# ROUNDS times each in one boot. A benchmark, not a test: emulated-CPU timing is not a Pi's, so
# read the ratios, not the absolute figures.
#
# Steady-state CPU per frame: each program's CPU time (all threads: the kernel's thread-group
# CPU clock) is read when its output reaches frame SKIP and again at frame FRAMES - SKIP, while
# it runs, so start-up (dynamic loading) stays out of the figure. The figure is the CPU those
# frames took divided by their count; bench-cam.py does the measuring (it reads the programs'
# output from a pipe and starts nothing while they run) and also prints where each program's
# CPU went, thread by thread.
#
# The board runs here with one CPU and qemu's -icount shift=0: the emulated CPU's clock is its
# instruction count (one instruction, one nanosecond), so a thread's CPU time is the
# instructions it executed, user and kernel, whatever the host is doing. Timed by the host's
# clock instead (the board's usual mode), the same program's figure wandered by 2x from one
# round to the next (board/virtual/README.md, "Measuring CPU on an emulated CPU"): too coarse
# to compare two programs a few per cent apart. Each run still alternates the two programs
# ROUNDS times and its figure is the ratio of the two medians.
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
	# One vCPU (qemu's instruction counting runs the vCPUs on one host thread; the guest does
	# not bring up a second under it) whose clock is its instruction count; idle, it halts and
	# the clock skips ahead to the next timer (sleep=on), which charges no thread.
	# Counting instructions is TCG's (KVM runs the host's CPU).
	export SHUTTERBUG_BOARD_ACCEL=tcg
	export SHUTTERBUG_BOARD_CPUS=1
	export SHUTTERBUG_BOARD_QEMU="-icount shift=0,sleep=on${SHUTTERBUG_BOARD_QEMU:+ $SHUTTERBUG_BOARD_QEMU}"
	exec "$here/run.sh" --timeout 1800 -- env SHUTTERBUG_BENCH_CLOCK=instructions bash "$here/bench-cam.sh" "$frames" "$rounds"
fi

build=${SHUTTERBUG_BUILD_DIR:-.build/release}
[ -x "$build/shutterbug" ] || build=.build/debug
exec python3 "$here/bench-cam.py" "$frames" "$rounds" "$build"
