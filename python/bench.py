#!/usr/bin/env python3
"""Speed of the Python binding against `lpx bench`, and of lpx.cast against NumPy's and
PyTorch's own casts (docs/python.md#speed).

Runs `lpx bench --json` for the same paths first, then times the same calls through
lpx on the same input values (lpx bench's deterministic array), in this one run, and
prints each Python time over the CLI's (1.00 = no overhead). Best of --reps after one warm-up, like `lpx bench`; both at
OpenMP's default thread count.

    PYTHONPATH=build/python /usr/bin/python3 python/bench.py --lpx build/tools/lpx

Paths (the CLI's names):
  cast e4m3fn rne ieee        lpx.cast(x, "e4m3fn", out=codes)   (and without out=)
  fake-quant mxfp8_e4m3 rne   lpx.fake_quantize(x, "mxfp8_e4m3", out=y)
  fake-quant nvfp4 rne        lpx.fake_quantize(x, "nvfp4", out=y)
  quantize mxfp8_e4m3 rne     lpx.quantize(x, "mxfp8_e4m3")  (codes + scales, allocated per
  quantize nvfp4 rne          lpx.quantize(x, "nvfp4")        call on both sides)

Peers, timed in the same run on the same array (ratio = lpx time / peer time, both
allocating their result): NumPy's per-element x.astype(np.float16) against
lpx.cast(x, "float16"), and, when torch imports, t.to(torch.bfloat16) against
lpx.cast(x, "bfloat16"); lpx at its default thread count and at threads=1 (NumPy's
astype is single-threaded; torch uses its own intra-op threads). ml_dtypes' float8
casts are timed too when it is installed (it is not a Debian 12 package).
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

# python/ (this script's folder) holds the package's sources without the built extension:
# import the built one from PYTHONPATH instead.
_here = os.path.dirname(os.path.abspath(__file__))
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != _here]
import lpx  # noqa: E402


# labels of the printed rows (f-string expressions cannot hold quotes of their own kind)
CAST_ALLOC = 'lpx.cast(x, "e4m3fn") (allocates)'
CAST_F16, CAST_BF16, CAST_E4M3 = 'lpx.cast(x, "float16")', 'lpx.cast(x, "bfloat16")', 'lpx.cast(x, "e4m3fn")'


def bench_input(n):
    """lpx bench's input (tools/bench/cast_paths.hpp, Buffers): a hash of each index, the
    sum of four 16-bit uniforms, (s - 2) * 64. Exact in float32, so the same values; the
    speed of some paths depends on the data, so both sides time the same array."""
    x = np.empty(n, np.float32)
    step = 1 << 22
    with np.errstate(over="ignore"):
        for lo in range(0, n, step):
            z = np.arange(lo, min(n, lo + step), dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
            z = (z ^ (z >> np.uint64(31))) * np.uint64(0xBF58476D1CE4E5B9)
            z ^= z >> np.uint64(29)
            s = np.zeros(len(z), np.float32)
            for k in range(4):
                s += ((z >> np.uint64(16 * k)) & np.uint64(0xFFFF)).astype(np.float32) / np.float32(65536)
            x[lo:lo + len(z)] = (s - np.float32(2)) * np.float32(64)
    return x


def best(fn, reps):
    fn()
    t = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        t = min(t, time.perf_counter() - t0)
    return t


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lpx", default="build/tools/lpx", help="the lpx binary")
    ap.add_argument("--size", type=int, default=64 << 20, help="elements (default 64Mi)")
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()

    paths = ["cast e4m3fn rne ieee", "fake-quant mxfp8_e4m3 rne", "fake-quant nvfp4 rne",
             "quantize mxfp8_e4m3 rne", "quantize nvfp4 rne"]
    regex = "^(" + "|".join(p for p in paths) + ")$"
    out = subprocess.run([a.lpx, "bench", "--size", str(a.size), "--reps", str(a.reps), "--json",
                          "--filter", regex], check=True, capture_output=True, text=True).stdout
    rows = json.loads(out)
    cli = {}
    for r in rows:  # the all-threads row (the last of each path)
        cli[r["path"]] = r["seconds"]
    missing = [p for p in paths if p not in cli]
    if missing:
        sys.exit(f"bench.py: {a.lpx} has no bench path {missing[0]!r} (rebuild lpx)")

    x = bench_input(a.size)
    codes = np.empty(a.size, np.uint8)
    y = np.empty(a.size, np.float32)
    py = {
        "cast e4m3fn rne ieee": best(lambda: lpx.cast(x, "e4m3fn", out=codes), a.reps),
        "fake-quant mxfp8_e4m3 rne": best(lambda: lpx.fake_quantize(x, "mxfp8_e4m3", out=y), a.reps),
        "fake-quant nvfp4 rne": best(lambda: lpx.fake_quantize(x, "nvfp4", out=y), a.reps),
        "quantize mxfp8_e4m3 rne": best(lambda: lpx.quantize(x, "mxfp8_e4m3"), a.reps),
        "quantize nvfp4 rne": best(lambda: lpx.quantize(x, "nvfp4"), a.reps),
    }
    calls = {
        "cast e4m3fn rne ieee": 'lpx.cast(x, "e4m3fn", out=)',
        "fake-quant mxfp8_e4m3 rne": 'lpx.fake_quantize(x, "mxfp8_e4m3", out=)',
        "fake-quant nvfp4 rne": 'lpx.fake_quantize(x, "nvfp4", out=)',
        "quantize mxfp8_e4m3 rne": 'lpx.quantize(x, "mxfp8_e4m3")',
        "quantize nvfp4 rne": 'lpx.quantize(x, "nvfp4")',
    }
    print(f"{a.size} float32 elements, best of {a.reps}, {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.1f} at the start of the Python timings")
    print("ratio = Python time / `lpx bench` time for the same path")
    for p in paths:
        print(f"  {calls[p]:<44} vs `lpx bench` {p!r:<28} {py[p] / cli[p]:6.2f}")
    t = best(lambda: lpx.cast(x, "e4m3fn"), a.reps)
    print(f"  {CAST_ALLOC:<44} vs `lpx bench` {paths[0]!r:<28} "
          f"{t / cli[paths[0]]:6.2f}")

    print("ratio = lpx time / peer time (same array, both allocate the result)")
    lpx16 = best(lambda: lpx.cast(x, "float16"), a.reps)
    lpx16_1 = best(lambda: lpx.cast(x, "float16", threads=1), a.reps)
    np16 = best(lambda: x.astype(np.float16), a.reps)
    assert np.array_equal(lpx.cast(x[:4096], "float16"), x[:4096].astype(np.float16).view(np.uint16))
    print(f"  {CAST_F16:<44} vs x.astype(np.float16)      {lpx16 / np16:6.2f}"
          f"   (threads=1: {lpx16_1 / np16:.2f})")
    try:
        import torch
    except ImportError:
        print("  torch: not importable (t.to(torch.bfloat16) is not timed)")
    else:
        tx = torch.from_numpy(x)
        tbf = best(lambda: tx.to(torch.bfloat16), a.reps)
        lbf = best(lambda: lpx.cast(x, "bfloat16"), a.reps)
        lbf_1 = best(lambda: lpx.cast(x, "bfloat16", threads=1), a.reps)
        assert np.array_equal(lpx.cast(x[:4096], "bfloat16").view(np.int16),
                              tx[:4096].to(torch.bfloat16).view(torch.int16).numpy())
        print(f"  {CAST_BF16:<44} vs t.to(torch.bfloat16)     {lbf / tbf:6.2f}"
              f"   (threads=1: {lbf_1 / tbf:.2f}; torch {torch.__version__}, "
              f"{torch.get_num_threads()} threads)")
    try:
        import ml_dtypes
    except ImportError:
        print("  ml_dtypes: not installed (x.astype(ml_dtypes.float8_e4m3fn) is not timed)")
    else:
        t8 = best(lambda: x.astype(ml_dtypes.float8_e4m3fn), a.reps)
        l8 = best(lambda: lpx.cast(x, "e4m3fn"), a.reps)
        print(f"  {CAST_E4M3:<44} vs x.astype(ml_dtypes.float8_e4m3fn) {l8 / t8:6.2f}")


if __name__ == "__main__":
    main()
