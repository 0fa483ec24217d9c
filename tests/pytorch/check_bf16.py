#!/usr/bin/env python3
"""check_bf16.py — ptdp's bfloat16 rounding against PyTorch's, bit for bit.

    check_bf16.py BF16_VALUES      (the helper built from tests/pytorch/bf16_values.c)

The helper writes float and double inputs with ptdp's bf16 of each into a
safetensors file (through ptdp's BF16 writer); this script reads it and
compares with torch.tensor(x, dtype=torch.float32).to(torch.bfloat16):

  floats   every non-NaN input: the same 16 bits.  NaN inputs: both NaN.
           (ptdp, like c10::BFloat16's round_to_nearest_even, gives
           0x7FC0; PyTorch's vectorised CPU conversion gives 0xFFFF —
           both quiet NaNs, so only NaN-ness is compared.)
  doubles  PyTorch converts float64 → float32 → bfloat16 and rounds twice;
           ptdp rounds once (src/core/bf16.c).  They must agree except
           where float32(d) lands exactly on a bf16 tie while d does not
           (the documented corner), and there ptdp must be the correctly
           rounded neighbour.  At least one such corner must occur, or
           the check would not be looking at the difference.

Exit status 0 agreement, 1 a mismatch, 2 the helper failed.
Needs numpy and torch (tests/pytorch/run.sh finds a Python that has them).
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.dont_write_bytecode = True    # leave no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from safetensors_read import read as read_safetensors  # noqa: E402  (tests/safetensors_read.py)


def torch_bf16_bits(values, dtype):
    t = torch.from_numpy(values.astype(dtype)).to(torch.bfloat16)
    return t.view(torch.int16).numpy().view(np.uint16)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "bf16.st")
        if subprocess.run([sys.argv[1], path]).returncode != 0:
            print("bf16_values failed")
            return 2
        tensors, _ = read_safetensors(path)

    x, ptdp_x = tensors["x"], tensors["x_bf16"]
    torch_x = torch_bf16_bits(x, np.float32)
    nan = np.isnan(x)
    ptdp_nan = (ptdp_x & 0x7FFF) > 0x7F80
    torch_nan = (torch_x & 0x7FFF) > 0x7F80
    bad = np.flatnonzero(np.where(nan, ~(ptdp_nan & torch_nan), ptdp_x != torch_x))
    for i in bad[:10]:
        print(f"float {x[i]!r} (0x{x[i:i + 1].view(np.uint32)[0]:08x}): "
              f"ptdp 0x{ptdp_x[i]:04x}, torch 0x{torch_x[i]:04x}")
    print(f"floats: {len(x) - len(bad)} of {len(x)} agree with torch "
          f"({int(nan.sum())} NaNs compared as NaN)")

    d, ptdp_d = tensors["d"], tensors["d_bf16"]
    torch_d = torch_bf16_bits(d, np.float64)
    f = d.astype(np.float32)
    corner = (f.astype(np.float64) != d) & ((f.view(np.uint32) & 0xFFFF) == 0x8000)
    differ = ptdp_d != torch_d
    wrong_place = np.flatnonzero(differ & ~corner)
    # In a corner the correct result is float32(d)'s tie resolved towards d:
    # away from zero if |d| > |tie|, towards zero otherwise.
    tie_bits = f.view(np.uint32) >> 16
    want = np.where(np.abs(d) > np.abs(f.astype(np.float64)), tie_bits + 1, tie_bits).astype(np.uint16)
    wrong_value = np.flatnonzero(corner & (ptdp_d != want))
    for i in list(wrong_place[:5]) + list(wrong_value[:5]):
        print(f"double {d[i]!r}: ptdp 0x{ptdp_d[i]:04x}, torch 0x{torch_d[i]:04x}, "
              f"corner {bool(corner[i])}")
    print(f"doubles: {len(d)} checked, {int(corner.sum())} in the double-rounding corner, "
          f"{int(differ.sum())} differ from torch (all in the corner: {len(wrong_place) == 0})")
    ok = len(bad) == 0 and len(wrong_place) == 0 and len(wrong_value) == 0 and corner.sum() > 0
    print("agreement" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
