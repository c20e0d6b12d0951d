#!/usr/bin/env bash
# Runs the built tests (`swift test --skip-build`, extra arguments passed on) under a deadline.
# A hang must leave its cause in the log, not a bare timeout: when the deadline passes this
# prints the tests that started and never ended, where the test process's threads are in the
# project's code, and then every thread's whole stack (gdb); then it stops the run and exits 124.
#
# usage: board/swift-test.sh SECONDS [swift test arguments...]
set -uo pipefail
deadline=${1:?usage: board/swift-test.sh SECONDS [swift test arguments...]}
shift
here=$(cd "$(dirname "$0")" && pwd)
log=$(mktemp)
stacks=$(mktemp)
trap 'rm -f "$log" "$stacks"' EXIT

# At most 8 tests at once. swift-testing otherwise starts every test together: on two busy cores
# some 75 shared the cooperative pool's two threads, a test's time went to the others' frames,
# and real-time tests saw their cameras stall (stress-ng --cpu 2 beside the suite: 6 failures in
# 251 s unbounded, none in 197 s with 8).
export SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH=${SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH:-8}

# Its own session, so that the whole run (swift test puts the test process in a group of its
# own) can be found and stopped at once.
setsid swift test --skip-build "$@" > >(tee "$log") 2>&1 &
pid=$!
start=$SECONDS
while kill -0 "$pid" 2> /dev/null; do
	if [ $((SECONDS - start)) -ge "$deadline" ]; then
		echo "swift-test: still running after ${deadline} s"
		python3 "$here/swift-test-report.py" unfinished "$log"
		for test_pid in $(pgrep -s "$pid" -f 'xctest|PackageTests'); do
			if command -v gdb > /dev/null; then
				timeout 120 gdb -batch -nx -p "$test_pid" -ex "thread apply all bt 40" 2>&1 |
					swift demangle --simplified > "$stacks"
			else
				echo "(gdb is not installed: no stacks)" > "$stacks"
			fi
			echo "swift-test: where the threads of process $test_pid are in the project's code:"
			python3 "$here/swift-test-report.py" stacks "$stacks"
			echo "swift-test: every thread's stack:"
			grep -E '^(Thread|#)' "$stacks" | cut -c1-240
		done
		pkill -TERM -s "$pid"
		sleep 2
		pkill -KILL -s "$pid"
		wait "$pid" 2> /dev/null
		exit 124
	fi
	sleep 1
done
wait "$pid"
status=$?
# Where the time went, at the end of every run (passed or not).
python3 "$here/swift-test-report.py" durations "$log" 30
exit $status
