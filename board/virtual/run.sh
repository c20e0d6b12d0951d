#!/usr/bin/env bash
# Boots the virtual board (qemu: vimc camera, vkms display, gpio-sim lines) and runs one command
# in it, in the current directory, as root. The guest sees the host's filesystem read-only, so it
# runs the binaries just built; /tmp and /run are the guest's own. Prints the command's output and
# exits with its status.
#
# usage: board/virtual/run.sh [--timeout SECONDS] [--] COMMAND [ARG...]
# env:   SHUTTERBUG_BOARD_ACCEL=auto|kvm|tcg (auto: KVM if a probe boot with it works, else TCG)
#        SHUTTERBUG_BOARD_MEMORY=MiB (default 2048)
#        SHUTTERBUG_BOARD_CPUS=N (default 2)
#        SHUTTERBUG_BOARD_CMDLINE=ARGS (more kernel command-line arguments, e.g. idle=poll)
#        SHUTTERBUG_BOARD_QEMU=ARGS (more qemu arguments, split at spaces, e.g. -icount shift=0)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
timeout_s=600
while [ $# -gt 0 ]; do
	case "$1" in
	--timeout) timeout_s=$2; shift 2 ;;
	--) shift; break ;;
	*) break ;;
	esac
done
[ $# -gt 0 ] || { echo "usage: $0 [--timeout S] [--] COMMAND [ARG...]" >&2; exit 2; }

cache=${SHUTTERBUG_CACHE:-$HOME/.cache/shutterbug}
kernel=$("$here/build-kernel.sh")

# The init program, built once per source version into the cache (the guest reads it from there).
init_key=$(sha256sum "$here/init.c" | cut -c1-16)
init=$cache/board/init-$init_key
if [ ! -x "$init" ]; then
	mkdir -p "$cache/board"
	gcc -static -O2 -Wall -o "$init.tmp" "$here/init.c"
	mv "$init.tmp" "$init"
fi

boot() { # boot ACCEL SHARE TIMEOUT
	local accel=$1 share=$2 t=$3 cpu=max
	[ "$accel" = kvm ] && cpu=host
	timeout --kill-after=5 "$t" qemu-system-x86_64 \
		-M pc -accel "$accel" -cpu "$cpu" -smp "${SHUTTERBUG_BOARD_CPUS:-2}" -m "${SHUTTERBUG_BOARD_MEMORY:-2048}" \
		-nodefaults -display none -serial stdio -no-reboot \
		-kernel "$kernel" \
		-append "console=ttyS0 quiet loglevel=3${SHUTTERBUG_BOARD_CMDLINE:+ $SHUTTERBUG_BOARD_CMDLINE} root=hostroot rootfstype=9p rootflags=trans=virtio,version=9p2000.L,msize=1048576,cache=loose ro init=$init" \
		-fsdev local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap \
		-device virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot \
		-fsdev local,id=board,path="$share",security_model=none \
		-device virtio-9p-pci,fsdev=board,mount_tag=board ${SHUTTERBUG_BOARD_QEMU:-}
}

# KVM only where it has proven it boots: a probe per host boot, remembered in the cache.
accel=${SHUTTERBUG_BOARD_ACCEL:-auto}
if [ "$accel" = auto ]; then
	verdict=$cache/board/accel-$(cat /proc/sys/kernel/random/boot_id)
	if [ -f "$verdict" ]; then
		accel=$(cat "$verdict")
	else
		accel=tcg
		if [ -w /dev/kvm ]; then
			probe=$(mktemp -d)
			echo "exit 0" >"$probe/command"
			# The probe as a plain board: a caller's extra qemu arguments (-icount is TCG's
			# only) must not decide whether KVM works for every later boot.
			if SHUTTERBUG_BOARD_QEMU= boot kvm "$probe" 30 >/dev/null 2>&1 && [ "$(cat "$probe/status" 2>/dev/null)" = 0 ]; then accel=kvm; fi
			rm -rf "$probe"
		fi
		mkdir -p "$cache/board"
		echo "$accel" >"$verdict"
	fi
fi

share=$(mktemp -d)
trap 'rm -rf "$share"' EXIT
{
	printf 'cd %q || exit 126\n' "$PWD"
	printf 'exec'
	printf ' %q' "$@"
	printf '\n'
} >"$share/command"

set +e
boot "$accel" "$share" "$timeout_s"
rc=$?
set -e
if [ -f "$share/status" ]; then
	exit "$(cat "$share/status")"
fi
echo "board: the virtual board did not report a status (qemu exit $rc, accel $accel, timeout ${timeout_s}s)" >&2
exit 125
