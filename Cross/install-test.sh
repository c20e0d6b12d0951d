#!/usr/bin/env bash
# Installs a Debian package of shutterbug into a clean root of the system its users have, as
# `sudo apt install ./shutterbug_VERSION_ARCH.deb` does there (every dependency resolved by apt
# from that system's archive, nothing forced, the maintainer scripts run), and uses it:
#
#   amd64  Debian 12 (bookworm), this machine's system;
#   arm64  Debian 13 (trixie) with trixie-backports: the stand-in for Raspberry Pi OS trixie
#          (same glibc 2.41, and libcamera0.7 0.7.1 where Pi OS has the fork's 0.7.1+rpt), run
#          through qemu-aarch64 registered with binfmt_misc.
#
# In the root: --version, cameras, a seeded DNG+JPEG bracket (its metadata equal to this
# machine's build's, Cross/compare-captures.py, when .build/debug/shutterbug exists),
# `config check` of the shipped /etc/shutterbug/serve.yaml, `shutterbug serve` with the shipped
# configuration as the shutterbug user answering /api/status on loopback, `doctor --json`, the
# user, its groups and the files. Then an upgrade: the same package at a lower version installed
# first, its configuration edited and a timelapse journal written, the package installed over
# it: the edit and the journal stay. Then purge: the photos stay.
#
# The clean root (mmdebstrap, variant apt) is made once and cached, keyed by suite, architecture
# and sources; each run installs into a copy. Prints the install's time and the package's size.
#
#   Cross/install-test.sh PACKAGE.deb [SUITE]
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
deb=$(realpath "${1:?usage: $0 PACKAGE.deb [SUITE]}")
arch=$(dpkg-deb -f "$deb" Architecture)
version=$(dpkg-deb -f "$deb" Version)
case "$arch" in
amd64) suite=${2:-bookworm} ;;
arm64) suite=${2:-trixie} ;;
*) echo "install-test: $arch packages are not tested here" >&2; exit 64 ;;
esac
mirror=${SHUTTERBUG_DEBIAN_MIRROR:-http://deb.debian.org/debian}
sources=("deb $mirror $suite main")
[ "$suite" = bookworm ] || sources+=("deb $mirror $suite-backports main")
layout=2
key=$(printf '%s\n' "$layout" "$arch" "${sources[@]}" | sha256sum | cut -c1-12)
cache=${SHUTTERBUG_CACHE:-$HOME/.cache/shutterbug}/install-root/$suite-$arch-$key
say() { echo "install-test: $*" >&2; }
for tool in mmdebstrap curl; do
	command -v $tool >/dev/null || apt-get install -y -qq mmdebstrap curl >/dev/null
done

# arm64 programs run through qemu, registered with the kernel (F: the interpreter is opened now,
# so it works inside the chroot). A container may have binfmt_misc unmounted.
if [ "$arch" = arm64 ] && [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
	command -v qemu-aarch64-static >/dev/null || apt-get install -y -qq qemu-user-static >/dev/null
	[ -e /proc/sys/fs/binfmt_misc/register ] || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
	cat /usr/lib/binfmt.d/qemu-aarch64.conf >/proc/sys/fs/binfmt_misc/register
fi

if [ ! -f "$cache/.complete" ]; then
	say "making a clean $suite $arch root (once)"
	rm -rf "$cache"
	mkdir -p "$cache"
	mmdebstrap --variant=apt --arch="$arch" --include=ca-certificates "$suite" "$cache/root" "${sources[@]}" >"$cache/mmdebstrap.log" 2>&1 \
		|| { tail -20 "$cache/mmdebstrap.log" >&2; exit 1; }
	echo 'Acquire::Check-Valid-Until "false";' >"$cache/root/etc/apt/apt.conf.d/99snapshot"
	touch "$cache/.complete"
fi
work=$(mktemp -d)
root=$work/root
server=
cleanup() {
	[ -n "$server" ] && kill "$server" 2>/dev/null
	umount -l "$root/proc" "$root/dev" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
cp -a "$cache/root" "$root"
mount -t proc proc "$root/proc"
mount --bind /dev "$root/dev"
in_root() { chroot "$root" "$@"; }
apt_in_root() { DEBIAN_FRONTEND=noninteractive chroot "$root" apt-get -y -q "$@" >"$work/apt.log" 2>&1 || { tail -30 "$work/apt.log" >&2; return 1; }; }
apt_in_root update

ok=0
check() {
	echo "install-test: $*"
	"$@" || { echo "install-test: FAILED: $*"; ok=1; }
}

# The package at a lower version first (the same files; "~" sorts before anything), so that the
# package under test is installed as an upgrade, as a user's next release is.
mkdir -p "$work/prev"
dpkg-deb -R "$deb" "$work/prev/pkg"
sed -i "s/^Version: .*/Version: ${version}~prev/" "$work/prev/pkg/DEBIAN/control"
dpkg-deb --build --root-owner-group -Znone "$work/prev/pkg" "$root/tmp/shutterbug_${version}~prev_$arch.deb" >/dev/null
cp "$deb" "$root/tmp/"
started=$SECONDS
apt_in_root install "/tmp/shutterbug_${version}~prev_$arch.deb"
say "installed ${version}~prev with its dependencies in $((SECONDS - started)) s ($(du -k "$deb" | cut -f1) KiB package)"
grep -E '^(Get|Selected|Setting up) .*(libcamera|libc6 )' "$work/apt.log" | sed 's/^/  /' | head -8 || true
in_root shutterbug --version
# The service's state folder is there, the service user's, before the service ever ran.
check test "$(in_root stat -c %U:%G /var/lib/shutterbug)" = shutterbug:shutterbug
# What a user has done by the next upgrade: edited the configuration, taken a timelapse.
sed -i 's|^listen: 127.0.0.1:8080|listen: 127.0.0.1:8181   # edited by the user|' "$root/etc/shutterbug/serve.yaml"
check in_root runuser -u shutterbug -- shutterbug timelapse --camera sim:imx477 --virtual-time --size 640x480 \
	--interval 10s --count 2 --output /var/lib/shutterbug/garden
journal_before=$(sha256sum "$root/var/lib/shutterbug/garden/timelapse.sqlite" 2>/dev/null | cut -d' ' -f1)
check test -n "$journal_before"

started=$SECONDS
apt_in_root install "/tmp/$(basename "$deb")"
say "upgraded to $version in $((SECONDS - started)) s"
check grep -q '^Setting up shutterbug .*'"$version" "$work/apt.log"
check grep -q 'listen: 127.0.0.1:8181   # edited by the user' "$root/etc/shutterbug/serve.yaml"
check test "$(sha256sum "$root/var/lib/shutterbug/garden/timelapse.sqlite" 2>/dev/null | cut -d' ' -f1)" = "$journal_before"
check test ! -e "$root/etc/shutterbug/serve.yaml.dpkg-new"

in_root shutterbug --version | tee "$work/version"
check grep -q "^$version " "$work/version"
check in_root sh -c 'shutterbug cameras | grep -q "sim:imx477"'
bracket=(bracket --camera sim:imx477 --virtual-time --seed 7 --ev -1,0,1 --format dng,jpeg)
check in_root sh -c "shutterbug ${bracket[*]} --output /tmp/b >/dev/null 2>&1 && ls /tmp/b/*/*_3.jpg /tmp/b/*/*_3.dng >/dev/null"
if [ -x "$repo/.build/debug/shutterbug" ]; then
	"$repo/.build/debug/shutterbug" "${bracket[@]}" --output "$work/x86" >/dev/null 2>&1
	check python3 Cross/compare-captures.py "$root/tmp/b" "$work/x86"
fi
check in_root sh -c 'id shutterbug | grep -q video && id shutterbug | grep -q render && id shutterbug | grep -q gpio'
check test -f "$root/usr/lib/systemd/system/shutterbug.service"
check test -f "$root/usr/share/man/man1/shutterbug.1.gz"
check in_root shutterbug config check /etc/shutterbug/serve.yaml

# The service as systemd would run it: the shipped configuration, the shutterbug user, a free
# port on loopback for the test (the command line's --listen over the configuration's).
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
chroot "$root" runuser -u shutterbug -- shutterbug serve --config /etc/shutterbug/serve.yaml --listen "127.0.0.1:$port" >"$work/serve.log" 2>&1 &
server=$!
status=
for _ in $(seq 1 120); do
	status=$(curl -sf --max-time 2 "http://127.0.0.1:$port/api/status") && break
	kill -0 "$server" 2>/dev/null || break
	sleep 0.5
done
if [ -n "$status" ]; then
	echo "install-test: /api/status: $(head -c 200 <<<"$status")"
	check grep -q '"camera"' <<<"$status"
else
	echo "install-test: FAILED: serve did not answer /api/status on 127.0.0.1:$port within 60 s; its log:"
	tail -20 "$work/serve.log"
	ok=1
fi
kill -TERM "$server" 2>/dev/null && wait "$server" 2>/dev/null || true
server=

# doctor as a user would run it after installing: JSON, and no check crashed.
in_root runuser -u shutterbug -- shutterbug doctor --json >"$work/doctor.json" || true
# It names the libcamera the package brought (by its package). The IPA modules: the package
# recommends libcamera-ipa of the linked release, which apt installs where that is the candidate
# (Raspberry Pi OS, Debian unstable) and leaves out where it is not (Debian 13, whose own is 0.4:
# before the version was given, apt brought that one). Where doctor says the IPA is missing, its
# fix, run as written, must make it ok.
doctor_says() { python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); c = {x["name"]: x for x in d["checks"]}
print("install-test: doctor:", ", ".join(x["name"] + " " + x["status"] for x in d["checks"]), file=sys.stderr)
assert c["libcamera"]["status"] == "ok" and (d["libcameraPackage"] or "").startswith("libcamera0."), c["libcamera"]
print(c["ipa"]["status"], c["ipa"]["fix"] or "")' "$work/doctor.json"; }
read -r ipa fix < <(doctor_says) || ok=1
if [ "${ipa:-}" != ok ] && [ -n "${fix:-}" ]; then
	echo "install-test: doctor's ipa check is $ipa; its fix: $fix"
	check in_root env DEBIAN_FRONTEND=noninteractive sh -c "${fix#sudo } -y -q >/dev/null 2>&1"
	in_root runuser -u shutterbug -- shutterbug doctor --json >"$work/doctor.json" || true
	read -r ipa fix < <(doctor_says) || ok=1
fi
check test "${ipa:-}" = ok

# Purged, the user and anything under /var/lib/shutterbug stay.
mkdir -p "$root/var/lib/shutterbug/keep" && touch "$root/var/lib/shutterbug/keep/photo.jpg"
apt_in_root purge shutterbug || ok=1
check test -f "$root/var/lib/shutterbug/keep/photo.jpg"
check test -f "$root/var/lib/shutterbug/garden/timelapse.sqlite"
check test ! -e "$root/usr/bin/shutterbug"
check test ! -e "$root/etc/shutterbug/serve.yaml"
exit $ok
