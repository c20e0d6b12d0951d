#!/usr/bin/env bash
# The cross tier: the arm64 build and its smoke run under qemu, the Debian packages for arm64
# and amd64 checked by lintian, each installed with apt into a clean root of its users' system.
#
#   1. Cross/build-aarch64.sh: shutterbug for aarch64 (Debian unstable's Swift 6.2.3, so nothing
#      newer than Swift 6.2 creeps in) against a Debian 13 arm64 sysroot, the Swift runtime
#      linked statically; Cross/check-glibc.sh fails it past trixie's glibc 2.41 or libstdc++;
#   2. under qemu-aarch64-static: --version, cameras, and a seeded bracket on the simulated
#      camera writing DNG and JPEG, whose metadata (exiftool, LibRaw) must equal the x86
#      build's for the same capture, times aside (Cross/compare-captures.py);
#   3. this machine's release build with the Swift runtime linked statically;
#   4. Cross/package-deb.sh for both (Depends from dpkg-shlibdeps; lintian: no error, no warning);
#   5. Cross/install-test.sh: the arm64 package into a Debian 13 arm64 root with trixie-backports
#      (the Raspberry Pi OS trixie stand-in, under qemu) and the amd64 one into Debian 12, each
#      used there (a bracket, config check, the service as its user, doctor), upgraded over and
#      purged.
set -euo pipefail
cd "$(dirname "$0")/.."
x86=${SHUTTERBUG_BUILD_DIR:-.build/debug}/shutterbug
[ -x "$x86" ] || swift build --product shutterbug >&2
step() {
	local start=$SECONDS
	echo "--- cross: $1"
	shift
	"$@"
	echo "--- cross: done in $((SECONDS - start)) s"
}
build_log=$(mktemp)
work=$(mktemp -d)
trap 'rm -rf "$work" "$build_log"' EXIT
step "arm64 build" bash -c "Cross/build-aarch64.sh | tee '$build_log'"
bin=$(awk '/^binary:/ {print $2}' "$build_log")
sysroot=$(awk '/^sysroot:/ {print $2}' "$build_log")
admindir=$(awk '/^admindir:/ {print $2}' "$build_log")
arm=(qemu-aarch64-static -L "$sysroot")
smoke() {
	"${arm[@]}" "$bin" --version | tee "$work/version"
	grep -q "aarch64; libcamera 0.7" "$work/version"
	"${arm[@]}" "$bin" cameras 2>/dev/null | tee "$work/cameras" | grep -q "sim:imx477"
	local args=(bracket --camera sim:imx477 --virtual-time --seed 7 --ev -1,0,1 --format dng,jpeg)
	"${arm[@]}" "$bin" "${args[@]}" --output "$work/arm64" 2>/dev/null | tail -1
	"$x86" "${args[@]}" --output "$work/x86" 2>/dev/null | tail -1
	python3 Cross/compare-captures.py "$work/arm64" "$work/x86"
}
step "smoke run under qemu, against the x86 build" smoke
step "amd64 release build" swift build -c release --static-swift-stdlib --product shutterbug
readelf -d .build/release/shutterbug | grep -q 'libswiftCore' && { echo "--- cross: the amd64 binary links the Swift runtime dynamically"; exit 1; }
step "arm64 package" env SHUTTERBUG_ARM64_SYSROOT="$sysroot" SHUTTERBUG_ARM64_ADMINDIR="$admindir" Cross/package-deb.sh arm64 "$bin"
step "amd64 package" Cross/package-deb.sh amd64 .build/release/shutterbug
version=$(.build/release/shutterbug --version | awk '{print $1}')
step "arm64 package installed into a Debian 13 arm64 root with backports (Raspberry Pi OS stand-in)" Cross/install-test.sh ".build-deb/shutterbug_${version}_arm64.deb"
step "amd64 package installed into a clean Debian 12 root" Cross/install-test.sh ".build-deb/shutterbug_${version}_amd64.deb"
ls -la .build-deb/
