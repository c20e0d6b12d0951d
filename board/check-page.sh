#!/usr/bin/env bash
# The web page in a real browser (headless Chromium): its script runs without an error and
# fills the page from the API (the status table has the camera's frame), and with a token the
# page itself still loads and asks for the token in its own form; no API data is shown
# without it. Part of the api tier.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${SHUTTERBUG_BUILD_DIR:-.build/debug}
command -v chromium >/dev/null || { echo "check-page: needs chromium (board/setup-host.sh installs it)"; exit 1; }
dir=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; rm -rf "$dir"' EXIT
rc=0
page() { # URL: the DOM after the script ran, and the console on stderr
	timeout 90 chromium --headless --no-sandbox --disable-gpu --user-data-dir="$dir/profile" --enable-logging=stderr --v=0 \
		--virtual-time-budget=6000 --dump-dom "$1" 2>"$dir/console"
}
for mode in open token; do
	if [ $mode = token ]; then export SHUTTERBUG_TOKEN=0123456789abcdef-page-check; else unset SHUTTERBUG_TOKEN; fi
	rm -rf "$dir/out" "$dir/profile"
	"$build/shutterbug" serve --camera sim:imx477 --size 640x480 --listen 127.0.0.1:0 --output "$dir/out" 2>"$dir/err" &
	pid=$!
	for _ in $(seq 1 200); do grep -q "serving " "$dir/err" && break; sleep 0.1; done
	url=$(grep -o 'http://127.0.0.1:[0-9]*/' "$dir/err" | head -1)
	[ -n "$url" ] || { cat "$dir/err"; echo "check-page: the service did not start"; exit 1; }
	dom=$(page "$url")
	errors=$(grep -E 'CONSOLE.*(Uncaught|Error)' "$dir/console" | grep -v 'needs its token' || true)
	if [ -n "$errors" ]; then echo "check-page ($mode): the page's script failed: $errors"; rc=1; fi
	if [ $mode = open ]; then
		# The status table filled from /api/status: a row for the newest frame with a number.
		grep -Eq '<td>frame</td><td>[0-9]+</td>' <<<"$dom" || { echo "check-page (open): the status was not shown"; echo "$dom" | head -c 3000; rc=1; }
	else
		# Its own form asks (not hidden), and the page says why.
		grep -q '<form id="token-form">' <<<"$dom" && grep -q 'this camera needs its token' <<<"$dom" || { echo "check-page (token): the page did not ask for the token"; echo "$dom" | head -c 3000; rc=1; }
		grep -Eq '<td>frame</td><td>[0-9]+</td>' <<<"$dom" && { echo "check-page (token): API data shown without the token"; rc=1; }
	fi
	kill -TERM $pid; wait $pid; pid=
	[ $rc -eq 0 ] && echo "check-page: $mode ok"
done
exit $rc
