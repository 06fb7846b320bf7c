#!/usr/bin/env python3
"""Writes the hand-made seed corpus for the .npy and .safetensors fuzzers.

Bytes are built from the format descriptions with the standard library only (no numpy),
so seeds do not depend on the writers under test. Run from anywhere; files land in
corpus/npy and corpus/safetensors next to this script. Regression seeds (inputs that once
crashed a fuzzer) are committed by hand beside these and are named regress-*.
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def npy(major, header, data, pad=True):
    prefix = 10 if major == 1 else 12
    if pad:
        total = (prefix + len(header) + 1 + 63) // 64 * 64
        header = header + " " * (total - prefix - len(header) - 1) + "\n"
    hb = header.encode("utf-8")
    length = struct.pack("<H", len(hb)) if major == 1 else struct.pack("<I", len(hb))
    return b"\x93NUMPY" + bytes([major, 0]) + length + hb + data


def st(header, data, pad=True):
    hb = header if isinstance(header, bytes) else json.dumps(header, separators=(",", ":")).encode()
    if pad:
        hb += b" " * (-len(hb) % 8)
    return struct.pack("<Q", len(hb)) + hb + data


def d(descr, shape, fortran=False):
    return "{'descr': %r, 'fortran_order': %s, 'shape': %s, }" % (
        descr, "True" if fortran else "False", repr(tuple(shape)))


f4 = struct.pack("<6f", 1.0, -2.5, 3.25, 0.0, -0.0, 1e-30)
h2 = struct.pack("<3H", 0x3C00, 0x0001, 0xFBFF)

NPY = {
    "v1-f4-2x3": npy(1, d("<f4", (2, 3)), f4),
    "v2-f2-3": npy(2, d("<f2", (3,)), h2),
    "v3-bf16-V2": npy(3, d("|V2", (3,)), h2),
    "v1-bf16-lV2": npy(1, d("<V2", (1, 3)), h2),
    "v1-u1": npy(1, d("|u1", (4,)), b"\x00\x01\x7f\xff"),
    "v1-u2-scalar": npy(1, d("<u2", ()), b"\x01\x02"),
    "v1-empty": npy(1, d("<f4", (0,)), b""),
    "v1-unpadded-dq": npy(1, '{"descr":"<f4","fortran_order":False,"shape":(6L,)}', f4, pad=False),
    "bad-fortran": npy(1, d("<f4", (2, 3), fortran=True), f4),
    "bad-f8": npy(1, d("<f8", (3,)), f4),
    "bad-structured": npy(1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (6,), }", f4),
    "bad-truncated": npy(1, d("<f4", (2, 3)), f4[:10]),
    "bad-trailing": npy(1, d("<f4", (2, 3)), f4 + b"xx"),
    "bad-negative": npy(1, d("<f4", (-1, 6)), f4),
    "bad-overflow": npy(1, d("<f4", (4294967296, 4294967296)), f4),
    "bad-hlen": b"\x93NUMPY\x01\x00\xff\xff{'descr'",
    "bad-magic": b"\x93NUMPX\x01\x00\x10\x00{}",
}

def st_valid():
    data = struct.pack("<2H", 0x3F80, 0x4000) + struct.pack("<3f", 0.5, -1.0, 8.0) + b"\x7e\x01\x38\x05"
    hdr = {
        "__metadata__": {"format": "pt"},
        "a": {"dtype": "F32", "shape": [3], "data_offsets": [4, 16]},
        "b": {"dtype": "BF16", "shape": [1, 2], "data_offsets": [0, 4]},
        "e4": {"dtype": "F8_E4M3", "shape": [3], "data_offsets": [16, 19]},
        "u": {"dtype": "U8", "shape": [], "data_offsets": [19, 20]},
        "z": {"dtype": "F16", "shape": [0], "data_offsets": [20, 20]},
    }
    return st(hdr, data)

ST = {
    "valid-mixed": st_valid(),
    "valid-empty": st({}, b""),
    "valid-f16-e5m2-u16": st({"h": {"dtype": "F16", "shape": [2], "data_offsets": [0, 4]},
                               "e": {"dtype": "F8_E5M2", "shape": [2], "data_offsets": [4, 6]},
                               "w": {"dtype": "U16", "shape": [1], "data_offsets": [6, 8]}},
                              b"\x00\x3c\x00\xbc\x7b\x7c\x01\x02"),
    "bad-overlap": st({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                       "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, b"\0" * 8),
    "bad-hole": st({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 8),
    "bad-json": st(b'{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]', b"\0" * 4, pad=False),
    "bad-dup": st(b'{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}', b"\0\0"),
    "bad-dtype": st({"a": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]}}, b"\0" * 8),
    "bad-size": st({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8),
    "bad-hlen": struct.pack("<Q", 1 << 40) + b"{}",
    "bad-neg": st(b'{"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}}', b"\0"),
}

for sub, seeds in (("npy", NPY), ("safetensors", ST)):
    os.makedirs(os.path.join(HERE, "corpus", sub), exist_ok=True)
    for name, blob in seeds.items():
        with open(os.path.join(HERE, "corpus", sub, name), "wb") as f:
            f.write(blob)
