#!/usr/bin/env python3
"""Quantize a checkpoint's tensors and print the error table (docs/python.md#examples).

    PYTHONPATH=build/python /usr/bin/python3 python/examples/quantize_checkpoint.py model.safetensors
    PYTHONPATH=build/python /usr/bin/python3 python/examples/quantize_checkpoint.py   # a synthetic one

Reads every float tensor with lpx's reader (lpx.load), prints lpx.analyze's rows for each
(worst SQNR first, as `lpx analyze`), and the packed size of each tensor in NVFP4.
"""
import argparse
import os
import sys

import numpy as np

_here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != _here]  # the built lpx, not python/lpx
import lpx  # noqa: E402


def synthetic():
    """Weights and an activation with outlier channels, as LLM checkpoints have them."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((256, 1024), dtype=np.float32) * 0.02
    a = rng.standard_normal((64, 1024), dtype=np.float32)
    a[:, rng.integers(0, 1024, 8)] *= 60  # outlier channels
    return {"layers.0.mlp.weight": w, "layers.0.act": a, "embed": rng.standard_normal((512, 256)).astype(np.float32)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint", nargs="?", help=".safetensors or .npy (default: synthetic tensors)")
    ap.add_argument("--formats", default="mxfp8_e4m3,mxfp6_e2m3,mxfp4,nvfp4,fp8_block128,e2m1:b32:e8m0:rceil")
    a = ap.parse_args()
    tensors = lpx.load(a.checkpoint) if a.checkpoint else synthetic()
    rows = []
    for name, t in tensors.items():
        if t.dtype != np.float32 or t.size == 0:
            continue
        rows += lpx.analyze(t, a.formats.split(","), name=name or os.path.basename(a.checkpoint))
    rows.sort(key=lambda r: (r["note"] != "", r["sqnr_db"] if not r["note"] else 0))
    wt = max(len(r["tensor"]) for r in rows)
    wf = max(len(r["format"]) for r in rows)
    print(f"{'tensor':<{wt}}  {'format':<{wf}}  {'SQNR dB':>8}  {'max |err|':>10}  {'flushed%':>8}  {'satur.%':>8}")
    for r in rows:
        if r["note"]:
            print(f"{r['tensor']:<{wt}}  {r['format']:<{wf}}  n/a: {r['note']}")
        else:
            print(f"{r['tensor']:<{wt}}  {r['format']:<{wf}}  {r['sqnr_db']:>8.2f}  {r['max_abs_error']:>10.3e}"
                  f"  {r['flushed_pct']:>8.3f}  {r['saturated_pct']:>8.3f}")
    print()
    for name, t in tensors.items():
        if t.dtype == np.float32 and t.size:
            q = lpx.quantize(t, "nvfp4")
            p = q.packed()
            size = p["codes"].nbytes + p["scales"].nbytes + 4
            print(f"{name or 'tensor'}: {t.nbytes} bytes float32 -> {size} bytes NVFP4 "
                  f"({t.nbytes / size:.2f}x), {q!r}")


if __name__ == "__main__":
    main()
