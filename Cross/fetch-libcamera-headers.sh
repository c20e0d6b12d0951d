#!/usr/bin/env bash
# Fetches another Debian suite's libcamera-dev headers into a cache folder, without touching the
# system's apt sources, so the bridge can be compile-checked against libcamera versions the
# machine does not run (Debian 13 "trixie" ships 0.4; Debian 12 has 0.0.3 installed for real).
#
# usage: Cross/fetch-libcamera-headers.sh SUITE   -> prints the include folder
# cache: ${SHUTTERBUG_CACHE:-$HOME/.cache/shutterbug}/libcamera-headers/SUITE
set -euo pipefail
suite=${1:?usage: $0 SUITE (e.g. trixie)}
cache=${SHUTTERBUG_CACHE:-$HOME/.cache/shutterbug}/libcamera-headers/$suite
inc=$cache/root/usr/include/libcamera
if [ -f "$inc/libcamera/version.h" ]; then echo "$inc"; exit 0; fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/archives/partial" "$work/etc/preferences.d" "$work/etc/apt.conf.d"
cat >"$work/etc/sources.list" <<SRC
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $suite main
SRC
: >"$work/status"
opts=(-o Dir::Etc::SourceList="$work/etc/sources.list" -o Dir::Etc::SourceParts=/dev/null
      -o Dir::Etc::Preferences="$work/etc/preferences" -o Dir::Etc::PreferencesParts="$work/etc/preferences.d"
      -o Dir::State::Lists="$work/lists" -o Dir::State::Status="$work/status"
      -o Dir::Cache="$work/cache" -o Dir::Cache::Archives="$work/archives"
      -o APT::Architecture="$(dpkg --print-architecture)" -o Debug::NoLocking=1 -o APT::Sandbox::User=root)
mkdir -p "$work/cache"
apt-get "${opts[@]}" -qq update >&2
( cd "$work" && apt-get "${opts[@]}" -qq download libcamera-dev >&2 )
mkdir -p "$cache/root"
for deb in "$work"/libcamera-dev_*.deb; do dpkg-deb -x "$deb" "$cache/root"; done
test -f "$inc/libcamera/version.h"
echo "$inc"
