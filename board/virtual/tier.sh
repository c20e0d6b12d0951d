#!/bin/bash
# Runs inside the virtual board (board/virtual/run.sh board/virtual/tier.sh): the libcamera
# conformance suite against vimc, the vkms (writeback, preview) and gpio-sim tests, the CLI on
# vimc, and the preview of the simulated camera on vkms; then the conformance suite and the CLI
# on vimc again against the Raspberry Pi fork of libcamera (.build-fork).
set -u
build=${SHUTTERBUG_BUILD_DIR:-.build/debug}
failed=0
step() {
	local start=$SECONDS
	echo "--- board: $*"
	"$@" || { echo "--- board: FAILED: $*"; failed=1; }
	# Where the tier's time goes: the steps that take a while say how long.
	[ $((SECONDS - start)) -lt 3 ] || echo "--- board: done in $((SECONDS - start)) s"
}

# udevd, so libcamera hears of a camera that goes away and comes back (vimc unbound and bound
# again); the init's own udev database entries only cover the devices present at boot.
if [ -x /lib/systemd/systemd-udevd ]; then
	/lib/systemd/systemd-udevd --daemon
	udevadm trigger --action=add
	udevadm settle --timeout=30
fi
echo "--- board: $(uname -r), cameras: $(ls /dev/media* 2>/dev/null | wc -l) media devices, $(ls /dev/dri/card* 2>/dev/null | wc -l) DRM cards, $(ls /dev/gpiochip* 2>/dev/null | wc -l) GPIO chips"
step "$build/ShutterbugPackageTests.xctest" --testing-library swift-testing --filter 'LibcameraBackendTests|BoardTests'

# The CLI on a camera without exposure controls must say so, and still stream.
out=$("$build/shutterbug" stream --frames 5 --exposure 1/250 --gain 2 --size 636x480 2>&1)
echo "$out"
step grep -q "does not support .*ExposureTime.*AnalogueGain" <<<"$out"
step grep -q "^5 frames" <<<"$out"
# Brackets and focus run the same capture path on libcamera; vimc has no exposure or lens
# controls, and they must say so rather than fail obscurely.
out=$("$build/shutterbug" bracket --ev -1,0,1 --role viewfinder 2>&1); rc=$?
echo "$out"
step test "$rc" -ne 0
step grep -q "does not support ExposureTime and AnalogueGain" <<<"$out"
out=$("$build/shutterbug" focus --lens 1 2>&1); rc=$?
echo "$out"
step test "$rc" -ne 0
step grep -q "no focus motor" <<<"$out"
# doctor on a board with a camera (vimc): it finds it, names the libcamera it loaded and its
# IPA modules, and the cameras check is ok.
"$build/shutterbug" doctor
out=$("$build/shutterbug" doctor --json)
echo "$out"
step python3 -c 'import json, sys; d = json.loads(sys.argv[1]); c = {x["name"]: x for x in d["checks"]}; assert d["cameras"], d; assert c["cameras"]["status"] == "ok", c["cameras"]; assert c["ipa"]["status"] == "ok", c["ipa"]; assert "vimc" in c["ipa"]["summary"], c["ipa"]' "$out"
# The preview on vkms's display, from the simulated camera's dmabufs with no copy.
out=$("$build/shutterbug" preview --camera sim:imx477 --duration 8 --json 2>&1)
echo "$out"
step grep -q '"path":"zero-copy"' <<<"$out"
step grep -q '"shown":[1-9]' <<<"$out"
# The preview benchmark, tiny (it needs a display device, so it runs here and not in the unit
# tier's benchmark smoke tests): it completes and its JSON has its figures. At this size, in a
# debug build under emulation, it may show no frame in its second: only that it runs is checked.
out=$(timeout -k 5 120 "$build/shutterbug-bench" preview --seconds 1 --rounds 1 --json 2>&1)
echo "$out" | tail -3
step python3 -c 'import json, sys; d = json.loads(sys.argv[1].strip().splitlines()[-1]); assert all(k in d for k in ("framesShownZeroCopy", "zeroCopyCpuUsPerFrame", "bracketTimeOnOverOff")), d' "$out"
# A GPIO shutter: gpio-sim's "shutter" line pulled up three times fires three captures, each
# from a frame exposed after its edge.
# Line 1 of the same chip is the busy line, held while each capture runs.
pull=$(ls /sys/devices/platform/gpio-sim.*/gpiochip*/sim_gpio0/pull | head -1)
chip=$(basename "$(dirname "$(dirname "$pull")")")
echo pull-down > "$pull"
"$build/shutterbug" trigger --camera sim:imx477 --role video --gpio shutter --edge rising --count 3 --busy-line "$chip:1" --json >/tmp/trigger.out 2>/tmp/trigger.err &
pid=$!
for _ in $(seq 1 300); do grep -q "waiting for rising edges" /tmp/trigger.err && break; sleep 0.1; done
# Each press once the previous one is reported: gpio-sim raises its edge interrupts from an
# irq_work that merges edges pulled faster than it runs (three presses in a few microseconds
# of shell builtins once came out as two), which is gpio-sim's limit, not a shutter's.
for n in 1 2 3; do
	echo pull-up > "$pull"; echo pull-down > "$pull"
	for _ in $(seq 1 300); do grep -Eq "\"trigger\":$n[,}]" /tmp/trigger.out && break; sleep 0.1; done
done
timeout 60 tail --pid=$pid -f /dev/null
cat /tmp/trigger.err /tmp/trigger.out
step grep -q '"captured":3' /tmp/trigger.out
step test "$(grep -c '"lagToExposureStartUs":[0-9]' /tmp/trigger.out)" -eq 3
step test "$(grep -c '"busyUs":[0-9]' /tmp/trigger.out)" -eq 3
step test "$(cat "$(dirname "$pull")/../sim_gpio1/value")" = 0
# The Global Shutter camera in external-trigger mode: the edge starts the exposure itself.
echo pull-down > "$pull"
"$build/shutterbug" trigger --camera sim:imx296 --external-trigger --pulse-width 2ms --gpio shutter --edge rising --count 2 --json >/tmp/trigger.out 2>/tmp/trigger.err &
pid=$!
for _ in $(seq 1 300); do grep -q "waiting for rising edges" /tmp/trigger.err && break; sleep 0.1; done
# The sensor ignores a pulse during the previous frame's readout: presses a human apart. A
# pulse's frame nobody has asked for yet is kept only until the next pulse's replaces it (then
# its capture fails as late), so a second apart leaves a busy machine a second to ask.
for _ in 1 2; do echo pull-up > "$pull"; echo pull-down > "$pull"; sleep 1; done
timeout 60 tail --pid=$pid -f /dev/null
cat /tmp/trigger.err /tmp/trigger.out
step grep -q '"captured":2' /tmp/trigger.out
step test "$(grep -c '"lagToExposureStartUs":0,' /tmp/trigger.out)" -eq 2
# The service with a GPIO trigger from its configuration: three presses, three captures, each
# counted at /api/triggers (read here through `shutterbug status`, the service's client).
echo pull-down > "$pull"
printf 'triggers:\n  - name: shutter\n    gpio: shutter\n    edge: rising\n' >/tmp/serve.yaml
"$build/shutterbug" serve --camera sim:imx477 --size 640x480 --listen 127.0.0.1:8080 --output /tmp/serve-out --config /tmp/serve.yaml 2>/tmp/serve.err &
pid=$!
for _ in $(seq 1 300); do grep -q "trigger 'shutter': listening" /tmp/serve.err && grep -q "serving " /tmp/serve.err && break; sleep 0.1; done
for _ in 1 2 3; do echo pull-up > "$pull"; echo pull-down > "$pull"; sleep 0.3; done
for _ in $(seq 1 100); do "$build/shutterbug" status --service http://127.0.0.1:8080/ --json | grep -q '"captured":3' && break; sleep 0.1; done
out=$("$build/shutterbug" status --service http://127.0.0.1:8080/ --json)
kill -TERM $pid
wait $pid
rc=$?
cat /tmp/serve.err
echo "$out"
step grep -q '"captured":3' <<<"$out"
step grep -q '"lagToExposureStart":{[^}]*"p50Us":[0-9]' <<<"$out"
step test "$rc" -eq 0
out=$("$build/shutterbug" cameras 2>&1)
echo "$out"
step grep -q "platform/vimc" <<<"$out"
# A trigger on vimc, which reports no exposure time: each capture is a frame whose readout began a
# frame after the instant (the earliest its exposure can have begun), its BGR888 written as JPEG.
out=$(timeout -k 5 120 "$build/shutterbug" trigger --role viewfinder --simulated regular:1s --count 2 --output /tmp/trg-vimc --json 2>&1)
echo "$out" | grep -v '^\[' | tail -2
step grep -q '"captured":2' <<<"$out"
step djpeg -outfile /dev/null "$(ls /tmp/trg-vimc/*/*.jpg | head -1)"

# The camera goes away while streaming (vimc unbound, as a cable pulled): the process says no frame came and
# ends with an error instead of hanging or aborting (libcamera 0.0.3's vimc handler never
# disconnects the camera, and stopping it then asserts in PipelineHandler::stop(); the bridge
# sees its media node gone and leaves it unstopped). Bound again, a new process streams from it:
# that is the way back for such a camera (a second registration of the same camera id in a
# running camera manager is fatal in libcamera), and what systemd's Restart= does for the
# service, which resumes its job from the journal.
vimc=$(basename "$(ls -d /sys/bus/platform/drivers/vimc/vimc.* | head -1)")
"$build/shutterbug" stream --frames 100000 --size 636x480 >/tmp/gone.out 2>&1 &
pid=$!
for _ in $(seq 1 300); do [ "$(grep -c '^ *#' /tmp/gone.out)" -ge 20 ] && break; sleep 0.1; done
echo "$vimc" >/sys/bus/platform/drivers/vimc/unbind
timeout 60 tail --pid=$pid -f /dev/null
wait $pid
rc=$?
grep -v "^ *#" /tmp/gone.out | grep -v "^\[" | tail -3
echo "stream after unbind: exit $rc"
step test "$rc" -ne 0
step test "$rc" -lt 128
step grep -q "nothing arrived for" /tmp/gone.out
echo "$vimc" >/sys/bus/platform/drivers/vimc/bind
udevadm settle --timeout=30 2>/dev/null
out=$("$build/shutterbug" stream --frames 5 --size 636x480 2>&1)
echo "$out" | tail -2
step grep -q "^5 frames" <<<"$out"

# A timelapse on vimc (no exposure control: a photo per slot at the camera's own exposure, its
# RGB written as JPEG) whose camera goes away mid-run: the slot is recorded as failed and the job
# exits 75 (what systemd's Restart= acts on); bound again, the same command resumes the job, the
# slots passed meanwhile recorded as missed, and runs it to its end.
tl=(timeout -k 5 300 "$build/shutterbug" timelapse --interval 3s --count 20 --size 636x480 --job vimc --output /tmp/tl-vimc --json)
"${tl[@]}" >/tmp/tl1.out 2>/tmp/tl1.err &
pid=$!
for _ in $(seq 1 900); do [ "$(grep -c '"state":"taken"' /tmp/tl1.out)" -ge 2 ] && break; kill -0 $pid 2>/dev/null || break; sleep 0.1; done
echo "$vimc" >/sys/bus/platform/drivers/vimc/unbind
wait $pid
rc=$?
# A crash (a signal's exit) shows its whole report, the Swift runtime's backtrace with it.
if [ "$rc" -ge 128 ]; then grep -v '^\[' /tmp/tl1.err | head -200; else grep -v '^\[' /tmp/tl1.err | tail -3; fi
echo "timelapse after unbind: exit $rc, $(grep -c '"state":"taken"' /tmp/tl1.out) slots taken before"
step test "$rc" -eq 75
step test "$(grep -c '"state":"taken"' /tmp/tl1.out)" -ge 2
step grep -q '"state":"failed"' /tmp/tl1.out
echo "$vimc" >/sys/bus/platform/drivers/vimc/bind
udevadm settle --timeout=30 2>/dev/null
"${tl[@]}" >/tmp/tl2.out 2>/tmp/tl2.err
rc=$?
grep -v '^\[' /tmp/tl2.err | tail -3
tail -1 /tmp/tl2.out
step test "$rc" -eq 0
step grep -q '"journalIntegrity":"ok"' /tmp/tl2.out
# Every one of the 20 slots is in the journal once: taken, failed or missed; some taken again
# after the camera came back.
step test "$(sqlite3 /tmp/tl-vimc/timelapse.sqlite "SELECT count(*), count(DISTINCT idx), min(idx), max(idx) FROM slots")" = "20|20|0|19"
step test "$(grep -c '"state":"taken"' /tmp/tl2.out)" -ge 2
step djpeg -outfile /dev/null "$(sqlite3 /tmp/tl-vimc/timelapse.sqlite "SELECT path FROM files WHERE path LIKE '%.jpg' ORDER BY rowid DESC LIMIT 1")"

# The same conformance suite and CLI checks against the Raspberry Pi fork of libcamera (what
# Raspberry Pi OS trixie ships, v0.7.1+rpt20260429, built once from ../shared/vendor with the
# vimc pipeline): the bridge compiled against its headers (the test command builds
# .build-fork with its pkg-config), the binaries run with its libraries.
# SHUTTERBUG_FORK_PREFIX is the fork's install prefix (Cross/build-libcamera-fork.sh rpt).
fork=${SHUTTERBUG_FORK_BUILD:-.build-fork/debug}
prefix=${SHUTTERBUG_FORK_PREFIX:-}
if [ -x "$fork/shutterbug" ] && [ -d "$prefix/lib" ]; then
	export LD_LIBRARY_PATH=$prefix/lib
	echo "--- board: the Raspberry Pi fork, $("$fork/shutterbug" --version) from $prefix"
	step "$fork/ShutterbugPackageTests.xctest" --testing-library swift-testing --filter 'LibcameraBackendTests'
	out=$("$fork/shutterbug" cameras 2>&1)
	echo "$out"
	step grep -q "libcamera 0.7.1 cameras" <<<"$out"
	step grep -q "platform/vimc" <<<"$out"
	out=$("$fork/shutterbug" stream --frames 5 --exposure 1/250 --gain 2 --size 636x480 2>&1)
	echo "$out" | tail -3
	step grep -q "does not support .*ExposureTime.*AnalogueGain" <<<"$out"
	step grep -q "^5 frames" <<<"$out"
	out=$("$fork/shutterbug" bracket --ev -1,0,1 --role viewfinder 2>&1); rc=$?
	echo "$out" | tail -2
	step test "$rc" -ne 0
	step grep -q "does not support ExposureTime and AnalogueGain" <<<"$out"
	out=$(timeout -k 5 120 "$fork/shutterbug" trigger --role viewfinder --simulated regular:1s --count 2 --output /tmp/trg-fork --json 2>&1)
	echo "$out" | grep -v '^\[' | tail -2
	step grep -q '"captured":2' <<<"$out"
	step djpeg -outfile /dev/null "$(ls /tmp/trg-fork/*/*.jpg | head -1)"
	out=$("$fork/shutterbug" doctor --json)
	echo "$out"
	step python3 -c 'import json, sys; d = json.loads(sys.argv[1]); c = {x["name"]: x for x in d["checks"]}; assert d["libcamera"].lstrip("v").startswith("0.7.1"), d["libcamera"]; assert d["compiledAgainst"] == "0.7.1", d; assert c["cameras"]["status"] == "ok", c["cameras"]; assert c["libcamera"]["status"] == "ok", c["libcamera"]' "$out"
	unset LD_LIBRARY_PATH
else
	echo "--- board: no build against the Raspberry Pi fork at $fork, or no SHUTTERBUG_FORK_PREFIX (the test command makes both)"
	failed=1
fi
exit $failed
