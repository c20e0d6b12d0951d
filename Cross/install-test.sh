#!/usr/bin/env bash
# Installs a Debian package of shutterbug into a scratch Debian root, as a user's `apt install
# ./shutterbug_VERSION_ARCH.deb` would (its Depends resolved from the archive, its maintainer
# scripts run), and runs the installed binary: --version, cameras, a bracket on the simulated
# camera; checks the service user, its groups and the installed files. The clean root is made
# once with debootstrap and cached; each run installs into a copy.
#
#   Cross/install-test.sh PACKAGE.deb [SUITE]      SUITE: bookworm (this machine's), default
set -euo pipefail
cd "$(dirname "$0")/.."
deb=$(realpath "${1:?usage: $0 PACKAGE.deb [SUITE]}")
suite=${2:-bookworm}
mirror=${SHUTTERBUG_DEBIAN_MIRROR:-http://deb.debian.org/debian}
cache=${SHUTTERBUG_CACHE:-$HOME/.cache/shutterbug}/install-root/$suite-minbase-1
command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap >/dev/null
if [ ! -f "$cache/.complete" ]; then
	echo "install-test: making a clean $suite root (once)" >&2
	rm -rf "$cache"
	mkdir -p "$cache"
	debootstrap --variant=minbase "$suite" "$cache/root" "$mirror" >"$cache/debootstrap.log" 2>&1 || { tail -20 "$cache/debootstrap.log" >&2; exit 1; }
	touch "$cache/.complete"
fi
work=$(mktemp -d)
root=$work/root
cleanup() {
	umount -l "$root/proc" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
cp -a "$cache/root" "$root"
mount -t proc proc "$root/proc"
cp "$deb" "$root/tmp/"
echo 'Acquire::Check-Valid-Until "false";' >"$root/etc/apt/apt.conf.d/99snapshot"
chroot "$root" apt-get update -qq
DEBIAN_FRONTEND=noninteractive chroot "$root" apt-get install -y -qq "/tmp/$(basename "$deb")" >"$work/install.log" 2>&1 || { tail -30 "$work/install.log" >&2; exit 1; }
ok=0
check() {
	echo "install-test: $*"
	"$@" || { echo "install-test: FAILED: $*"; ok=1; }
}
chroot "$root" shutterbug --version
check chroot "$root" sh -c 'shutterbug --version | grep -q "^[0-9]"'
check chroot "$root" sh -c 'shutterbug cameras | grep -q "sim:imx477"'
check chroot "$root" sh -c 'shutterbug bracket --camera sim:imx477 --virtual-time --seed 3 --ev -1,1 --output /tmp/b >/dev/null 2>&1 && ls /tmp/b/*/*_2.jpg'
check chroot "$root" sh -c 'id shutterbug | grep -q video && id shutterbug | grep -q render && id shutterbug | grep -q gpio'
check test -f "$root/usr/lib/systemd/system/shutterbug.service"
check test -f "$root/etc/shutterbug/serve.yaml"
check test -f "$root/usr/share/man/man1/shutterbug.1.gz"
check chroot "$root" shutterbug config check /etc/shutterbug/serve.yaml
# Removed, the user and anything under /var/lib/shutterbug stay.
mkdir -p "$root/var/lib/shutterbug/keep" && touch "$root/var/lib/shutterbug/keep/photo.jpg"
DEBIAN_FRONTEND=noninteractive chroot "$root" apt-get purge -y -qq shutterbug >"$work/purge.log" 2>&1 || { tail -20 "$work/purge.log" >&2; ok=1; }
check test -f "$root/var/lib/shutterbug/keep/photo.jpg"
check test ! -e "$root/usr/bin/shutterbug"
exit $ok
