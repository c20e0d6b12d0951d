#!/usr/bin/env bash
# Prints a PKG_CONFIG_PATH under which SwiftPM builds Shutterbug against the Raspberry Pi fork
# of libcamera (Cross/build-libcamera-fork.sh rpt) instead of the system's:
#
#   PKG_CONFIG_PATH=$(Cross/fork-pkg-config.sh) swift build --scratch-path .build-fork
#
# SwiftPM, unlike pkg-config, keeps a .pc file's -L for the system's library folder: the
# system's sqlite3.pc and libdrm.pc put -L/usr/lib/<triplet> on the link line before the fork's
# folder, and -lcamera then finds the system's libcamera. So the folder also holds copies of
# those .pc files without that -L (the linker searches the system folder anyway).
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=$(Cross/build-libcamera-fork.sh rpt)
dir=$prefix/../pkgconfig-override
mkdir -p "$dir"
for pc in sqlite3 libdrm; do
	src=$(pkg-config --variable=pcfiledir "$pc")/$pc.pc
	sed '/^Libs:/s/-L\${libdir} *//' "$src" >"$dir/$pc.pc"
done
echo "$prefix/lib/pkgconfig:$dir"
