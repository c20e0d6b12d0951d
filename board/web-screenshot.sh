#!/bin/bash
# Opens the service's web page in headless Chromium and saves a screenshot: starts `shutterbug
# serve` on the simulated camera with a timelapse job (brackets every 4 s) and a simulated
# trigger, waits for the job's first slots, takes a bracket over the API, lets the page's script
# run, and writes the PNG: the newest frame and photo, the last bracket, the job's progress and
# keogram, the trigger's counts.
#   board/web-screenshot.sh [OUT.png]        (needs chromium: apt-get install chromium)
set -euo pipefail
out=${1:-web-page.png}
build=${SHUTTERBUG_BUILD_DIR:-.build/debug}
command -v chromium >/dev/null || { echo "needs chromium (apt-get install chromium)" >&2; exit 2; }
dir=$(mktemp -d)
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
cat >"$dir/serve.yaml" <<YAML
listen: 127.0.0.1:0
output: $dir/out
size: 1332x990
jobs:
  - name: garden
    interval: 4s
    count: 40
    ev: [-2, 0, 2]
triggers:
  - name: doorbell
    simulated: regular:5s
YAML
"$build/shutterbug" serve --camera sim:imx477 --config "$dir/serve.yaml" 2>"$dir/err" &
pid=$!
for _ in $(seq 1 100); do grep -q "serving " "$dir/err" && break; sleep 0.1; done
url=$(grep -o 'http://127.0.0.1:[0-9]*/' "$dir/err" | head -1)
# The job's first three slots (and its keogram), then a bracket over the API.
for _ in $(seq 1 200); do
	curl -sf "$url/api/jobs" | python3 -c 'import json,sys; sys.exit(0 if json.load(sys.stdin)[0]["taken"] >= 3 else 1)' && break
	sleep 0.1
done
curl -sf -X POST "$url/api/capture" -H 'Content-Type: application/json' -d '{"ev": [-2, 0, 2]}' >/dev/null
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1280,1150 \
	--virtual-time-budget=8000 --screenshot="$dir/shot.png" "$url" >/dev/null 2>&1
cp "$dir/shot.png" "$out"
echo "$out"
