#!/usr/bin/env bash
# Checks that an arm64 binary loads on Raspberry Pi OS trixie / Debian 13: the highest GLIBC_
# symbol version it asks for is at most trixie's glibc (2.41), and every GLIBCXX_ and CXXABI_
# version it asks for is one the target's libstdc++ defines. Prints the highest of each.
#
#   Cross/check-glibc.sh BINARY SYSROOT [MAX_GLIBC]     MAX_GLIBC: 2.41 (Debian 13's glibc)
#
# The loader refuses a binary that names a version its libc lacks before main runs (as a glibc
# 2.43 build did on trixie: log10f@GLIBC_2.43), so this is checked here, not found on a Pi.
set -euo pipefail
bin=${1:?usage: $0 BINARY SYSROOT [MAX_GLIBC]}
sysroot=${2:?usage: $0 BINARY SYSROOT [MAX_GLIBC]}
max_glibc=${3:-2.41}
objdump=aarch64-linux-gnu-objdump
command -v $objdump >/dev/null || apt-get install -y -qq binutils-aarch64-linux-gnu >/dev/null
# Versions the binary needs (undefined dynamic symbols), and those the sysroot's libstdc++ has.
needed() { $objdump -T "$1" | awk '$0 ~ /\*UND\*/ {for (i = 1; i <= NF; i++) if ($i ~ /^\(?(GLIBC|GLIBCXX|CXXABI)_[0-9.]+\)?$/) {gsub(/[()]/, "", $i); print $i}}' | sort -u; }
defined() { $objdump -T "$1" | awk '$0 !~ /\*UND\*/ {for (i = 1; i <= NF; i++) if ($i ~ /^\(?(GLIBCXX|CXXABI)_[0-9.]+\)?$/) {gsub(/[()]/, "", $i); print $i}}' | sort -u; }
highest() { grep "^$1_[0-9]" | sed "s/^$1_//" | sort -V | tail -1; }
versions=$(needed "$bin")
glibc=$(highest GLIBC <<<"$versions")
glibcxx=$(highest GLIBCXX <<<"$versions")
echo "glibc: GLIBC_${glibc:-none} at most (the target has $max_glibc)"
echo "libstdc++: GLIBCXX_${glibcxx:-none}, CXXABI_$(highest CXXABI <<<"$versions") at most"
ok=0
if [ -n "$glibc" ] && [ "$(printf '%s\n' "$glibc" "$max_glibc" | sort -V | tail -1)" != "$max_glibc" ]; then
	echo "check-glibc: FAILED: the binary needs GLIBC_$glibc, above $max_glibc; these symbols:" >&2
	$objdump -T "$bin" | awk -v m="$max_glibc" '/\*UND\*/ && /GLIBC_[0-9]/' | while read -r line; do
		v=$(grep -o 'GLIBC_[0-9.]*' <<<"$line" | sed 's/GLIBC_//')
		[ "$(printf '%s\n' "$v" "$max_glibc" | sort -V | tail -1)" = "$max_glibc" ] || echo "  $line" >&2
	done
	ok=1
fi
stdcxx=$(find "$sysroot/usr/lib/aarch64-linux-gnu" -maxdepth 1 -name 'libstdc++.so.6.*' | sort -V | tail -1)
if grep -q '^\(GLIBCXX\|CXXABI\)_' <<<"$versions"; then
	[ -n "$stdcxx" ] || { echo "check-glibc: no libstdc++.so.6 in $sysroot" >&2; exit 1; }
	have=$(defined "$stdcxx")
	missing=$(comm -23 <(grep '^\(GLIBCXX\|CXXABI\)_' <<<"$versions") <(printf '%s\n' "$have"))
	if [ -n "$missing" ]; then
		echo "check-glibc: FAILED: $(basename "$stdcxx") (the target's) lacks $(echo "$missing" | paste -sd' ')" >&2
		ok=1
	fi
fi
exit $ok
