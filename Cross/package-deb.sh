#!/usr/bin/env bash
# Makes the Debian package a Raspberry Pi user installs: shutterbug_VERSION_ARCH.deb with the
# binary (stripped), the systemd units, the service's default configuration (a conffile), the
# udev rule, a man page generated from the command line's help, the copyright and changelog,
# and maintainer scripts that create the `shutterbug` system user in the video, render and gpio
# groups. Depends is computed by dpkg-shlibdeps from the symbols and shlibs files of the
# libraries the binary links (this machine's for amd64, the arm64 sysroot's dpkg database for
# arm64). Then runs lintian on it.
#
#   Cross/package-deb.sh ARCH BINARY [OUTDIR]     ARCH: amd64 or arm64; OUTDIR: .build-deb
#
# The version is the binary's own (`shutterbug --version`, under qemu-aarch64-static for arm64).
set -euo pipefail
cd "$(dirname "$0")/.."
arch=${1:?usage: $0 amd64|arm64 BINARY [OUTDIR]}
bin=${2:?usage: $0 amd64|arm64 BINARY [OUTDIR]}
out=${3:-.build-deb}
mkdir -p "$out"
out=$(cd "$out" && pwd)
say() { echo "package: $*" >&2; }

for tool in lintian fakeroot; do
	command -v $tool >/dev/null || apt-get install -y -qq lintian fakeroot >/dev/null
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A copy: the binary may be .build/release's, which a build meanwhile could replace.
cp "$bin" "$work/binary"
bin=$work/binary

# The binary, run as this machine can: natively, or through qemu with the arm64 loader found in
# the sysroot (the binary asks for /lib/ld-linux-aarch64.so.1).
case "$arch" in
amd64)
	runner=()
	strip=strip
	;;
arm64)
	sysroot=${SHUTTERBUG_ARM64_SYSROOT:?set SHUTTERBUG_ARM64_SYSROOT (Cross/build-aarch64.sh sets it)}
	runner=(qemu-aarch64-static -L "$sysroot")
	command -v aarch64-linux-gnu-strip >/dev/null || apt-get install -y -qq binutils-aarch64-linux-gnu >/dev/null
	strip=aarch64-linux-gnu-strip
	;;
*) echo "ARCH is amd64 or arm64, not $arch" >&2; exit 64 ;;
esac
version=$("${runner[@]}" "$bin" --version | awk '{print $1}')
[ -n "$version" ] || { say "the binary says no version"; exit 1; }
name=shutterbug_${version}_${arch}
stage=$work/$name
say "$name from $bin ($("${runner[@]}" "$bin" --version))"

install -D -m755 "$bin" "$stage/usr/bin/shutterbug"
"$strip" --strip-unneeded --remove-section=.comment --remove-section=.note "$stage/usr/bin/shutterbug"
install -D -m644 board/systemd/shutterbug.service "$stage/usr/lib/systemd/system/shutterbug.service"
install -D -m644 board/systemd/shutterbug-timelapse.service "$stage/usr/lib/systemd/system/shutterbug-timelapse.service"
install -D -m644 board/systemd/serve.yaml "$stage/etc/shutterbug/serve.yaml"
install -D -m644 board/udev/99-shutterbug.rules "$stage/usr/lib/udev/rules.d/60-shutterbug.rules"
doc=$stage/usr/share/doc/shutterbug
install -D -m644 docs/service.md "$doc/service.md"
install -D -m644 docs/fleet.md "$doc/fleet.md"
install -D -m644 docs/upload.md "$doc/upload.md"
install -D -m644 board/rpi/README.md "$doc/README.md"
install -D -m644 docs/openapi.yaml "$doc/openapi.yaml"
cat >"$doc/copyright" <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: shutterbug
Source: https://github.com/shutterbug-camera/shutterbug

Files: *
Copyright: 2026 Shutterbug maintainers
License: Apache-2.0

Files: usr/bin/shutterbug
Copyright: 2026 Shutterbug maintainers
           2014-2025 Apple Inc. and the Swift project authors (Swift runtime, Foundation, swift-nio,
           swift-argument-parser, swift-log, swift-metrics, swift-service-lifecycle, linked statically)
           2021-2025 Adam Fowler and the Hummingbird authors
           2016-2025 JP Simard and the Yams authors (Yams; libyaml by Kirill Simonov, MIT)
License: Apache-2.0
Comment: Yams bundles libyaml under the MIT licence.

License: Apache-2.0
 On Debian systems, the full text of the Apache License, Version 2.0, is in
 /usr/share/common-licenses/Apache-2.0.
EOF
cat >"$work/changelog" <<EOF
shutterbug ($version) unstable; urgency=medium

  * Release $version: the camera as a service (timelapse jobs, GPIO
    triggers, HTTP API, metrics, web page), built for $arch.

 -- Shutterbug maintainers <maintainers@shutterbug.invalid>  $(date -R -d @"${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}")
EOF
# A native package (no Debian revision): its changelog is changelog.gz.
gzip -9n -c "$work/changelog" >"$doc/changelog.gz"
# Yams, the YAML library the configuration is read with, compiles its own copy of libyaml into
# the binary (as every Swift package using it does); Debian's libyaml is not used.
install -D -m644 /dev/stdin "$stage/usr/share/lintian/overrides/shutterbug" <<EOF
# Yams (Swift) vendors libyaml and builds it into the binary; there is no way to link Debian's.
shutterbug: embedded-library libyaml [usr/bin/shutterbug]
EOF

# The man page from the command line's help (swift-argument-parser's generate-manual), run
# against the binary itself (through qemu for arm64).
# The tool is built on its own from the resolved checkout (a few hundred lines, half a minute):
# its plugin, `swift package generate-manual`, would also build the whole package in release
# mode, some ten minutes on two cores, only to be built again statically.
[ -d .build/checkouts/swift-argument-parser ] || swift package resolve >/dev/null
gm=.build/generate-manual/debug/generate-manual
swift build --package-path .build/checkouts/swift-argument-parser --scratch-path .build/generate-manual --product generate-manual >"$work/gm.log" 2>&1 ||
	{ cat "$work/gm.log" >&2; say "cannot build swift-argument-parser's generate-manual"; exit 1; }
printf '#!/bin/sh\nexec %s "%s" "$@"\n' "${runner[*]}" "$bin" >"$work/shutterbug"
chmod +x "$work/shutterbug"
mkdir -p "$work/man"
"$gm" "$work/shutterbug" --authors "Shutterbug maintainers" --date "$(date -u -d @"${SOURCE_DATE_EPOCH:-$(date +%s)}" +%F)" -o "$work/man" >/dev/null
mkdir -p "$stage/usr/share/man/man1"
gzip -9n -c "$work/man/shutterbug.1" >"$stage/usr/share/man/man1/shutterbug.1.gz"

# Depends: what the binary needs, computed as Debian computes it (dpkg-shlibdeps): each shared
# library's package from the symbols or shlibs file of the package that holds it, at the lowest
# version that has every symbol the binary uses (libc6 at the highest symbol version really
# used, libcamera0.7 at what its shlibs says, 0.7.1, so Raspberry Pi OS's 0.7.1+rpt, trixie-
# backports' 0.7.1-1~bpo13+1 and unstable's 0.7.2 all satisfy it). amd64 asks this machine's
# dpkg database; arm64 the sysroot's (Cross/build-aarch64.sh keeps one beside it).
shlibdeps=(dpkg-shlibdeps -O)
if [ "$arch" = arm64 ]; then
	admindir=${SHUTTERBUG_ARM64_ADMINDIR:?set SHUTTERBUG_ARM64_ADMINDIR (Cross/build-aarch64.sh prints it)}
	shlibdeps+=(--admindir="$admindir" -l"$sysroot/usr/lib/aarch64-linux-gnu" -l"$sysroot/usr/lib")
fi
# dpkg-shlibdeps reads debian/control and expects the binary under debian/PACKAGE.
mkdir -p "$work/src/debian"
printf 'Source: shutterbug\n\nPackage: shutterbug\nArchitecture: %s\n' "$arch" >"$work/src/debian/control"
ln -s "$stage" "$work/src/debian/shutterbug"
shlibs=$(cd "$work/src" && "${shlibdeps[@]}" -e"debian/shutterbug/usr/bin/shutterbug" 2>"$work/shlibdeps.log") \
	|| { cat "$work/shlibdeps.log" >&2; say "dpkg-shlibdeps failed"; exit 1; }
dep_line=$(sed -n 's/^shlibs:Depends=//p' <<<"$shlibs")
[ -n "$dep_line" ] || { say "dpkg-shlibdeps found no dependencies: $shlibs"; exit 1; }
dep_line="$dep_line, adduser"

# The IPA modules a real camera needs, of the linked libcamera's own release: libcamera loads
# no IPA module built for another, and an unversioned libcamera-ipa on Debian 13 would bring
# trixie's 0.4 beside backports' 0.7.1 (apt leaves a recommendation out that no candidate meets;
# `shutterbug doctor` then says how to install the right one).
camera_release=$(grep -o 'libcamera0[.0-9]* (>= [^)]*)' <<<"$dep_line" | sed 's/.*>= \([0-9]*\.[0-9]*\).*/\1/' | head -1)
ipa_recommends="libcamera-ipa${camera_release:+ (>= $camera_release)}"

mkdir -p "$stage/DEBIAN"
cat >"$stage/DEBIAN/control" <<EOF
Package: shutterbug
Version: $version
Architecture: $arch
Maintainer: Shutterbug maintainers <maintainers@shutterbug.invalid>
Installed-Size: $(du -sk --exclude=DEBIAN "$stage" | cut -f1)
Depends: $dep_line
Recommends: systemd, $ipa_recommends
Section: video
Priority: optional
Homepage: https://github.com/shutterbug-camera/shutterbug
Description: headless camera service for Raspberry Pi camera modules
 Shutterbug turns a Raspberry Pi camera module (libcamera) into a dependable
 headless camera: exposure brackets on consecutive sensor frames, focus and
 white-balance locks, a GPIO shutter with kernel edge timestamps, timelapse
 brackets on a wall-clock grid that run for weeks and resume from a SQLite
 journal, DNG and JPEG files whose metadata tells the truth, a DRM/KMS
 preview, and a systemd service with an HTTP API, a web page and Prometheus
 metrics. Without a camera it runs on a simulated Raspberry Pi camera.
EOF
echo /etc/shutterbug/serve.yaml >"$stage/DEBIAN/conffiles"
cat >"$stage/DEBIAN/postinst" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = "configure" ]; then
	# The groups the camera, render nodes and GPIO chips belong to (Raspberry Pi OS has them;
	# Debian has no gpio group), and the service's user in them.
	for group in video render gpio; do
		getent group "$group" >/dev/null || addgroup --system --quiet "$group"
	done
	if ! getent passwd shutterbug >/dev/null; then
		adduser --system --group --quiet --home /var/lib/shutterbug --no-create-home \
			--gecos "Shutterbug camera service" shutterbug
	fi
	for group in video render gpio; do
		adduser --quiet shutterbug "$group" >/dev/null
	done
	# The service's state folder, for the photos and journals: systemd makes it when the
	# service starts (StateDirectory=), but `sudo -u shutterbug shutterbug timelapse ...` before
	# that must find it too. Left as it is when it exists (never taken from its owner).
	if [ ! -d /var/lib/shutterbug ]; then
		install -d -o shutterbug -g shutterbug -m 0755 /var/lib/shutterbug
	fi
	# The udev rule gives the gpio group the GPIO chips and video the DMA heaps.
	if [ -d /run/udev ] && command -v udevadm >/dev/null; then
		udevadm control --reload-rules || true
		udevadm trigger --subsystem-match=gpio --subsystem-match=dma_heap || true
	fi
fi
if [ -d /run/systemd/system ]; then
	systemctl --system daemon-reload >/dev/null || true
	# An upgrade restarts a running service; a first install leaves it to the user to enable
	# (systemctl enable --now shutterbug) once the configuration says what to do.
	if [ "$1" = "configure" ] && [ -n "$2" ]; then
		deb-systemd-invoke try-restart shutterbug.service shutterbug-timelapse.service >/dev/null || true
	fi
fi
exit 0
EOF
cat >"$stage/DEBIAN/prerm" <<'EOF'
#!/bin/sh
set -e
if [ -d /run/systemd/system ] && [ "$1" = "remove" ]; then
	deb-systemd-invoke stop shutterbug.service shutterbug-timelapse.service >/dev/null || true
fi
exit 0
EOF
cat >"$stage/DEBIAN/postrm" <<'EOF'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then
	systemctl --system daemon-reload >/dev/null || true
fi
if [ "$1" = "purge" ] && command -v deb-systemd-helper >/dev/null; then
	deb-systemd-helper purge shutterbug.service shutterbug-timelapse.service >/dev/null || true
fi
# The user and /var/lib/shutterbug (the photos and journals) are kept: nothing captured is
# removed with the package.
exit 0
EOF
chmod 755 "$stage/DEBIAN/postinst" "$stage/DEBIAN/prerm" "$stage/DEBIAN/postrm"
find "$stage" -type d -exec chmod 755 {} +
deb=$out/$name.deb
dpkg-deb --build --root-owner-group -Zxz "$stage" "$deb" >/dev/null
say "$deb ($(du -h "$deb" | cut -f1)); Depends: $dep_line"
# lintian: no errors and no warnings (the one override, libyaml inside Yams, is in the package
# with its reason).
lintian --tag-display-limit 0 --fail-on error,warning "$deb" >&2 || { say "lintian found errors or warnings"; exit 1; }
echo "$deb"
