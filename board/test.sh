#!/usr/bin/env bash
# The test command (README, .ci/run): every tier, in order, each reported; exits non-zero if any
# tier failed. Installs what it needs first.
#
#   unit           the C shims under -Wall -Wextra -Werror (board/check-c.sh); swift build
#                  --build-tests, swift test: core, simulated camera, CLI, and the libcamera
#                  backend against Debian 12's libcamera 0.0.3 (no camera: it says so); then
#                  Examples/BracketExample, a package using Shutterbug through its git URL
#                  (board/check-example.sh)
#   api            `shutterbug serve` fuzzed against docs/openapi.yaml with schemathesis: no
#                  5xx, every response as documented; SIGTERM exits 0. Then the service under
#                  load (shutterbug-bench serve-load, 30 s idle and 30 s loaded): no slot of its
#                  timelapse missed, brackets on consecutive frames as when idle
#   libcamera      the bridge compiled with -Werror against 0.0.3 (the machine's), Debian 13's
#                  0.4, Debian unstable's 0.7.x, and the Raspberry Pi fork's 0.7.1+rpt (what
#                  Raspberry Pi OS trixie ships) and `next` (built once from ../shared/vendor)
#   virtual-board  a qemu VM with vimc, vkms and gpio-sim: the libcamera conformance suite on
#                  vimc, the KMS and GPIO tests, the CLI on a camera without exposure controls;
#                  the conformance suite and the CLI again against the Raspberry Pi fork
#                  (the kernel is built once, about 6 minutes, and cached)
#   cross          Cross/test-cross.sh: shutterbug for aarch64 with Debian unstable's Swift 6.2.3
#                  against a Debian 13 arm64 sysroot (glibc 2.41; the chroot and sysroot made
#                  once and cached), no symbol newer than trixie's, a seeded bracket under qemu
#                  whose metadata equals the x86 build's, both Debian packages (Depends from
#                  dpkg-shlibdeps) checked by lintian, the arm64 one installed with apt into a
#                  Debian 13 arm64 root with backports (the Raspberry Pi OS stand-in) and the
#                  amd64 one into Debian 12, each used there, upgraded over and purged
set -uo pipefail
cd "$(dirname "$0")/.."
# The simulated camera's pixels optimised in the debug builds the tests use (Package.swift).
export SHUTTERBUG_OPTIMIZED_SIMULATOR=1

# The budget (README): each tier's share of 40 minutes on 2 cores with the caches warm (the
# kernel, chroots and libcamera builds made once; the Swift builds are always cold in a fresh
# clone). A tier over its share is said in the summary; the run fails when the whole is over
# 55 minutes (the cold budget: caches made on a new machine).
declare -A share=([unit]=620 [api]=140 [libcamera]=30 [virtual-board]=670 [cross]=940)
whole_budget=3300
began=$SECONDS

board/setup-host.sh --board || { echo "setup-host failed"; exit 1; }

passed=0
failed=0
failed_names=()
# Each tier's output is kept, so that the end of the log (all a CI summary may show) says what
# failed in a failed tier, not only that it did.
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
summary=()
run_tier() {
	local name=$1
	shift
	echo "=== tier $name"
	local start=$SECONDS
	local ok=0 out tee_pid waited=0
	exec {out}> >(tee "$logs/$name.log")
	tee_pid=$!
	"$@" >&"$out" 2>&1 {out}>&- && ok=1
	exec {out}>&-
	# The tee's last lines are out before the verdict line. A process the tier left running with
	# its output open keeps the tee alive: that is said, and not waited on for more than 30 s.
	while kill -0 "$tee_pid" 2>/dev/null && [ "$waited" -lt 300 ]; do
		sleep 0.1
		waited=$((waited + 1))
	done
	kill -0 "$tee_pid" 2>/dev/null && echo "=== tier $name left a process with its output open (its log may go on past this line)"
	local took=$((SECONDS - start)) budget=""
	if [ "$took" -gt "${share[$name]:-0}" ]; then
		budget=", OVER its share of ${share[$name]:-0} s"
	else
		budget=" of its ${share[$name]:-0} s"
	fi
	if [ "$ok" = 1 ]; then
		passed=$((passed + 1))
		summary+=("$name passed ($took s$budget)")
		echo "=== tier $name passed ($((SECONDS - start)) s)"
	else
		failed=$((failed + 1))
		failed_names+=("$name")
		summary+=("$name FAILED ($took s$budget)")
		echo "=== tier $name FAILED ($((SECONDS - start)) s)"
	fi
}

# Our own targets' warnings are errors here (Package.swift), so a clean build stays free of them.
unit() {
	board/check-c.sh && SHUTTERBUG_WARNINGS_AS_ERRORS=1 swift build --build-tests && board/swift-test.sh 1200 && board/check-example.sh
}

run_tier unit unit
api() {
	board/fuzz-api.sh && board/check-page.sh && "${SHUTTERBUG_BUILD_DIR:-.build/debug}/shutterbug-bench" serve-load --seconds 30
}

run_tier api api
run_tier libcamera Cross/check-libcamera.sh system trixie sid rpt next
# The board runs everything twice over: against Debian 12's libcamera and against the Raspberry
# Pi fork (built by the libcamera tier), for which the bridge and tests are built here first.
board() {
	local prefix pc t=$SECONDS
	prefix=$(Cross/build-libcamera-fork.sh rpt) && pc=$(Cross/fork-pkg-config.sh) &&
		echo "--- virtual-board: the fork's libcamera in $((SECONDS - t)) s" && t=$SECONDS &&
		PKG_CONFIG_PATH=$pc swift build --build-tests --scratch-path .build-fork &&
		echo "--- virtual-board: the build against it in $((SECONDS - t)) s" && t=$SECONDS &&
		board/virtual/run.sh --timeout 1200 -- env SHUTTERBUG_FORK_PREFIX="$prefix" bash board/virtual/tier.sh &&
		echo "--- virtual-board: the board (its kernel cached) in $((SECONDS - t)) s"
}
run_tier virtual-board board
run_tier cross Cross/test-cross.sh

for name in "${failed_names[@]}"; do
	echo "=== what failed in tier $name (the lines that say so, then its last 25 lines)"
	# swift-testing's failures (✘), the unit tier's hang report (board/swift-test.sh: the tests
	# left running and where its threads were, without the full stacks), the scripts' errors.
	sed '/^swift-test: every thread/,$d' "$logs/$name.log" |
		grep -E '✘|FAIL|error:|[Tt]imed out|^swift-test:|^    [A-Za-z]|^[a-z-]+: .*failed' |
		grep -v 'Compiling\|warning:\|Setting up' | head -80
	echo "--- the end of tier $name"
	sed '/^swift-test: every thread/,$d' "$logs/$name.log" | tail -25
done
printf '=== %s\n' "${summary[@]}"
whole=$((SECONDS - began))
over=0
if [ "$whole" -gt "$whole_budget" ]; then
	echo "=== budget: the whole run took $whole s, OVER its $whole_budget s: make the slow tier fast (its slowest tests and steps are printed above)"
	over=1
else
	echo "=== budget: the whole run took $whole s of $whole_budget s (40 minutes warm, 55 cold)"
fi
echo "tiers: $passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$over" -eq 0 ]
