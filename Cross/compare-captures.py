#!/usr/bin/env python3
"""Compares two seeded captures' files, as the cross tier does for the arm64 and x86 builds:
each DNG and JPEG's metadata as exiftool reads it (and each DNG's as LibRaw's raw-identify
reads it) must be equal, times and names aside. Pairs files by their step suffix (_1.dng ...).

  Cross/compare-captures.py DIR_A DIR_B      exit 0 if equal, 1 with the differences
"""
import json, os, re, subprocess, sys

# What differs between two runs of the same build: times, names, the tool's own version, and
# what depends on the pixels' encoding (a JPEG's size; the compilers' floating point may round
# a rendered pixel differently on another architecture), not on the capture's settings.
IGNORED = re.compile(r"^(SourceFile|Directory|FileName|File(Access|Modify|InodeChange)Date|FilePermissions|ExifToolVersion|"
                     r"DateTimeOriginal|CreateDate|ModifyDate|SubSec.*|OffsetTime.*|ImageUniqueID|ImageDescription)$")


def files(d):
    out = {}
    for root, _, names in os.walk(d):
        for n in names:
            m = re.search(r"_(\d+\.(dng|jpg))$", n)
            if m:
                out[m.group(1)] = os.path.join(root, n)
    return out


def exif(path):
    data = json.loads(subprocess.run(["exiftool", "-j", "-n", path], capture_output=True, text=True, check=True).stdout)[0]
    return {k: v for k, v in data.items() if not IGNORED.match(k) and not (path.endswith(".jpg") and k in ("FileSize",))}


def libraw(path):
    try:
        out = subprocess.run(["raw-identify", "-v", path], capture_output=True, text=True, check=True).stdout
    except FileNotFoundError:
        return {}
    return {l.split(":", 1)[0].strip(): l.split(":", 1)[1].strip() for l in out.splitlines()
            if ":" in l and not re.match(r"(Filename|Timestamp|ImageUniqueID)", l)}


def main():
    a, b = files(sys.argv[1]), files(sys.argv[2])
    problems = []
    if sorted(a) != sorted(b):
        problems.append(f"different files: {sorted(a)} vs {sorted(b)}")
    compared = 0
    for key in sorted(set(a) & set(b)):
        ea, eb = exif(a[key]), exif(b[key])
        for k in sorted(set(ea) | set(eb)):
            if ea.get(k) != eb.get(k):
                problems.append(f"{key}: {k}: {ea.get(k)!r} vs {eb.get(k)!r}")
        if key.endswith(".dng"):
            la, lb = libraw(a[key]), libraw(b[key])
            for k in sorted(set(la) | set(lb)):
                if la.get(k) != lb.get(k):
                    problems.append(f"{key}: LibRaw {k}: {la.get(k)!r} vs {lb.get(k)!r}")
        compared += 1
    if compared == 0:
        problems.append("no files to compare")
    for p in problems:
        print(p)
    print(f"{compared} files compared, {len(problems)} differences")
    sys.exit(1 if problems else 0)


main()
