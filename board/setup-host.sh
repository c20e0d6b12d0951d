#!/usr/bin/env bash
# Installs the Debian packages Shutterbug builds and tests with, if any is missing.
#
# usage: board/setup-host.sh [--board]   (--board adds what the virtual board needs)
# Runs apt-get only when something is missing, so it costs nothing on a prepared machine.
set -euo pipefail

# Build: libcamera and libdrm; libtiff, libjpeg-turbo and libexif for DNG and JPEG output.
# Tests read the output back with tools nobody here wrote: exiftool, LibRaw, djpeg (and tjbench
# for the output benchmark).
packages=(pkg-config g++ libcamera-dev libdrm-dev libtiff-dev libjpeg62-turbo-dev libexif-dev
	libimage-exiftool-perl libraw-bin libjpeg-turbo-progs)
if [ "${1:-}" = "--board" ]; then
	packages+=(qemu-system-x86 linux-source-6.1 build-essential flex bison bc libelf-dev xz-utils
		libcamera-tools libcamera-ipa libdrm-tests gpiod)
fi

missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "setup-host: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >&2
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
