#!/usr/bin/env python3
"""Where a recipe's training step spends the time that fp32's does not: `perf record` of
`lpx train` with the recipe and with fp32 (the reference), alternated round by round, and
per function the recipe's samples beyond the reference's, as a share of the reference's
whole step (README "Recipe studies", step time; docs/performance.md).

    tools/step-profile.py quartet-like [--preset gpt-medium] [--steps 8] [--rounds 2] [--stats-every 1]

Both runs train the same model for the same steps on one thread, so every function the
recipe does not add (the fp32 GEMMs, the optimizer, start-up) should cancel; how far they
do not is the noise, and the table prints the largest of those moves beside the shares
(repeated runs of one recipe have moved the fp32 GEMM's samples by about 5%). Start-up
is in both runs: a recipe's larger buffers show up as the kernel zeroing their pages on
first touch (clear_page_erms), extra that does not grow with --steps. --stats-every is
`lpx train`'s: 1 (its default) profiles steps that all collect the per-operand statistics,
0 steps like most of a study's, which collects them every 50 (tools/sweeps/orderings.json).
Needs `perf`
(Debian's linux-perf) and permission to sample (kernel.perf_event_paranoid <= 2).
"""
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

from one_line_args import OneLineParser, whole_number  # tools/one_line_args.py: bad flags in one line

# "  12.34%   567  [.] symbol   -   -": perf pads the symbol to the longest one of the report
# and adds two columns that stay "-" without call graphs; [k] is kernel time (page faults).
REPORT_LINE = re.compile(r"^\s*[\d.]+%\s+(\d+)\s+\[[.k]\]\s+(.+?)(?:\s+-\s+-)?\s*$")


def parse_report(text: str) -> collections.Counter:
    """Samples per function from `perf report --sort symbol -n --stdio`."""
    counts = collections.Counter()
    for line in text.splitlines():
        m = REPORT_LINE.match(line)
        if m:
            counts[m.group(2)] += int(m.group(1))
    return counts


def fail(msg: str) -> None:
    sys.exit(f"step-profile: {msg}")


def samples(lpx: str, recipe: str, preset: str, steps: int, stats_every: int, work: str) -> collections.Counter:
    data = os.path.join(work, "perf.data")
    train = [lpx, "train", "--preset", preset, "--recipe", recipe, "--steps", str(steps), "--eval-every", "0",
             "--stats-every", str(stats_every), "--threads", "1", "--out", os.path.join(work, "run.h5")]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    rec = subprocess.run(["perf", "record", "-q", "-F", "999", "-o", data, "--"] + train, env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if rec.returncode != 0:
        last = (rec.stderr.strip().splitlines() or ["(no output)"])[-1]
        fail(f"perf record of lpx train --recipe {recipe} exited with {rec.returncode}: {last}")
    rep = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", "symbol", "-n",
                          "--stdio"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    if rep.returncode != 0:
        fail(f"perf report exited with {rep.returncode}")
    counts = parse_report(rep.stdout)
    if not counts:
        fail(f"perf recorded no samples of lpx train --recipe {recipe}")
    return counts


def main() -> None:
    ap = OneLineParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("recipe", help="catalogue name or recipe file")
    ap.add_argument("--reference", default="fp32")
    ap.add_argument("--lpx", default="build/tools/lpx")
    ap.add_argument("--preset", default="gpt-medium")
    ap.add_argument("--steps", type=whole_number(1, 10000), default=8)
    ap.add_argument("--rounds", type=whole_number(1, 100), default=2, help="alternating rounds per recipe")
    ap.add_argument("--top", type=whole_number(1, 10000), default=12, help="functions listed")
    ap.add_argument("--stats-every", type=whole_number(0, 1 << 40), default=1,
                    help="lpx train's: statistics every N steps (default 1; 0: never)")
    a = ap.parse_args()
    if shutil.which("perf") is None:
        fail("perf is not installed (Debian: apt-get install linux-perf)")
    if not os.access(a.lpx, os.X_OK):
        fail(f"{a.lpx} is not an executable (build lpx first, or pass --lpx)")

    ref, rec = collections.Counter(), collections.Counter()
    ref_rounds = []
    with tempfile.TemporaryDirectory(prefix="lpx-step-profile-") as work:
        for _ in range(a.rounds):
            r = samples(a.lpx, a.reference, a.preset, a.steps, a.stats_every, work)
            ref_rounds.append(r)
            ref += r
            rec += samples(a.lpx, a.recipe, a.preset, a.steps, a.stats_every, work)
    ref_total, rec_total = sum(ref.values()), sum(rec.values())
    per_round = ref_total / a.rounds
    # The noise: the largest move of one function's samples between the reference's rounds.
    noise = max((max(r[f] for r in ref_rounds) - min(r[f] for r in ref_rounds) for f in ref), default=0)

    stats = {0: "no statistics", 1: "statistics every step"}.get(a.stats_every, f"statistics every {a.stats_every} steps")
    print(f"{a.recipe} against {a.reference}, {a.preset}, {a.steps} steps x {a.rounds} rounds, one thread, {stats}: "
          f"{rec_total} samples against {ref_total} ({rec_total / ref_total:.2f}x)")
    if a.rounds > 1:
        print(f"noise: one function of {a.reference} moved by up to {100 * noise / per_round:.1f}% of its run "
              f"between rounds")
    print()
    print(f"| function | {a.recipe} samples | {a.reference} samples | extra, % of the {a.reference} run |")
    print("| --- | --- | --- | --- |")
    extra = sorted(set(ref) | set(rec), key=lambda f: (ref[f] - rec[f], f))  # ties by name: the same order every run
    for f in extra[:a.top]:
        print(f"| `{f}` | {rec[f]} | {ref[f]} | {100 * (rec[f] - ref[f]) / ref_total:.1f}% |")


if __name__ == "__main__":
    main()
