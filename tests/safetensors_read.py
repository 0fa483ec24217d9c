#!/usr/bin/env python3
"""safetensors_read.py — read a ptdp checkpoint with numpy alone, as a cross-check.

    /usr/bin/python3 tests/safetensors_read.py ckpt.st [KEY=VALUE ...]

An independent ~30-line reader of the format (8-byte little-endian header
length, JSON header, raw little-endian data) that applies the rules the
reference safetensors library applies: header padded to 8 bytes, data_offsets
sorted, contiguous from 0 to the end of the file, each exactly
numel * itemsize bytes.  It prints every tensor (name, dtype, shape, sum,
first values) and the metadata, checks each KEY=VALUE given against the
metadata, and, if the `safetensors` package is importable it
also loads the file with safetensors.numpy.load_file and checks that both
readers agree bit for bit.  Exit status 0 when the file is valid, 1 when not.
Not part of the default test suites (numpy is optional).
"""
import json
import struct
import sys

try:
    import numpy as np
except ImportError:
    sys.exit("numpy not found (Debian: apt-get install python3-numpy; run with /usr/bin/python3)")

# BF16 as its raw 16 bits (numpy has no bfloat16): float32 of bits << 16 is its value.
DTYPES = {"F32": "<f4", "F64": "<f8", "I32": "<i4", "I64": "<i8", "U8": "u1", "BF16": "<u2"}


def read(path):
    blob = open(path, "rb").read()
    (n,) = struct.unpack("<Q", blob[:8])
    assert n % 8 == 0, f"header length {n} is not a multiple of 8"
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    data = blob[8 + n:]
    tensors, end = {}, 0
    for name, info in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"]):
        begin, stop = info["data_offsets"]
        dtype = np.dtype(DTYPES[info["dtype"]])
        count = int(np.prod(info["shape"], dtype=np.int64))
        assert begin == end, f"{name}: begins at {begin}, previous tensor ended at {end}"
        assert stop - begin == count * dtype.itemsize, f"{name}: size does not match shape"
        tensors[name] = np.frombuffer(data[begin:stop], dtype=dtype).reshape(info["shape"])
        end = stop
    assert end == len(data), f"data section is {len(data)} bytes, tensors cover {end}"
    return tensors, meta


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    tensors, meta = read(sys.argv[1])
    for name, t in tensors.items():
        flat = t.reshape(-1)[:4].tolist()
        print(f"{name:40s} {str(t.dtype):8s} {list(t.shape)!s:16s} sum={t.sum()!r} first={flat}")
    for k, v in meta.items():
        print(f"__metadata__[{k!r}] = {v!r}")
    for kv in sys.argv[2:]:
        key, value = kv.split("=", 1)
        assert meta.get(key) == value, f"metadata {key!r}: {meta.get(key)!r} != {value!r}"
    try:
        from safetensors.numpy import load_file
    except ImportError:
        print("safetensors package not installed: numpy reader only")
        return
    ref = load_file(sys.argv[1])
    assert set(ref) == set(tensors), "the two readers see different tensor names"
    for name, t in tensors.items():
        assert ref[name].dtype == t.dtype and ref[name].shape == t.shape, name
        assert ref[name].tobytes() == t.tobytes(), name
    print(f"safetensors.numpy.load_file agrees on all {len(ref)} tensors")


if __name__ == "__main__":
    try:
        main()
    except (AssertionError, KeyError, ValueError, struct.error) as e:
        sys.exit(f"{sys.argv[1]}: invalid: {e!r}")
