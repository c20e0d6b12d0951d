#!/bin/bash
# Opens the service's web page in headless Chromium and saves a screenshot: starts `shutterbug
# serve` on the simulated camera, takes a bracket over the API so the page has something to
# list, lets the page's script run, and writes the PNG.
#   board/web-screenshot.sh [OUT.png]        (needs chromium: apt-get install chromium)
set -euo pipefail
out=${1:-web-page.png}
build=${SHUTTERBUG_BUILD_DIR:-.build/debug}
command -v chromium >/dev/null || { echo "needs chromium (apt-get install chromium)" >&2; exit 2; }
dir=$(mktemp -d)
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
"$build/shutterbug" serve --camera sim:imx477 --size 1332x990 --listen 127.0.0.1:0 --output "$dir/out" 2>"$dir/err" &
pid=$!
for _ in $(seq 1 100); do grep -q "serving " "$dir/err" && break; sleep 0.1; done
url=$(grep -o 'http://127.0.0.1:[0-9]*/' "$dir/err" | head -1)
curl -sf -X POST "$url/api/capture" -H 'Content-Type: application/json' -d '{"ev": [-2, 0, 2]}' >/dev/null
curl -sf -X POST "$url/api/capture" -d '{}' >/dev/null
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1280,800 \
	--virtual-time-budget=8000 --screenshot="$dir/shot.png" "$url" >/dev/null 2>&1
cp "$dir/shot.png" "$out"
echo "$out"
