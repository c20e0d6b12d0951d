#!/bin/bash
# Peer measurement on the virtual board: the same frames from the same vimc configuration
# (viewfinder 636x480 RGB888) through `shutterbug stream` and libcamera's own `cam`, alternated,
# ROUNDS times each in one boot. A benchmark, not a test: emulated-CPU timing is not a Pi's, so
# read the ratios, not the absolute figures.
#
# Steady-state CPU per frame: each program's process-wide CPU time (all threads, from
# /proc/PID/stat) is read when its output reaches frame SKIP and again at frame FRAMES - SKIP,
# while it runs, so start-up (dynamic loading takes seconds under emulation and varies by as
# much as the whole measurement) stays out of the figure. The figure is the CPU those frames
# took divided by their count.
#
# The emulated board's speed wanders by as much as 30% between one program run and the next, so
# one run of this script alternates the two programs ROUNDS times and its figure is the ratio of
# the two medians; each round's figures are printed too.
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
	exec "$here/run.sh" --timeout 1800 -- bash "$here/bench-cam.sh" "$frames" "$rounds"
fi

build=${SHUTTERBUG_BUILD_DIR:-.build/release}
[ -x "$build/shutterbug" ] || build=.build/debug
skip=$((frames / 10))
last=$((frames - skip))
tck=$(getconf CLK_TCK)

ticks() { # utime + stime of a process, all threads
	awk '{ print $14 + $15 }' "/proc/$1/stat"
}

gone() { # PID NAME OUTPUT: exits with the program's status and output if it has ended
	kill -0 "$1" 2>/dev/null && return 0
	wait "$1"; local rc=$?
	echo "bench-cam.sh: $2 ended (status $rc) before frame $last; its output:" >&2
	tail -5 "$3" >&2
	exit 1
}

# steady PATTERN COMMAND...: prints "frames ticks" over frames skip..last of COMMAND's output,
# counting output lines that match PATTERN (one per frame).
steady() {
	local pattern=$1 out pid n t1 n1 t2 n2
	shift
	out=$(mktemp)
	"$@" >"$out" 2>/dev/null &
	pid=$!
	n=0
	# A program that exits before the window (no camera, a crash) fails the run, not hangs it.
	while [ "$n" -lt "$skip" ]; do gone "$pid" "$1" "$out"; sleep 0.02; n=$(grep -c -- "$pattern" "$out" || true); done
	t1=$(ticks "$pid"); n1=$(grep -c -- "$pattern" "$out" || true)
	while [ "$n" -lt "$last" ]; do gone "$pid" "$1" "$out"; sleep 0.02; n=$(grep -c -- "$pattern" "$out" || true); done
	t2=$(ticks "$pid"); n2=$(grep -c -- "$pattern" "$out" || true)
	wait "$pid"
	rm -f "$out"
	echo "$((n2 - n1)) $((t2 - t1))"
}

# The programs themselves (not shell functions; stdbuf execs), so $! is the process measured.
cam_run=(cam -c 1 --capture="$frames" -s role=viewfinder,width=636,height=480,pixelformat=BGR888)
# cam ends each line with std::endl (a write per frame); shutterbug's stdio buffers a file in
# 4 KiB blocks, so its count of lines would lag the CPU reading by up to ~50 frames: line
# buffering makes both write, and count, each frame as it happens.
sb_run=(stdbuf -oL "$build/shutterbug" stream --frames "$frames" --size 636x480)
# cam prints one line per frame with "seq:", shutterbug one starting with "#".
cam_line='seq:'
sb_line='^#'

echo "bench vs cam: vimc viewfinder 636x480 BGR888, $frames frames per run, CPU per frame over frames $skip to $last, shutterbug from $build"
cams=() sbs=()
for r in $(seq 1 "$rounds"); do
	read -r cn ct <<<"$(steady "$cam_line" "${cam_run[@]}")"
	[ -n "${ct:-}" ] || exit 1
	read -r sn st <<<"$(steady "$sb_line" "${sb_run[@]}")"
	[ -n "${st:-}" ] || exit 1
	c=$(awk -v n="$cn" -v t="$ct" -v tck="$tck" 'BEGIN { printf "%.3f", t / tck / n * 1000 }')
	s=$(awk -v n="$sn" -v t="$st" -v tck="$tck" 'BEGIN { printf "%.3f", t / tck / n * 1000 }')
	cams+=("$c") sbs+=("$s")
	awk -v r="$r" -v c="$c" -v s="$s" -v cn="$cn" -v sn="$sn" 'BEGIN {
		printf "  round %d: cam %.3f ms/frame (%d frames), shutterbug %.3f ms/frame (%d frames), ratio %.2f\n", r, c, cn, s, sn, s / c
	}'
done
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
mc=$(median "${cams[@]}") ms=$(median "${sbs[@]}")
awk -v c="$mc" -v s="$ms" -v r="$rounds" 'BEGIN {
	printf "median of %d rounds: cam %.3f ms/frame, shutterbug %.3f ms/frame, ratio shutterbug/cam %.2f\n", r, c, s, s / c
}'
