#!/usr/bin/env bash
# Builds the Raspberry Pi fork of libcamera (../shared/vendor: the tag Raspberry Pi OS trixie
# ships, v0.7.1+rpt20260429, or its `next` branch) for this machine with the vimc pipeline and
# IPA (what runs here) and the Pi 4's rpi/vc4 pipeline (compiled, not run: a Pi's hardware is
# not here; it brings the rpi vendor controls, ControlListSequence among them, into the
# generated control_ids.h), installed into a prefix in the cache keyed by the tarball's sha256
# and these options. Prints the prefix; its include/libcamera holds the generated headers
# (control_ids.h, version.h) the bridge is compile-checked against.
#
#   Cross/build-libcamera-fork.sh rpt|next
#
# Needs meson, ninja, libyaml and gnutls headers, and ply, jinja2 and yaml for python3.
set -euo pipefail
cd "$(dirname "$0")/.."
vendor=${SHUTTERBUG_VENDOR:-$(cd .. && pwd)/shared/vendor}
case "${1:-}" in
rpt) tarball=$vendor/raspberrypi-libcamera-v0.7.1+rpt20260429.tar.gz ;;
next) tarball=$(ls "$vendor"/raspberrypi-libcamera-next-*.tar.gz | head -1) ;;
*) echo "usage: $0 rpt|next" >&2; exit 64 ;;
esac
[ -f "$tarball" ] || { echo "build-libcamera-fork: no $tarball (../shared/vendor holds the fork's sources)" >&2; exit 1; }
options=(-Dpipelines=vimc,rpi/vc4 -Dipas=vimc -Dcam=disabled -Dqcam=disabled -Dgstreamer=disabled -Dpycamera=disabled
	-Dtest=false -Ddocumentation=disabled -Dlc-compliance=disabled -Dv4l2=false -Dtracing=disabled)
key=$( (sha256sum "$tarball" | cut -d' ' -f1; echo "${options[*]}") | sha256sum | cut -c1-16)
cache=${SHUTTERBUG_CACHE:-$HOME/.cache/shutterbug}/libcamera-fork/$1-$key
prefix=$cache/prefix
if [ ! -f "$cache/.complete" ]; then
	for tool in meson ninja; do command -v $tool >/dev/null || apt-get install -y -qq meson ninja-build libyaml-dev libgnutls28-dev >/dev/null; done
	python3 -c 'import ply, jinja2, yaml' 2>/dev/null || python3 -m pip install --quiet ply jinja2 pyyaml >&2 \
		|| python3 -m pip install --quiet --break-system-packages ply jinja2 pyyaml >&2
	echo "build-libcamera-fork: building $(basename "$tarball") (once)" >&2
	rm -rf "$cache"
	mkdir -p "$cache/src"
	tar -xzf "$tarball" -C "$cache/src" --strip-components=1
	(cd "$cache/src" && meson setup "$cache/build" --prefix="$prefix" --libdir=lib "${options[@]}") >"$cache/build.log" 2>&1 \
		&& ninja -C "$cache/build" install >>"$cache/build.log" 2>&1 \
		|| { tail -30 "$cache/build.log" >&2; exit 1; }
	rm -rf "$cache/src"
	touch "$cache/.complete"
fi
echo "$prefix"
