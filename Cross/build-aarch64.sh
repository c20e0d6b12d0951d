#!/usr/bin/env bash
# Builds shutterbug for aarch64 (a Raspberry Pi 4 or 5 on a 64-bit OS), in release mode, with
# the Swift runtime linked statically, from this x86-64 machine, for the system Pi users have:
# Raspberry Pi OS trixie and Debian 13 (glibc 2.41, libcamera 0.7.1).
#
#   1. a Debian unstable chroot (amd64) with Debian's own Swift 6.2.3 (swiftlang), pkgconf,
#      git and the cross linker (binutils-aarch64-linux-gnu): the compiler;
#   2. an arm64 sysroot of Debian 13 (trixie) with trixie-backports: the arm64 -dev packages
#      Shutterbug links (libcamera 0.7.1 from backports, libdrm, libtiff, libjpeg-turbo, libexif,
#      libsqlite3, libpng, libcurl, libmosquitto, zlib, libstdc++) with everything they depend on, as apt
#      resolves them for a fresh trixie system; and, from unstable, only the arm64 Swift runtime
#      (swiftlang, libswiftlang, without their dependencies), whose static archives hold
#      unversioned references that bind to trixie's libc at link time. Each package's control
#      files (symbols, shlibs) are kept in a dpkg database beside it for dpkg-shlibdeps;
#   3. a Swift SDK bundle (swift-sdk.json + toolset.json) over that sysroot;
#   4. `swift build --swift-sdk aarch64-unknown-linux-gnu -c release --static-swift-stdlib`
#      in the chroot, the repository and this machine's Swift package mirror bound in, the
#      pkg-config search confined to the sysroot.
#
# The chroot and the sysroot are made once and cached outside the repository, each keyed by its
# package lists (and the day's package versions are recorded beside them, printed with the
# build): ${SHUTTERBUG_CACHE:-~/.cache/shutterbug}/cross/KEY. Prints the binary's path, its
# size, the shared libraries it needs (readelf -d) and the highest GLIBC_ and GLIBCXX_ symbol
# versions it asks for (Cross/check-glibc.sh fails the build past trixie's).
#
#   Cross/build-aarch64.sh            build (.build-aarch64/ in the repository, not committed)
#   Cross/build-aarch64.sh --prepare  only make the chroot, sysroot and SDK
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
mirror=${SHUTTERBUG_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# The compiler's suite, and the target's: the suite the package is for, with its backports.
host_suite=sid
target_suite=trixie
# Bump when the layout of the cache changes.
layout=2
host_packages="swiftlang libc6-dev pkgconf git ca-certificates binutils-aarch64-linux-gnu"
# From trixie (libcamera from trixie-backports: trixie itself has 0.4).
target_packages="libc6-dev linux-libc-dev libcamera-dev/$target_suite-backports libdrm-dev libtiff-dev libjpeg62-turbo-dev libexif-dev libsqlite3-dev libpng-dev libcurl4-openssl-dev zlib1g-dev libmosquitto-dev"
# From unstable, without dependencies: the Swift runtime and its static archives.
runtime_packages="swiftlang libswiftlang"
key=$(printf '%s\n' "$layout" "$host_suite" "$host_packages" | sha256sum | cut -c1-12)
target_key=$(printf '%s\n' "$layout" "$target_suite" "$target_packages" "$host_suite" "$runtime_packages" | sha256sum | cut -c1-12)
cache=${SHUTTERBUG_CACHE:-$HOME/.cache/shutterbug}/cross/$key
root=$cache/root
tcache=${SHUTTERBUG_CACHE:-$HOME/.cache/shutterbug}/cross/sysroot-$target_key
sysroot=$tcache/sysroot
admindir=$tcache/dpkg
sdk=$tcache/sdk/shutterbug-aarch64.artifactbundle
say() { echo "cross: $*" >&2; }

need() {
	local missing=()
	for tool in "$@"; do command -v "$tool" >/dev/null || missing+=("$tool"); done
	[ ${#missing[@]} -eq 0 ] && return
	say "installing ${missing[*]}"
	apt-get install -y -qq debootstrap qemu-user-static >/dev/null
}
need debootstrap qemu-aarch64-static

# A private apt configuration for the suites named (its own lists, cache and status; arm64 beside
# amd64), so the system's apt sources are untouched.
apt_private() {
	local w=$1
	shift
	mkdir -p "$w/lists/partial" "$w/archives/partial" "$w/cache" "$w/etc/preferences.d"
	: >"$w/etc/sources.list"
	for s in "$@"; do
		echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $s main" >>"$w/etc/sources.list"
	done
	: >"$w/status"
	apt_opts=(-o Dir::Etc::SourceList="$w/etc/sources.list" -o Dir::Etc::SourceParts=/dev/null
		-o Dir::Etc::Preferences="$w/etc/preferences" -o Dir::Etc::PreferencesParts="$w/etc/preferences.d"
		-o Dir::State::Lists="$w/lists" -o Dir::State::Status="$w/status" -o Dir::Cache="$w/cache"
		-o Dir::Cache::Archives="$w/archives" -o APT::Architecture=amd64 -o APT::Architectures::=amd64
		-o APT::Architectures::=arm64 -o Debug::NoLocking=1 -o APT::Sandbox::User=root
		-o Acquire::Check-Valid-Until=false)
	apt-get "${apt_opts[@]}" -qq update
}

make_root() {
	# /usr/bin/swift is an absolute link: followed inside the chroot, not on this machine.
	[ -f "$cache/.debootstrapped" ] && chroot "$root" test -x /usr/bin/swift 2>/dev/null && return
	say "making the $host_suite chroot with Swift (once; several minutes)"
	mkdir -p "$cache"
	if [ ! -f "$cache/.debootstrapped" ]; then
		rm -rf "$root"
		debootstrap --variant=minbase --include=ca-certificates "$host_suite" "$root" "$mirror" >"$cache/debootstrap.log" 2>&1 \
			|| { tail -20 "$cache/debootstrap.log" >&2; exit 1; }
		touch "$cache/.debootstrapped"
	fi
	# The package archive is a snapshot: its Release files outlive their Valid-Until.
	echo 'Acquire::Check-Valid-Until "false";' >"$root/etc/apt/apt.conf.d/99shutterbug-snapshot"
	chroot "$root" apt-get update -qq
	DEBIAN_FRONTEND=noninteractive chroot "$root" apt-get install -y -qq --no-install-recommends $host_packages >"$cache/install.log" 2>&1 \
		|| { tail -20 "$cache/install.log" >&2; exit 1; }
	chroot "$root" apt-get clean
	chroot "$root" dpkg-query -W -f '${Package} ${Version}\n' swiftlang pkgconf binutils-aarch64-linux-gnu >"$cache/host-versions.txt"
}

make_sysroot() {
	[ -f "$sysroot/.complete" ] && return
	say "making the arm64 $target_suite sysroot (once)"
	rm -rf "$sysroot" "$admindir"
	mkdir -p "$sysroot" "$admindir/info" "$admindir/updates"
	: >"$admindir/status"
	echo 1 >"$admindir/info/format"
	: >"$tcache/target-versions.txt"
	local w
	w=$(mktemp -d)
	apt_private "$w" "$target_suite" "$target_suite-backports"
	# libstdc++ and libgcc of the suite's default compiler, for the C++ bridge.
	local gcc
	gcc=$(apt-cache "${apt_opts[@]}" depends gcc:arm64 | grep -o 'gcc-[0-9][0-9]*' | sed -n 1p | cut -d- -f2)
	local wanted=()
	for p in $target_packages "libstdc++-$gcc-dev" "libgcc-$gcc-dev"; do
		case "$p" in */*) wanted+=("${p%%/*}:arm64/${p#*/}") ;; *) wanted+=("$p:arm64") ;; esac
	done
	# Everything they need, as a fresh arm64 system would install it (the status is empty).
	apt-get "${apt_opts[@]}" -qq -y --download-only --no-install-recommends install "${wanted[@]}" >"$tcache/sysroot-download.log" 2>&1 \
		|| { tail -20 "$tcache/sysroot-download.log" >&2; exit 1; }
	for deb in "$w"/archives/*_arm64.deb "$w"/archives/*_all.deb; do
		[ -f "$deb" ] && unpack "$deb" "$target_suite"
	done
	rm -rf "$w"
	# The Swift runtime from unstable, alone: nothing of unstable's libc or libstdc++ comes in.
	w=$(mktemp -d)
	apt_private "$w" "$host_suite"
	local p
	for p in $runtime_packages; do
		(cd "$w/archives" && apt-get "${apt_opts[@]}" -qq download "$p:arm64") >>"$tcache/sysroot-download.log" 2>&1 \
			|| { tail -20 "$tcache/sysroot-download.log" >&2; exit 1; }
	done
	for deb in "$w"/archives/*_arm64.deb; do unpack "$deb" "$host_suite" runtime; done
	rm -rf "$w"
	# Absolute symlinks inside the sysroot point into it (relative), wherever it is mounted.
	relink
	usr_merge
	touch "$sysroot/.complete"
}

# One package into the sysroot: its files, its version (target-versions.txt), and, for
# dpkg-shlibdeps, its entry in a dpkg
# database (status, file list, symbols and shlibs files) whose file list names the files where
# they are in the sysroot.
unpack() {
	local deb=$1 suite=$2 role=${3:-}
	dpkg-deb -x "$deb" "$sysroot"
	local pkg ver arch
	pkg=$(dpkg-deb -f "$deb" Package)
	ver=$(dpkg-deb -f "$deb" Version)
	arch=$(dpkg-deb -f "$deb" Architecture)
	echo "$pkg $ver $suite${role:+ ($role)}" >>"$tcache/target-versions.txt"
	[ -n "$role" ] && return
	local ctl
	ctl=$(mktemp -d)
	dpkg-deb -e "$deb" "$ctl"
	# dpkg's own naming (info/format 1): PKG:ARCH for Multi-Arch: same packages, else PKG.
	local name=$pkg
	[ "$(dpkg-deb -f "$deb" Multi-Arch)" = same ] && name=$pkg:$arch
	for f in symbols shlibs; do
		[ -f "$ctl/$f" ] && cp "$ctl/$f" "$admindir/info/$name.$f"
	done
	dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|; s|/$||' | grep -v '^/*$' | sed "s|^|$sysroot|" >"$admindir/info/$name.list"
	{
		sed -n '/^Package:/p; /^Architecture:/p; /^Multi-Arch:/p; /^Version:/p' "$ctl/control"
		echo "Status: install ok installed"
		echo "Maintainer: unknown"
		echo "Description: unpacked into the sysroot"
		echo
	} >>"$admindir/status"
	rm -rf "$ctl"
}

# What an installed system has beside the packages' files: the merged /usr links (libc's linker
# script names /lib/ld-linux-aarch64.so.1), and the Swift runtime where the driver looks
# (Debian keeps it under /usr/libexec/swift).
usr_merge() {
	for d in lib bin sbin; do [ -e "$sysroot/$d" ] || ln -sfn "usr/$d" "$sysroot/$d"; done
	[ -e "$sysroot/usr/lib/swift" ] || ln -sfn ../libexec/swift/lib/swift "$sysroot/usr/lib/swift"
	[ -e "$sysroot/usr/lib/swift_static" ] || ln -sfn ../libexec/swift/lib/swift_static "$sysroot/usr/lib/swift_static"
}

relink() {
	find "$sysroot" -type l -lname '/*' | while read -r link; do
		local target
		target=$(readlink "$link")
		target=${target#"$sysroot"}
		ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" "$sysroot$target")" "$link"
	done
}

make_sdk() {
	[ -f "$sdk/info.json" ] && return
	say "writing the Swift SDK bundle"
	mkdir -p "$sdk/aarch64"
	# Where the build (in the chroot) finds the sysroot: bound in at /sysroot.
	ln -sfn /sysroot "$sdk/aarch64/sysroot"
	cat >"$sdk/info.json" <<JSON
{
  "schemaVersion": "1.0",
  "artifacts": {
    "shutterbug-aarch64": {
      "type": "swiftSDK",
      "version": "6.2.3",
      "variants": [{ "path": "aarch64", "supportedTriples": ["x86_64-pc-linux-gnu", "x86_64-unknown-linux-gnu"] }]
    }
  }
}
JSON
	cat >"$sdk/aarch64/swift-sdk.json" <<JSON
{
  "schemaVersion": "4.0",
  "targetTriples": {
    "aarch64-unknown-linux-gnu": {
      "sdkRootPath": "sysroot",
      "swiftResourcesPath": "sysroot/usr/lib/swift",
      "swiftStaticResourcesPath": "sysroot/usr/lib/swift_static",
      "toolsetPaths": ["toolset.json"]
    }
  }
}
JSON
	cat >"$sdk/aarch64/toolset.json" <<JSON
{
  "schemaVersion": "1.0",
  "swiftCompiler": { "extraCLIOptions": ["-use-ld=lld", "-no-toolchain-stdlib-rpath"] },
  "linker": { "path": "/usr/libexec/swift/bin/ld.lld" }
}
JSON
}

make_root
make_sysroot
usr_merge
make_sdk
[ "${1:-}" = "--prepare" ] && { say "ready: $cache, $tcache"; exit 0; }

# The build, in the chroot: the repository at /src, the sysroot at /sysroot, the SDK at /sdks,
# and this machine's Swift package mirror where its git configuration says (the same URL
# rewrite as the host's, so Package.swift's GitHub URLs resolve as they do here).
# Mounts a killed run left under the chroot (their sources may be gone, and binding over a
# mount of a deleted folder fails with ENOENT): undone first, deepest first.
awk -v r="$root" '$2 == r || index($2, r "/") == 1 {print $2}' /proc/mounts | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
mounts=()
bind() {
	mkdir -p "$root$2"
	mount --bind "$1" "$root$2"
	mounts=("$root$2" "${mounts[@]}")
}
cleanup() { for m in "${mounts[@]}"; do umount -l "$m" 2>/dev/null || true; done; }
trap cleanup EXIT
bind "$repo" /src
bind "$sysroot" /sysroot
bind "$(dirname "$sdk")" /sdks
bind /proc /proc
bind /dev /dev
mirror_dir=$(git config --system --get-regexp '^url\..*\.insteadof$' 2>/dev/null | awk '$2 == "https://github.com/" {print $1}' | sed 's/^url\.//; s/\.insteadof$//' | sed -n 1p)
if [ -n "$mirror_dir" ] && [ -d "$mirror_dir" ]; then
	bind "$mirror_dir" "$mirror_dir"
	git config --system --get-regexp '^url\.' | while read -r k v; do echo "$k $v"; done >"$cache/gitconfig.url"
	chroot "$root" sh -c "git config --system --unset-all url.$mirror_dir.insteadof 2>/dev/null; true"
	while read -r k v; do chroot "$root" git config --system --add "$k" "$v"; done <"$cache/gitconfig.url"
fi
chroot "$root" git config --system --add safe.directory '*'
say "building shutterbug for aarch64 with $(chroot "$root" swift --version 2>/dev/null | sed -n 1p)"
started=$SECONDS
chroot "$root" env -i HOME=/root PATH=/usr/local/bin:/usr/bin:/bin \
	PKG_CONFIG_SYSROOT_DIR=/sysroot PKG_CONFIG_PATH=/sysroot/usr/lib/aarch64-linux-gnu/pkgconfig:/sysroot/usr/share/pkgconfig \
	PKG_CONFIG_LIBDIR=/sysroot/usr/lib/aarch64-linux-gnu/pkgconfig:/sysroot/usr/share/pkgconfig \
	sh -c 'cd /src && swift build -c release --scratch-path /src/.build-aarch64 --swift-sdks-path /sdks \
		--swift-sdk aarch64-unknown-linux-gnu --static-swift-stdlib --product shutterbug' >&2
bin=$repo/.build-aarch64/aarch64-unknown-linux-gnu/release/shutterbug
[ -x "$bin" ] || { say "no binary at $bin"; exit 1; }
say "built in $((SECONDS - started)) s"
echo "binary: $bin"
echo "sysroot: $sysroot"
echo "admindir: $admindir"
echo "size: $(stat -c %s "$bin") bytes ($(du -h "$bin" | cut -f1))"
echo "file: $(file -b "$bin" 2>/dev/null || true)"
echo "needs:"
readelf -d "$bin" | awk '/NEEDED/ {print "  " $5}' | tr -d '[]'
echo "linked against (Debian $target_suite with backports, arm64; the Swift runtime from $host_suite):"
grep -E '^(libc6|libstdc\+\+6|libcamera0\.[0-9]+|libcamera-dev|libdrm2|libtiff6|libjpeg62-turbo|libexif12|libsqlite3-0|libpng16-16\S*|libcurl4\S*|libmosquitto1|libswiftlang|swiftlang) ' "$tcache/target-versions.txt" | sed 's/^/  /' || true
# What the loader of a trixie system (glibc 2.41, GCC 14's libstdc++) must provide.
Cross/check-glibc.sh "$bin" "$sysroot"
