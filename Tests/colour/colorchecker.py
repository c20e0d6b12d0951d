#!/usr/bin/env python3
"""Measures the 24 ColorChecker patches of a Shutterbug DNG (developed by LibRaw through rawpy,
with the file's own ColorMatrix1 and AsShotNeutral) or JPEG (decoded by libjpeg through
Pillow-free djpeg), and reports the CIEDE2000 error of each against X-Rite's published values.

usage: colorchecker.py FILE [--json]      exit 0 when median <= 3 and max <= 8, 1 otherwise

Independent of Shutterbug's own code: the reference table, the chart geometry, the colour
maths and CIEDE2000 are written out here (the geometry as the simulator documents it).
"""
import json
import signal
import subprocess
import sys

import numpy as np

# X-Rite ColorChecker Classic (before November 2014), CIE L*a*b* D50 2 degree, as X-Rite
# published it (tabulated by Imatest and BabelColor).
REFERENCE_LAB_D50 = np.array([
    [37.986, 13.555, 14.059], [65.711, 18.130, 17.810], [49.927, -4.880, -21.925],
    [43.139, -13.095, 21.905], [55.112, 8.844, -25.399], [70.719, -33.397, -0.199],
    [62.661, 36.067, 57.096], [40.020, 10.410, -45.964], [51.124, 48.239, 16.248],
    [30.325, 22.976, -21.587], [72.532, -23.709, 57.255], [71.941, 19.363, 67.857],
    [28.778, 14.179, -50.297], [55.261, -38.342, 31.370], [42.101, 53.378, 28.190],
    [81.733, 4.039, 79.819], [51.935, 49.986, -14.574], [51.038, -28.631, -28.638],
    [96.539, -0.425, 1.186], [81.257, -0.638, -0.335], [66.766, -0.734, -0.504],
    [50.867, -0.153, -0.270], [35.656, -0.421, -1.231], [20.461, -0.079, -0.973],
])

# The chart's layout (SimulatedCamera/ColourChart.swift): 6x4 cells inside a 4% margin.
COLUMNS, ROWS, MARGIN = 6, 4, 0.04

SRGB_TO_XYZ = np.array([[0.4124564, 0.3575761, 0.1804375],
                        [0.2126729, 0.7151522, 0.0721750],
                        [0.0193339, 0.1191920, 0.9503041]])
BRADFORD = np.array([[0.8951, 0.2664, -0.1614], [-0.7502, 1.7135, 0.0367], [0.0389, -0.0685, 1.0296]])
D65 = np.array([0.95047, 1.0, 1.08883])
D50 = np.array([0.96422, 1.0, 0.82521])


def adapt(src, dst):
    s, d = BRADFORD @ src, BRADFORD @ dst
    return np.linalg.inv(BRADFORD) @ np.diag(d / s) @ BRADFORD


def srgb_decode(v):
    return np.where(v <= 0.04045, v / 12.92, ((v + 0.055) / 1.055) ** 2.4)


def linear_srgb_to_lab_d50(rgb):
    xyz = (adapt(D65, D50) @ SRGB_TO_XYZ @ rgb.T).T / D50
    f = np.where(xyz > 216 / 24389, np.cbrt(xyz), (24389 / 27 * xyz + 16) / 116)
    return np.stack([116 * f[:, 1] - 16, 500 * (f[:, 0] - f[:, 1]), 200 * (f[:, 1] - f[:, 2])], axis=1)


def ciede2000(lab1, lab2):
    """Sharma, Wu and Dalal (2005), kL = kC = kH = 1."""
    L1, a1, b1 = lab1.T
    L2, a2, b2 = lab2.T
    C1, C2 = np.hypot(a1, b1), np.hypot(a2, b2)
    Cm = (C1 + C2) / 2
    G = 0.5 * (1 - np.sqrt(Cm ** 7 / (Cm ** 7 + 25.0 ** 7)))
    a1p, a2p = (1 + G) * a1, (1 + G) * a2
    C1p, C2p = np.hypot(a1p, b1), np.hypot(a2p, b2)
    h1p = np.degrees(np.arctan2(b1, a1p)) % 360
    h2p = np.degrees(np.arctan2(b2, a2p)) % 360
    dLp, dCp = L2 - L1, C2p - C1p
    dh = h2p - h1p
    dh = np.where(C1p * C2p == 0, 0, np.where(dh > 180, dh - 360, np.where(dh < -180, dh + 360, dh)))
    dHp = 2 * np.sqrt(C1p * C2p) * np.sin(np.radians(dh / 2))
    Lpm, Cpm = (L1 + L2) / 2, (C1p + C2p) / 2
    hsum = h1p + h2p
    hpm = np.where(C1p * C2p == 0, hsum,
                   np.where(np.abs(h1p - h2p) <= 180, hsum / 2, np.where(hsum < 360, (hsum + 360) / 2, (hsum - 360) / 2)))
    T = (1 - 0.17 * np.cos(np.radians(hpm - 30)) + 0.24 * np.cos(np.radians(2 * hpm))
         + 0.32 * np.cos(np.radians(3 * hpm + 6)) - 0.20 * np.cos(np.radians(4 * hpm - 63)))
    dtheta = 30 * np.exp(-(((hpm - 275) / 25) ** 2))
    Rc = 2 * np.sqrt(Cpm ** 7 / (Cpm ** 7 + 25.0 ** 7))
    Sl = 1 + 0.015 * (Lpm - 50) ** 2 / np.sqrt(20 + (Lpm - 50) ** 2)
    Sc, Sh = 1 + 0.045 * Cpm, 1 + 0.015 * Cpm * T
    Rt = -np.sin(np.radians(2 * dtheta)) * Rc
    return np.sqrt((dLp / Sl) ** 2 + (dCp / Sc) ** 2 + (dHp / Sh) ** 2 + Rt * (dCp / Sc) * (dHp / Sh))


def self_check():
    # Pairs 1, 7 and 17 of Sharma et al.'s published test data.
    pairs = np.array([[50, 2.6772, -79.7751, 50, 0, -82.7485, 2.0425],
                      [50, 0, 0, 50, -1, 2, 2.3669],
                      [50, 2.5, 0, 73, 25, -18, 27.1492]])
    got = ciede2000(pairs[:, 0:3], pairs[:, 3:6])
    assert np.allclose(got, pairs[:, 6], atol=1e-4), got


def patches(linear):
    """Mean linear RGB of the central half of each patch."""
    h, w, _ = linear.shape
    out = []
    for i in range(24):
        col, row = i % COLUMNS, i // COLUMNS
        cw, ch = w * (1 - 2 * MARGIN) / COLUMNS, h * (1 - 2 * MARGIN) / ROWS
        x0, y0 = w * MARGIN + cw * (col + 0.25), h * MARGIN + ch * (row + 0.25)
        box = linear[int(y0):int(y0 + ch / 2), int(x0):int(x0 + cw / 2)]
        out.append(box.reshape(-1, 3).mean(axis=0))
    return np.array(out)


def develop_dng(path):
    import rawpy
    with rawpy.imread(path) as raw:
        rgb = raw.postprocess(use_camera_wb=True, no_auto_bright=True, adjust_maximum_thr=0.0, gamma=(1, 1), output_bps=16,
                              output_color=rawpy.ColorSpace.sRGB, user_flip=0)
    return rgb.astype(np.float64) / 65535


def decode_jpeg(path):
    ppm = subprocess.run(["djpeg", "-pnm", path], check=True, capture_output=True).stdout
    # Binary PPM: "P6\nW H\n255\n" then pixels.
    parts = ppm.split(b"\n", 3)
    w, h = map(int, parts[1].split())
    rgb = np.frombuffer(parts[3], dtype=np.uint8).reshape(h, w, 3).astype(np.float64) / 255
    return srgb_decode(rgb)


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    self_check()
    path = sys.argv[1]
    linear = develop_dng(path) if path.lower().endswith(".dng") else decode_jpeg(path)
    lab = linear_srgb_to_lab_d50(patches(linear))
    de = ciede2000(lab, REFERENCE_LAB_D50)
    result = {"file": path, "median": float(np.median(de)), "max": float(de.max()), "worst": int(de.argmax()) + 1,
              "deltaE": [round(float(d), 2) for d in de], "lab": [[round(float(v), 1) for v in p] for p in lab]}
    if "--json" in sys.argv:
        print(json.dumps(result))
    else:
        print(f"{path}: CIEDE2000 median {result['median']:.2f}, max {result['max']:.2f} (patch {result['worst']})")
        for i, (d, p, r) in enumerate(zip(de, lab, REFERENCE_LAB_D50)):
            print(f"  {i + 1:2d} dE {d:5.2f}  got L {p[0]:5.1f} a {p[1]:6.1f} b {p[2]:6.1f}   ref L {r[0]:5.1f} a {r[1]:6.1f} b {r[2]:6.1f}")
    sys.exit(0 if result["median"] <= 3 and result["max"] <= 8 else 1)


if __name__ == "__main__":
    main()
