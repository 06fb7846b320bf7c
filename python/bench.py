#!/usr/bin/env python3
"""Speed of the Python binding against `lpx bench` (docs/python.md#speed).

Runs `lpx bench --json` for the same paths first, then times the same calls through
lpx on an array of the same size, in this one run, and prints each Python time over the
CLI's (1.00 = no overhead). Best of --reps after one warm-up, like `lpx bench`; both at
OpenMP's default thread count.

    PYTHONPATH=build/python /usr/bin/python3 python/bench.py --lpx build/tools/lpx

Paths (the CLI's names):
  cast e4m3fn rne ieee        lpx.cast(x, "e4m3fn", out=codes)   (and without out=)
  fake-quant mxfp8_e4m3 rne   lpx.fake_quantize(x, "mxfp8_e4m3", out=y)
  fake-quant nvfp4 rne        lpx.fake_quantize(x, "nvfp4", out=y)
lpx.quantize (codes + scales, no CLI bench path) is timed beside its fake-quant row.
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

    paths = ["cast e4m3fn rne ieee", "fake-quant mxfp8_e4m3 rne", "fake-quant nvfp4 rne"]
    regex = "^(" + "|".join(p for p in paths) + ")$"
    out = subprocess.run([a.lpx, "bench", "--size", str(a.size), "--reps", str(a.reps), "--json",
                          "--filter", regex], check=True, capture_output=True, text=True).stdout
    rows = json.loads(out)
    cli = {}
    for r in rows:  # the all-threads row (the last of each path)
        cli[r["path"]] = r["seconds"]

    rng = np.random.default_rng(0)
    x = rng.standard_normal(a.size, dtype=np.float32)
    codes = np.empty(a.size, np.uint8)
    y = np.empty(a.size, np.float32)
    py = {
        "cast e4m3fn rne ieee": best(lambda: lpx.cast(x, "e4m3fn", out=codes), a.reps),
        "fake-quant mxfp8_e4m3 rne": best(lambda: lpx.fake_quantize(x, "mxfp8_e4m3", out=y), a.reps),
        "fake-quant nvfp4 rne": best(lambda: lpx.fake_quantize(x, "nvfp4", out=y), a.reps),
    }
    extra = {
        "cast e4m3fn rne ieee": ("lpx.cast without out=", best(lambda: lpx.cast(x, "e4m3fn"), a.reps)),
        "fake-quant mxfp8_e4m3 rne": ("lpx.quantize (codes+scales)", best(lambda: lpx.quantize(x, "mxfp8_e4m3"), a.reps)),
        "fake-quant nvfp4 rne": ("lpx.quantize (codes+scales)", best(lambda: lpx.quantize(x, "nvfp4"), a.reps)),
    }
    print(f"{a.size} float32 elements, best of {a.reps}; ratio = Python time / `lpx bench` time")
    print(f"{'path':<28} {'lpx bench s':>12} {'Python s':>10} {'ratio':>7}   {'also':<28} {'s':>8} {'ratio':>7}")
    for p in paths:
        what, t = extra[p]
        print(f"{p:<28} {cli[p]:>12.4f} {py[p]:>10.4f} {py[p] / cli[p]:>7.2f}   {what:<28} {t:>8.4f} {t / cli[p]:>7.2f}")
    try:
        import ml_dtypes
    except ImportError:
        print("ml_dtypes: not installed (the per-element NumPy cast x.astype(ml_dtypes.float8_e4m3fn) is not timed)")
    else:
        t = best(lambda: x.astype(ml_dtypes.float8_e4m3fn), a.reps)
        print(f"{'ml_dtypes astype e4m3fn':<28} {'':>12} {t:>10.4f} {t / cli[paths[0]]:>7.2f}")


if __name__ == "__main__":
    main()
