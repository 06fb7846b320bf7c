#!/usr/bin/env python3
"""The orderings study (README "Recipe studies"): runs tools/sweeps/orderings.json with
lpx sweep when its folder is not complete, reads `lpx report --format json`, and prints
the README's two tables in Markdown: each recipe's gap to fp32 with its 95% interval, and
each published ordering marked "holds", "does not hold" or "not resolved at this scale"
by a paired 95% interval over the seeds (never by eye).

L and R are the final evaluation losses (8 fixed validation batches): the figure lpx
report's gaps read wherever every reference has one (docs/recipes.md#studies; the first
line printed says which loss it was). Every comparison of two recipes a and b uses the
paired per-seed difference of their gaps to the fp32 run of the same seed,
d_s = (L_a,s - L_b,s) / R_s, and its Student t interval:
  - "a ahead of b" holds when the interval of L_b - L_a lies above 0, does not hold when
    it lies below 0, and is not resolved otherwise;
  - "a within m of b" (equivalence) holds when the interval lies inside [-m, +m], does
    not hold when it lies entirely outside, and is not resolved otherwise;
  - "a closes most of b's gap" holds when the interval of gap_b - 2 gap_a lies above 0
    (gap_a < gap_b / 2), does not hold when it lies below 0.
Usage: tools/orderings.py [--lpx build/tools/lpx] [--out /tmp/orderings] [--jobs 2]"""
import json
import math
import os
import subprocess
import sys

from one_line_args import OneLineParser, whole_number  # tools/one_line_args.py: bad flags in one line

# Student's t, two-sided 95%, for 1..10 degrees of freedom (3 to 11 seeds); beyond: 1.96 + 2.4/df
T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228]
EQUIVALENCE = 0.0025  # DeepSeek-V3's "relative loss error below 0.25%" (section 3.3)


def t975(df):
    return T975[df - 1] if df <= len(T975) else 1.96 + 2.4 / df


def interval(xs):
    n = len(xs)
    m = sum(xs) / n
    if n < 2:
        return m, math.nan, math.nan
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (n - 1))
    h = t975(n - 1) * sd / math.sqrt(n)
    return m, m - h, m + h


def pct(m, lo, hi):
    return f"{100 * m:+.2f}% [{100 * lo:+.2f}, {100 * hi:+.2f}]"


def main():
    ap = OneLineParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lpx", default="build/tools/lpx")
    ap.add_argument("--out", default="/tmp/orderings")
    ap.add_argument("--jobs", type=whole_number(1, 1024), default=2)
    a = ap.parse_args()
    spec = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sweeps", "orderings.json")
    # a complete folder is left as it is; anything else is (re)run, resuming finished runs
    try:
        subprocess.run([a.lpx, "sweep", spec, "--out", a.out, "--jobs", str(a.jobs)], check=True,
                       stdout=sys.stderr)
        rep = json.loads(subprocess.run([a.lpx, "report", a.out, "--format", "json", "--intervals"], check=True,
                                        capture_output=True, text=True).stdout)
    except (OSError, subprocess.CalledProcessError) as e:
        # lpx has already said what went wrong on stderr (for the report: in e.stderr)
        detail = getattr(e, "stderr", None) or ""
        print(f"orderings: {detail.strip() or e}", file=sys.stderr)
        return 1
    gaps = {}  # recipe -> {seed: relative gap to the fp32 run of that seed}
    for r in rep["runs"]:
        if not r["reference"] and r["gap_to_reference"] is not None:
            gaps.setdefault(r["recipe"], {})[r["seed"]] = r["gap_to_reference"]
    # lpx report falls back to the training loss where a reference lacks its evaluation
    print(f"Gaps on the final {' and '.join(sorted({r['gap_on'] for r in rep['runs']}))}.")
    print()
    print("| recipe | seeds | gap to fp32 [95% interval] | verdict |")
    print("| --- | --- | --- | --- |")
    for c in rep["configurations"]:
        lo, hi = c["gap_ci95"]
        print(f"| {c['recipe']} | {c['seeds']} | {pct(c['mean_gap'], lo, hi)} | {c['verdict']}"
              f"{' (within seed spread)' if c['within_seed_spread'] else ''} |")

    def paired(a_, b_, f):
        seeds = sorted(set(gaps[a_]) & set(gaps[b_]))
        return interval([f(gaps[a_][s], gaps[b_][s]) for s in seeds])

    def ahead(a_, b_):  # a ahead of b: L_b - L_a > 0
        m, lo, hi = paired(a_, b_, lambda x, y: y - x)
        return (m, lo, hi), "holds" if lo > 0 else "does not hold" if hi < 0 else "not resolved at this scale"

    def within(a_, b_, margin):
        m, lo, hi = paired(a_, b_, lambda x, y: x - y)
        inside, outside = -margin <= lo and hi <= margin, lo > margin or hi < -margin
        return (m, lo, hi), "holds" if inside else "does not hold" if outside else "not resolved at this scale"

    def closes_most(a_, b_):  # gap_a < gap_b / 2
        m, lo, hi = paired(a_, b_, lambda x, y: y - 2 * x)
        return (m, lo, hi), "holds" if lo > 0 else "does not hold" if hi < 0 else "not resolved at this scale"

    rows = [
        ("MXFP8 with rceil scales matches BF16 (within 0.25%)", "mxfp8 - bf16", within("mxfp8", "bf16", EQUIVALENCE)),
        ("MXFP8 with rceil scales is ahead of the OCP floor rule", "mxfp8-floor - mxfp8", ahead("mxfp8", "mxfp8-floor")),
        ("MXFP4 with SR and RHT closes most (> half) of MXFP4-RNE's gap", "gap(mxfp4-rne) - 2 gap(mxfp4-sr-rht)",
         closes_most("mxfp4-sr-rht", "mxfp4-rne")),
        ("NVFP4 is ahead of MXFP4-RNE", "mxfp4-rne - nvfp4", ahead("nvfp4", "mxfp4-rne")),
        ("NVFP4 is ahead of MXFP4 with SR and RHT", "mxfp4-sr-rht - nvfp4", ahead("nvfp4", "mxfp4-sr-rht")),
        ("DeepSeek-V3's 1x128 / 128x128 FP8 is within 0.25% of BF16", "fp8-blockwise - bf16",
         within("fp8-blockwise", "bf16", EQUIVALENCE)),
    ]
    print()
    print("| published ordering | paired difference | difference [95% interval] | at this scale |")
    print("| --- | --- | --- | --- |")
    for claim, what, ((m, lo, hi), verdict) in rows:
        print(f"| {claim} | {what} | {pct(m, lo, hi)} | {verdict} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
