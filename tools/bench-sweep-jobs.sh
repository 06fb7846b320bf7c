#!/usr/bin/env bash
# The time of one small local sweep (the fp32 reference and 3 recipes, or 4 with RECIPES,
# MLP, 80 steps) with --jobs 1 and with --jobs 2, run back to back (1, 2, 2, 1), and their
# ratio (README "Sweeps that share a machine"). Equal runs bound the ratio from below by
# ceil(runs / 2) / runs: 0.5 for 4 runs, 0.6 for 5. With OMP_WAIT_POLICY=active in the
# environment it shows the spinning that lpx sweep turns off.
# Usage: tools/bench-sweep-jobs.sh [LPX [RECIPES]] (default build/tools/lpx bf16,mxfp8,nvfp4).
set -euo pipefail
lpx=${1:-build/tools/lpx}
recipes=${2:-bf16,mxfp8,nvfp4}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() {  # jobs -> seconds
  local t0 t1
  t0=$(date +%s.%N)
  "$lpx" sweep --recipes "$recipes" --steps 80 --out "$tmp/j$1-$RANDOM" --jobs "$1" --progress-every 0 >/dev/null
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc
}
# in the order 1 2 2 1, so a change in the machine's load during the run weighs on both
a=$(run 1); b=$(run 2); c=$(run 2); d=$(run 1)
j1=$(echo "$a + $d" | bc -l); j2=$(echo "$b + $c" | bc -l)
printf 'runs %s  cores %s  jobs1 %.1fs + %.1fs  jobs2 %.1fs + %.1fs  ratio jobs2/jobs1 %.2f\n' "$(( $(tr -cd , <<<"$recipes" | wc -c) + 2 ))" "$(nproc)" "$a" "$d" "$b" "$c" \
  "$(echo "$j2 / $j1" | bc -l)"
