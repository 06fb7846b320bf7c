#!/usr/bin/env bash
# The time of one small local sweep (the fp32 reference and 4 recipes, MLP, 80 steps) with
# --jobs 1 and with --jobs 2, run back to back (1, 2, 2, 1), and their ratio (README "Sweeps that share a
# machine"). With OMP_WAIT_POLICY=active in the environment it shows the spinning that lpx
# sweep turns off. Usage: tools/bench-sweep-jobs.sh [LPX] (default build/tools/lpx).
set -euo pipefail
lpx=${1:-build/tools/lpx}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() {  # jobs -> seconds
  local t0 t1
  t0=$(date +%s.%N)
  "$lpx" sweep --recipes bf16,mxfp8,fp8-current,nvfp4 --steps 80 --out "$tmp/j$1-$RANDOM" --jobs "$1" --progress-every 0 >/dev/null
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc
}
# in the order 1 2 2 1, so a change in the machine's load during the run weighs on both
a=$(run 1); b=$(run 2); c=$(run 2); d=$(run 1)
j1=$(echo "$a + $d" | bc -l); j2=$(echo "$b + $c" | bc -l)
printf 'cores %s  jobs1 %.1fs + %.1fs  jobs2 %.1fs + %.1fs  ratio jobs2/jobs1 %.2f\n' "$(nproc)" "$a" "$d" "$b" "$c" \
  "$(echo "$j2 / $j1" | bc -l)"
