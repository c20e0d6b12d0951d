#!/usr/bin/env bash
# Fuzzes the service's HTTP API against its OpenAPI document (docs/openapi.yaml) with
# schemathesis: `shutterbug serve` on the simulated camera in virtual time (a fuzzed 60 s
# exposure takes no wall time), every operation, a fixed seed; fails on any 5xx, any response
# the document does not describe, any schema-valid request refused or invalid one accepted.
# Then SIGTERM must end the service with status 0.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${SHUTTERBUG_BUILD_DIR:-.build/debug}
st=$(command -v schemathesis || echo "$HOME/.local/bin/schemathesis")
[ -x "$st" ] || { echo "fuzz-api: needs schemathesis (board/setup-host.sh installs it from PyPI)"; exit 1; }
dir=$(mktemp -d)
# A job runs, so the job operations have one to find (schemathesis.toml names it).
cat >"$dir/serve.yaml" <<YAML
jobs:
  - name: roof
    interval: 10s
    until: stopped
YAML
# Whether a job's options make sense together (an end still to come, exposures that fit the
# interval) is more than a schema says: a schema-valid POST /api/jobs may get 400 naming the
# option. Everything else schema-valid must be taken.
cat >"$dir/schemathesis.toml" <<TOML
[[operations]]
include-name = "POST /api/jobs"
checks.positive_data_acceptance.expected-statuses = ["201", "400", "409"]

# "at" is an instant on the camera's clock or in wall time: whether it is within the frames the
# service holds (410 before them, 422 ahead or unreadable) is more than a schema says.
[[operations]]
include-name = "POST /api/capture"
checks.positive_data_acceptance.expected-statuses = ["201", "409", "410", "422"]

[[operations]]
include-path-regex = "^/api/jobs/"
parameters = { "path.name" = "roof" }

[[operations]]
include-name = "GET /api/files/{path}"
parameters = { "path.path" = "roof/keogram.png" }
TOML
# Twice: as on loopback with no token, and with a token (every call sending it, as the page
# and the CLI client do), so the token's middleware is fuzzed too.
token=$(head -c 18 /dev/urandom | base64 | tr -d '/+=')
rc=0
for mode in open token; do
  rm -rf "$dir/out"
  if [ $mode = token ]; then export SHUTTERBUG_TOKEN=$token; auth=(-H "Authorization: Bearer $token"); else unset SHUTTERBUG_TOKEN; auth=(); fi
  "$build/shutterbug" serve --camera sim:imx477 --virtual-time --size 640x480 --listen 127.0.0.1:0 --output "$dir/out" --config "$dir/serve.yaml" 2>"$dir/err" &
  pid=$!
  trap 'kill $pid 2>/dev/null; rm -rf "$dir"' EXIT
  # Its "serving URL" line, for 60 s at most (a busy machine), or until it exits.
  for _ in $(seq 1 600); do grep -qs "serving " "$dir/err" && break; kill -0 $pid 2>/dev/null || break; sleep 0.1; done
  url=$(grep -so 'http://127.0.0.1:[0-9]*' "$dir/err" | head -1)
  [ -n "$url" ] || { cat "$dir/err"; echo "fuzz-api: the service did not say 'serving URL' within 60 s, or exited ($mode)"; exit 1; }
  echo "fuzz-api: $mode"
  # From the scratch folder: schemathesis keeps a cache (.schemathesis/) where it runs.
  spec=$PWD/docs/openapi.yaml
  (cd "$dir" && "$st" run "$spec" --url "$url" "${auth[@]}" --max-examples 100 --seed 20261124 --no-color) || rc=1
  kill -TERM $pid
  wait $pid
  status=$?
  trap 'rm -rf "$dir"' EXIT
  [ $status -eq 0 ] || { echo "fuzz-api: the service exited $status on SIGTERM ($mode)"; cat "$dir/err"; rc=1; }
done
exit $rc
