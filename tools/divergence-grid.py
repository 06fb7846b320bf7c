#!/usr/bin/env python3
"""The divergence detectors' threshold search (docs/divergence.md, sixth pass):
re-judges finished corpus sweeps under every setting of a grid of the fixed-batch
thresholds (`lpx report --corpus --thresholds`, no training) and picks one by a rule fixed
before the search:

  among the settings whose pooled MLP recall is at least 90%, whose pooled median lead is
  at least 20% of the steps to divergence, and whose GPT recall is at least 90% with at
  most 5% of healthy GPT runs flagged: the fewest healthy MLP runs flagged, then the
  highest MLP recall, then the longest MLP median lead, then the fewest changes from the
  current defaults.

Run it on tuning logs only; the chosen setting is then frozen and measured once on seeds
no search has read.

Usage: tools/divergence-grid.py --mlp DIR[,DIR...] --gpt DIR[,DIR...] [--lpx build/tools/lpx]
Prints the defaults' pooled counts, the number of settings that meet the constraints and
the best 10 in the rule's order; --json FILE writes every setting's counts."""
import concurrent.futures
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile

from one_line_args import OneLineParser  # tools/one_line_args.py: bad flags in one line

DEFAULTS = {"ramp_rise_from": 22, "ramp_rise_patience": 1, "ramp_rise_factor": 1.3,
            "fixed_batch_rise_factor": 1.75}
GRID = {"ramp_rise_from": [16, 18, 20, 22, 24, 28, 32], "ramp_rise_patience": [1, 2, 3],
        "ramp_rise_factor": [1.2, 1.3, 1.4, 1.5], "fixed_batch_rise_factor": [1.5, 1.75, 2.0]}


def report(lpx, folder, thresholds, tmp):
    path = os.path.join(tmp, "t-" + "-".join(str(v) for v in thresholds.values()) + ".json")
    with open(path, "w") as f:
        json.dump(thresholds, f)
    try:
        out = subprocess.run([lpx, "report", folder, "--format", "json", "--corpus", "--thresholds", path],
                             capture_output=True, text=True)
    except OSError as e:
        sys.exit(f"divergence-grid: cannot run {lpx}: {e.strerror}")
    if out.returncode != 0:
        sys.exit(f"divergence-grid: lpx report {folder}: {out.stderr.strip()}")
    return json.loads(out.stdout)


def pooled(lpx, folders, thresholds, tmp):
    """Counts summed over the folders; the median lead over every caught run."""
    n = {"window": 0, "caught": 0, "healthy": 0, "flagged": 0}
    leads = []
    for folder in folders:
        j = report(lpx, folder, thresholds, tmp)
        o = j["corpus"]["overall"]
        n["window"] += o["diverged_with_window"]
        n["caught"] += o["flagged_before_divergence"]
        n["healthy"] += o["healthy"]
        n["flagged"] += o["healthy_flagged"]
        instant = {x["run"] for x in j["corpus"]["instant"]}
        for r in j["runs"]:
            if r["reference"] or not r["diverged"] or r["run"] in instant:
                continue
            if r["flagged"] and r["first_flag_step"] < r["divergence_step"]:
                leads.append((r["divergence_step"] - r["first_flag_step"]) / r["divergence_step"])
    n["lead"] = statistics.median(leads) if leads else 0.0
    return n


def main():
    ap = OneLineParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mlp", required=True, help="comma-separated sweep folders of the MLP corpus")
    ap.add_argument("--gpt", required=True, help="comma-separated sweep folders of the GPT corpus")
    ap.add_argument("--lpx", default="build/tools/lpx")
    ap.add_argument("--json", help="write every setting's counts here")
    a = ap.parse_args()
    mlp, gpt = a.mlp.split(","), a.gpt.split(",")
    if not (os.path.isfile(a.lpx) and os.access(a.lpx, os.X_OK)):
        sys.exit(f"divergence-grid: {a.lpx}: not an executable (build lpx first, or pass --lpx)")
    for folder in mlp + gpt:
        if not os.path.isdir(folder):
            sys.exit(f"divergence-grid: {folder}: not a folder")
    with tempfile.TemporaryDirectory() as tmp:
        def evaluate(values):
            t = dict(zip(GRID, values))
            return t, pooled(a.lpx, mlp, t, tmp), pooled(a.lpx, gpt, t, tmp)
        with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 1) as ex:
            rows = list(ex.map(evaluate, itertools.product(*GRID.values())))
    changes = lambda t: sum(t[k] != DEFAULTS[k] for k in t)
    meets = [r for r in rows
             if r[1]["caught"] >= 0.9 * r[1]["window"] and r[1]["lead"] >= 0.2
             and r[2]["caught"] >= 0.9 * r[2]["window"] and r[2]["flagged"] <= 0.05 * r[2]["healthy"]]
    meets.sort(key=lambda r: (r[1]["flagged"], -r[1]["caught"], -r[1]["lead"], changes(r[0])))
    if a.json:
        with open(a.json, "w") as f:
            json.dump([{"thresholds": t, "mlp": m, "gpt": g} for t, m, g in rows], f, indent=1)
    for t, m, g in rows:
        if t == DEFAULTS:
            print("defaults:", json.dumps(t), "MLP", json.dumps(m), "GPT", json.dumps(g))
    print(f"{len(meets)} of {len(rows)} settings meet the constraints")
    for t, m, g in meets[:10]:
        print(json.dumps(t), "MLP", json.dumps(m), "GPT", json.dumps(g), "changes", changes(t))


if __name__ == "__main__":
    main()
