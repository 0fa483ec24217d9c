#!/usr/bin/env python3
"""fp8_reference.py — `ptdp fp8 quantize` against FP8 written again from its definition.

    python3 tests/fp8_reference.py build/cli/ptdp [build/cli/ptdp-f64]

An independent reference, in plain Python (struct, json, fractions: no
numpy, nothing from ptdp): it writes a safetensors file of chosen values,
runs `ptdp fp8 quantize` on it for every recipe, both formats and several
tiles, reads what ptdp wrote, and compares every code, every scale and every
dequantized value with its own, bit for bit.  Exit 0 when all agree, 1 with
the first differences of each case otherwise.

How the reference computes (none of it is how ptdp does it):
  * the FP8 values are listed from the format's definition as exact
    fractions; a cast finds the two neighbours of |x| by bisection and
    compares the distances exactly; a tie goes to the even code;
    |x| >= max gives max (saturation), NaN the NaN code 0x7F (0xFF if
    negative);
  * every float operation ptdp's float build does (x / s, amax / max,
    value * s) is computed exactly as a fraction and then rounded to the
    nearest float32, ties to even, subnormals included — by counting bits
    of the fraction, not through any float type.  For ptdp-f64 the same
    rounding to float64;
  * the rules, from the recipes' definitions: amax over the finite values
    of a tile (0 if none); s = amax / max, 1 when that is 0; mxfp8
    s = 2^clamp(floor(log2 amax) - emax, -127, 127) with floor(log2) found
    by comparing with powers of two, 1 for amax 0; delayed takes the max of
    --amax-history, or the tensor's own amax without one.

The values: every midpoint between neighbouring FP8 values at a scale of 1
(ties) with the floats just beside them, and the same midpoints behind a
scale that is no power of two (amax 3); the subnormals and their
midpoints; values far beyond max (saturation); all-zero tiles; NaN of both
signs, infinities, -0, the smallest float, values near FLT_MAX; random
values over 40 binades; edge tiles (300 columns in 1x128 tiles, 131 x 130
in 128x128, 300 in 1x32 and 5 rows in 32x1 tiles, 2x3 tiles on 5 x 300,
6 x 5 and 7 x 45); a scalar, a vector, a 3-D tensor, a BF16 tensor; for
ptdp-f64 an F64 file with values beside the ties by far less than a float
step.  The delayed recipe runs without a history (its first step) and
with --amax-history below and above the tensors' amaxes.

How it was seen to fail, each change made in ptdp, rebuilt, this script run
on ptdp (18 runs):
  * ties away from zero in src/nn/fp8.c (`rest >= half` for the tie
    rule): 14 runs fail, first at "ties[1] = 0.0009765625: code 0x01,
    reference 0x00" (2^-10, the tie of 0 and 2^-9);
  * max / amax for amax / max in src/nn/fp8_quant.c: all 14 runs that
    divide by amax / max fail (mxfp8's power-of-two scales pass);
  * no saturation in fp8.c (codes past max run into NaN and infinity):
    the 8 runs whose values pass max fail, mxfp8's and delayed's with a
    history ("code 0x7f, reference 0x7e");
  * x * (1/s) for x / s: 10 runs fail on the ties behind a scale
    ("scaled[2]: code 0x01, reference 0x02") — which is why they are there.
"""
import json
import math
import os
import random
import struct
import subprocess
import sys
import tempfile
from fractions import Fraction

# ---------------------------------------------------------------- the formats

FORMATS = {
    # name: (exponent bits, mantissa bits, bias, has infinities, MX emax, safetensors dtype)
    "e4m3": (4, 3, 7, False, 8, "F8_E4M3"),
    "e5m2": (5, 2, 15, True, 15, "F8_E5M2"),
}


def fp8_values(fmt):
    """The non-negative finite values, indexed by their code (magnitude)."""
    E, M, bias, has_inf, _, _ = FORMATS[fmt]
    values = []
    for code in range(128):
        e, m = code >> M, code & ((1 << M) - 1)
        if has_inf and e == (1 << E) - 1:
            break                                   # E5M2: infinity and NaN
        if not has_inf and code == 0x7F:
            break                                   # E4M3 "fn": the one NaN
        if e == 0:
            values.append(Fraction(m) * Fraction(2) ** (1 - bias - M))
        else:
            values.append(Fraction((1 << M) + m) * Fraction(2) ** (e - bias - M))
    return values


VALUES = {f: fp8_values(f) for f in FORMATS}


def cast(fmt, x):
    """x (an exact value: Fraction, or a float for the specials) -> code."""
    if isinstance(x, float) and math.isnan(x):
        return 0xFF if math.copysign(1.0, x) < 0 else 0x7F
    negative = (x < 0) or (isinstance(x, float) and x == 0 and math.copysign(1.0, x) < 0)
    sign = 0x80 if negative else 0
    if isinstance(x, float) and math.isinf(x):
        return sign | (len(VALUES[fmt]) - 1)
    a = abs(Fraction(x))
    v = VALUES[fmt]
    if a >= v[-1]:
        return sign | (len(v) - 1)
    lo, hi = 0, len(v) - 1                          # v[lo] <= a < v[hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if v[mid] <= a:
            lo = mid
        else:
            hi = mid
    below, above = a - v[lo], v[hi] - a
    if below < above or (below == above and lo % 2 == 0):
        return sign | lo
    return sign | hi


def decode(fmt, code):
    """A code's value: a Fraction, or a float NaN / inf carrying the sign."""
    negative = code & 0x80
    mag = code & 0x7F
    v = VALUES[fmt]
    if mag < len(v):
        value = v[mag]
        if value == 0:
            return -0.0 if negative else 0.0
        return -value if negative else value
    E, M, _, has_inf, _, _ = FORMATS[fmt]
    if has_inf and (mag & ((1 << M) - 1)) == 0:
        return -math.inf if negative else math.inf
    return -math.nan if negative else math.nan


# ------------------------------------------------ rounding to float32 / float64

class Real:
    """IEEE binary floats of p significant bits and minimum exponent emin."""

    def __init__(self, name, p, emin, emax, pack):
        self.name, self.p, self.emin, self.emax, self.pack = name, p, emin, emax, pack

    def round(self, q, negative_zero=False):
        """The nearest float to the Fraction q (ties to even), as a Python float (exact)."""
        if q == 0:
            return -0.0 if negative_zero else 0.0
        sign = -1 if q < 0 else 1
        a = abs(q)
        k = a.numerator.bit_length() - a.denominator.bit_length()   # 2^k <= a < 2^(k+2)
        while Fraction(2) ** k > a:
            k -= 1
        while Fraction(2) ** (k + 1) <= a:
            k += 1
        step = Fraction(2) ** (max(k, self.emin) - (self.p - 1))
        n = a / step
        whole = n.numerator // n.denominator
        rest = n - whole
        if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and whole % 2 == 1):
            whole += 1
        r = whole * step
        if r >= Fraction(2) ** (self.emax + 1):
            return sign * math.inf
        if r == 0:
            return -0.0 if sign < 0 else 0.0
        return sign * float(r)                      # r has at most p bits: exact in a double

    def bits(self, x):
        return struct.pack(self.pack, x)


F32 = Real("float32", 24, -126, 127, "<f")
F64 = Real("float64", 53, -1022, 1023, "<d")


def is_special(x):
    return math.isnan(x) or math.isinf(x)


def divide(real, x, s):
    """x / s rounded as the build rounds (s > 0, finite)."""
    if math.isnan(x):
        return x
    if math.isinf(x):
        return x
    return real.round(Fraction(x) / Fraction(s), negative_zero=math.copysign(1.0, x) < 0)


def multiply(real, v, s):
    """value(code) * s rounded (v: Fraction, or signed zero, or inf)."""
    if isinstance(v, float):
        if math.isinf(v):
            return v
        return -0.0 if math.copysign(1.0, v) < 0 else 0.0
    return real.round(v * Fraction(s), negative_zero=v < 0)


# ------------------------------------------------------------------ the recipes

def floor_log2(a):
    k = 0
    while Fraction(2) ** k > a:
        k -= 1
    while Fraction(2) ** (k + 1) <= a:
        k += 1
    return k


def scale_of(real, fmt, recipe, amax):
    _, _, _, _, emax, _ = FORMATS[fmt]
    if recipe == "mxfp8":
        if amax == 0:
            return 1.0
        x = max(-127, min(127, floor_log2(Fraction(amax)) - emax))
        return float(Fraction(2) ** x)
    s = real.round(Fraction(amax) / VALUES[fmt][-1])
    return s if s != 0 else 1.0


def tiles_of(recipe, rows, cols, tile):
    """[(r0, r1, c0, c1)] in row-major tile order."""
    if recipe in ("tensorwise", "delayed"):
        return [(0, rows, 0, cols)]
    tr, tc = tile
    out = []
    for r0 in range(0, rows, tr):
        for c0 in range(0, cols, tc):
            out.append((r0, min(rows, r0 + tr), c0, min(cols, c0 + tc)))
    return out


def reference(real, fmt, recipe, tile, history, shape, x):
    """(codes, scales, dequantized) for one tensor, x flat row-major."""
    cols = shape[-1] if shape else 1
    rows = len(x) // cols if cols else 0
    if not shape:
        rows = 1
    tiles = tiles_of(recipe, rows, cols, tile)
    codes, dequant, scales = [0] * len(x), [0.0] * len(x), []
    for (r0, r1, c0, c1) in tiles:
        amax = 0.0
        for r in range(r0, r1):
            for c in range(c0, c1):
                v = x[r * cols + c]
                if not is_special(v):
                    amax = max(amax, abs(v))
        if recipe == "delayed" and history:
            amax = max(history)
        s = scale_of(real, fmt, recipe, amax)
        scales.append(s)
        for r in range(r0, r1):
            for c in range(c0, c1):
                i = r * cols + c
                code = cast(fmt, divide(real, x[i], s))
                codes[i] = code
                v = decode(fmt, code)
                dequant[i] = v if isinstance(v, float) and math.isnan(v) else multiply(real, v, s)
    return codes, scales, dequant


# ----------------------------------------------------------------- safetensors

PACK = {"F32": ("<f", 4), "F64": ("<d", 8), "BF16": (None, 2), "F8_E4M3": ("B", 1), "F8_E5M2": ("B", 1)}


def write_st(path, tensors):
    """tensors: [(name, dtype, shape, flat values)] -> a safetensors file."""
    header, blobs, offset = {}, [], 0
    for name, dtype, shape, values in sorted(tensors, key=lambda t: -PACK[t[1]][1]):
        if dtype == "BF16":
            blob = b"".join(struct.pack("<H", struct.unpack("<I", struct.pack("<f", v))[0] >> 16) for v in values)
        else:
            blob = b"".join(struct.pack(PACK[dtype][0], v) for v in values)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read_st(path):
    """name -> (dtype, shape, raw bytes); and the metadata."""
    blob = open(path, "rb").read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = blob[8 + n:]
    return {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in header.items()}, meta


def bf16_value(v):
    """v rounded to bf16 by cutting (the values given are bf16 already)."""
    bits = struct.unpack("<I", struct.pack("<f", v))[0]
    return struct.unpack("<f", struct.pack("<I", bits & 0xFFFF0000))[0]


# ------------------------------------------------------------------- the inputs

def f32(x):
    """x rounded to float32 (the inputs are float32 values for ptdp)."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def midpoints(fmt, scale):
    """Every midpoint of neighbouring values of fmt (times scale), and the
    float32 numbers just above and below each, of both signs."""
    v = VALUES[fmt]
    out = []
    for lo, hi in zip(v, v[1:]):
        mid = float((lo + hi) / 2 * Fraction(scale))
        up = struct.unpack("<f", struct.pack("<I", struct.unpack("<I", struct.pack("<f", mid))[0] + 1))[0]
        down = struct.unpack("<f", struct.pack("<I", struct.unpack("<I", struct.pack("<f", mid))[0] - 1))[0]
        out += [mid, -mid, up, down]
    return out


def inputs(double_ties):
    """[(name, dtype, shape, values)]: F32 for ptdp, F64 for ptdp-f64."""
    rng = random.Random(8)
    dt = "F64" if double_ties else "F32"
    # ties: amax 448 (E4M3's max: s = 1 under tensorwise in E4M3) and
    # 57344 (E5M2's) so the midpoints are the scaled values' midpoints
    ties = [448.0] + midpoints("e4m3", 1)
    ties5 = [57344.0] + midpoints("e5m2", 1)
    # subnormals: their grid and midpoints at scale 1, beside the max
    sub = [448.0] + [float(Fraction(k, 2) * Fraction(2) ** -9) for k in range(0, 17)] + \
          [-float(Fraction(k, 2) * Fraction(2) ** -9) for k in range(1, 17)] + [2.0 ** -11, 2.0 ** -10 * 1.0000001]
    sub5 = [57344.0] + [float(Fraction(k, 2) * Fraction(2) ** -16) for k in range(0, 9)] + [2.0 ** -17, 2.0 ** -18]
    # ties behind a scale that is no power of two: x = m * s rounded, for
    # every midpoint m, with amax 3 (s = 3/448 or 3/57344, rounded): x / s
    # then lands on m or beside it, where x * (1/s) may land elsewhere
    real = F64 if double_ties else F32
    scaled = {}
    for fmt in FORMATS:
        s = real.round(Fraction(3) / VALUES[fmt][-1])
        mids = [(lo + hi) / 2 for lo, hi in zip(VALUES[fmt], VALUES[fmt][1:])]
        scaled[fmt] = [3.0] + [real.round(m * Fraction(s)) for m in mids if m * Fraction(s) < 3]
    specials = [math.nan, -math.nan, math.inf, -math.inf, -0.0, 0.0, 1.5, -3.25, 2.0 ** -149, 1e-30]
    big = [3.0e38, -1.7e38, 1.0, 2.0 ** -126]
    # a matrix whose rows 1 and 3 are zeros: blockwise's and mxfp8's zero tiles
    edge = [0.0 if r in (1, 3) else f32(rng.gauss(0, 1) * 2.0 ** rng.randint(-6, 6)) for r in range(5) for _ in range(300)]
    rand = [f32(rng.choice((-1, 1)) * rng.random() * 2.0 ** rng.randint(-20, 20)) for _ in range(7 * 45)]
    tensors = [
        ("ties", dt, [len(ties)], ties),
        ("ties5", dt, [1, len(ties5)], ties5),
        ("scaled", dt, [len(scaled["e4m3"])], scaled["e4m3"]),
        ("scaled5", dt, [len(scaled["e5m2"])], scaled["e5m2"]),
        ("sub", dt, [len(sub)], sub),
        ("sub5", dt, [len(sub5)], sub5),
        ("specials", dt, [2, 5], specials),
        ("big", dt, [2, 2], big),
        ("zeros", dt, [3, 40], [0.0] * 120),
        ("edge", dt, [5, 300], edge),
        ("random", dt, [7, 45], rand),
        ("cube", dt, [2, 3, 5], [f32(rng.uniform(-9, 9)) for _ in range(30)]),
        ("scalar", dt, [], [f32(-2.75)]),
        ("tiny", dt, [1], [2.0 ** -149]),
        ("half", "BF16", [3, 4], [bf16_value(rng.uniform(-100, 100)) for _ in range(12)]),
    ]
    if double_ties:
        # just beside E4M3's ties by far less than a float step: a float
        # would land on the tie, a double must not
        near = [448.0] + [m + e * 2.0 ** -40 * m for m in midpoints("e4m3", 1)[::4] for e in (1, -1)]
        tensors.append(("near", "F64", [len(near)], near))
    return tensors


def weights():
    """One weight larger than a 128 x 128 tile both ways: partial tiles on both edges."""
    rng = random.Random(9)
    return [("w", "F32", [131, 130], [f32(rng.gauss(0, 0.02)) for _ in range(131 * 130)])]


def as_real(dtype, raw):
    if dtype == "BF16":
        return [struct.unpack("<f", struct.pack("<I", h << 16))[0] for (h,) in struct.iter_unpack("<H", raw)]
    return [v for (v,) in struct.iter_unpack(PACK[dtype][0], raw)]


# ------------------------------------------------------------------- the cases

CASES = [
    # (recipe, flags, tile the reference uses)
    ("tensorwise", [], None),
    ("blockwise", [], (1, 128)),
    ("blockwise", ["--tile", "2x3"], (2, 3)),
    ("mxfp8", [], (1, 32)),
    ("mxfp8", ["--tile", "32x1"], (32, 1)),
    ("delayed", [], None),
    ("delayed", ["--amax-history", "1,0.5,3"], None),         # below most amaxes: saturation
    ("delayed", ["--amax-history", "60000,448"], None),      # above: small codes, subnormals
]


def nan_bits(real, negative):
    if real is F32:
        return struct.pack("<I", 0x7FC00000 | (0x80000000 if negative else 0))
    return struct.pack("<Q", 0x7FF8000000000000 | (0x8000000000000000 if negative else 0))


def compare(label, real, fmt, recipe, tile, history, src, out, meta):
    """Differences between ptdp's output and the reference, as text lines."""
    bad = []
    dtype_real = "F32" if real is F32 else "F64"
    if meta.get("fp8.recipe") != recipe or meta.get("fp8.format") != fmt:
        bad.append(f"{label}: metadata {meta}")
    for name, (dtype, shape, raw) in src.items():
        x = as_real(dtype, raw)
        codes, scales, dequant = reference(real, fmt, recipe, tile, history, shape, x)
        got_dt, got_shape, got_codes = out.get(name, (None, None, b""))
        if got_dt != FORMATS[fmt][5] or got_shape != shape:
            bad.append(f"{label}: {name}: dtype {got_dt} shape {got_shape}")
            continue
        for i, c in enumerate(codes):
            if got_codes[i] != c:
                bad.append(f"{label}: {name}[{i}] = {x[i]!r}: code 0x{got_codes[i]:02x}, reference 0x{c:02x}")
        s_dt, s_shape, s_raw = out[name + ".scale"]
        want = b"".join(real.bits(s) for s in scales)
        if s_dt != dtype_real or s_raw != want:
            bad.append(f"{label}: {name}.scale {s_dt} {s_shape}: {as_real(s_dt, s_raw)[:6]}, reference {scales[:6]}")
        d_dt, _, d_raw = out[name + ".dequant"]
        size = 4 if real is F32 else 8
        for i, v in enumerate(dequant):
            w = nan_bits(real, math.copysign(1.0, v) < 0) if math.isnan(v) else real.bits(v)
            if d_raw[i * size:(i + 1) * size] != w:
                bad.append(f"{label}: {name}.dequant[{i}] (x = {x[i]!r}): {as_real(d_dt, d_raw[i * size:(i + 1) * size])}, "
                           f"reference {v!r}")
    return bad


def run_case(ptdp, real, fmt, case, path, tmp):
    recipe, flags, tile = case
    out_path = os.path.join(tmp, "out.st")
    cmd = [ptdp, "fp8", "quantize", path, out_path, "--recipe", recipe, "--format", fmt] + flags
    res = subprocess.run(cmd, capture_output=True, text=True)
    label = f"{os.path.basename(ptdp)} {fmt} {recipe} {' '.join(flags)}".strip()
    if res.returncode != 0:
        return [f"{label}: exit {res.returncode}: {res.stderr.strip()}"], label
    history = [float(h) for h in flags[1].split(",")] if "--amax-history" in flags else []
    if real is F32:
        history = [f32(h) for h in history]
    src, _ = read_st(path)
    out, meta = read_st(out_path)
    return compare(label, real, fmt, recipe, tile, history, src, out, meta), label


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    binaries = [(sys.argv[1], F32, False)] + ([(sys.argv[2], F64, True)] if len(sys.argv) > 2 else [])
    failures = checked = 0
    with tempfile.TemporaryDirectory() as tmp:
        for ptdp, real, double in binaries:
            path, wpath = os.path.join(tmp, "in.st"), os.path.join(tmp, "w.st")
            write_st(path, inputs(double))
            write_st(wpath, weights())
            runs = [(fmt, case, path) for fmt in FORMATS for case in CASES]
            runs += [(fmt, ("blockwise", ["--tile", "128x128"], (128, 128)), wpath) for fmt in FORMATS]
            for fmt, case, p in runs:
                bad, label = run_case(ptdp, real, fmt, case, p, tmp)
                checked += 1
                if bad:
                    failures += 1
                    print(f"FAIL  {label}: {len(bad)} differences")
                    for line in bad[:8]:
                        print("      " + line)
                else:
                    print(f"ok    {label}")
    print(f"fp8_reference: {checked - failures} of {checked} runs agree bit for bit")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
