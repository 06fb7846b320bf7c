#!/usr/bin/env bash
# ctest slurm_sweep (label slurm): lpx sweep on a real one-node Slurm cluster started by
# tools/slurm/local-cluster.sh (README "Sweeps on Slurm"). It submits a small sweep with
# --submit, waits for the array and checks every run's log; it submits the same sweep into
# a second folder one task at a time, cancels that array after two runs have finished,
# resubmits it, and checks that no finished run was repeated (its log is byte-identical)
# or lost, and that every run's losses equal the uninterrupted sweep's bit for bit; then
# lpx report writes both reports. Where Slurm cannot start it prints one line and FAILS:
# CI must not pass without having run it.
# Usage: test_slurm_sweep.sh LPX SOURCE_DIR
set -euo pipefail
lpx=$1
src=$2
tmp=$(mktemp -d /tmp/lpx-slurm-test-XXXXXX)
cluster="$tmp/cluster"
mkdir "$cluster"
cleanup() {
  [ -n "${SLURM_CONF:-}" ] && scancel --quiet -u "$(id -un)" 2>/dev/null || true
  "$src/tools/slurm/local-cluster.sh" stop "$cluster" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "slurm_sweep: FAILED: $*"; exit 1; }
trap 'echo "slurm_sweep: FAILED: a command failed at line $LINENO of $0"' ERR

if ! env_line=$("$src/tools/slurm/local-cluster.sh" start "$cluster" 2>"$tmp/start.err"); then
  fail "Slurm did not start: $(head -1 "$tmp/start.err")"
fi
eval "$env_line"

# tiny runs: the fp32 reference and 2 recipes x 2 seeds, a 16-wide MLP, batch 16, 3000 steps
# (1-2 s of training each), a checkpoint every 10 steps so a cancelled run resumes midway.
# The mxfp8 recipe comes from a file whose path holds a space, a quote and $(...): the
# script must pass it to lpx train as one word and run nothing.
rdir="$tmp/recipes dir/it's \$(touch $tmp/pwned)"
mkdir -p "$rdir"
"$lpx" recipes show mxfp8 >"$rdir/mxfp8.json"
python3 - "$tmp/spec.json" "$rdir/mxfp8.json" <<'PY'
import json, sys
json.dump({"name": "slurm-test", "steps": 3000, "seeds": 2, "grid": {"recipe": ["bf16", sys.argv[2]]},
           "fixed": {"hidden": "16", "batch": 16, "checkpoint_every": 10}}, open(sys.argv[1], "w"))
PY
sweep=(sweep "$tmp/spec.json" --launcher slurm --submit)
runs=(ref-fp32-s0 ref-fp32-s1 bf16-s0 bf16-s1 mxfp8-s0 mxfp8-s1)

submit() {  # out-dir extra-args... -> job id
  local out=$1 o
  shift
  o=$(cd / && "$lpx" "${sweep[@]}" "$@" --out "$out") || fail "lpx sweep --submit failed: $o"
  sed -n 's/^Submitted batch job \([0-9][0-9]*\).*/\1/p' <<<"$o"
}
wait_job() {  # job -> returns when no task of it is left (at most 180 s)
  for _ in $(seq 900); do
    [ -z "$(squeue -h -j "$1" 2>/dev/null)" ] && return 0
    sleep 0.2
  done
  fail "job $1 still in the queue after 180 s: $(squeue -h -j "$1" | head -3 | tr '\n' ' ')"
}
losses() { h5dump -d /metrics/loss -w 0 -y "$1/run.h5" | sed -n '/DATA {/,/}/p'; }

# 1. one array, every run finished, every log complete
job=$(submit "$tmp/a")
[ -n "$job" ] || fail "no job id from sbatch"
wait_job "$job"
for r in "${runs[@]}"; do
  [ -f "$tmp/a/$r/done" ] || fail "run $r of job $job has no done marker ($(tail -2 "$tmp/a/$r/train.log" 2>/dev/null | tr '\n' ' '))"
  grep -q "^log: $tmp/a/$r/run.h5\$" "$tmp/a/$r/train.log" || fail "run $r: train.log does not end with its log line"
done
[ ! -e "$tmp/pwned" ] || fail "a recipe path with \$(...) ran a command in the Slurm script"
grep -q "with recipe mxfp8 for 3000 steps" "$tmp/a/mxfp8-s0/train.log" || fail "run mxfp8-s0 did not train the recipe file"
n=$(ls "$tmp/a"/slurm-"$job"_*.out | wc -l)
[ "$n" = ${#runs[@]} ] || fail "$n Slurm task outputs for ${#runs[@]} runs"

# 2. the same sweep one task at a time, cancelled once two runs are done and a third is
# past its second checkpoint (its train.log shows step 20 or later: the runs write a
# progress line every 0.05 s), long before that run ends; then resubmitted
job=$(submit "$tmp/b" --jobs 1 --progress-every 0.05)
midway=""
for _ in $(seq 6000); do
  if [ "$(ls "$tmp"/b/*/done 2>/dev/null | wc -l)" -ge 2 ]; then
    for log in "$tmp"/b/*/train.log; do
      d=$(dirname "$log")
      [ -f "$d/done" ] && continue
      step=$(sed -n 's|^progress: step \([0-9][0-9]*\)/.*|\1|p' "$log" | tail -1)
      if [ -n "$step" ] && [ "$step" -ge 20 ]; then midway=$(basename "$d"); break 2; fi
    done
  fi
  sleep 0.05
done
[ -n "$midway" ] || fail "no third run was seen past step 20 within 300 s"
scancel "$job"
wait_job "$job"
declare -A before
for d in "$tmp"/b/*/done; do
  r=$(basename "$(dirname "$d")")
  before[$r]=$(md5sum <"$tmp/b/$r/run.h5")
done
n_before=${#before[@]}
[ "$n_before" -ge 2 ] && [ "$n_before" -lt ${#runs[@]} ] ||
  fail "the cancel was not midway: $n_before of ${#runs[@]} runs done"
job=$(submit "$tmp/b")
wait_job "$job"
for r in "${runs[@]}"; do
  [ -f "$tmp/b/$r/done" ] || fail "run $r lost after the resubmission"
  if [ -n "${before[$r]:-}" ]; then
    [ "$(md5sum <"$tmp/b/$r/run.h5")" = "${before[$r]}" ] || fail "finished run $r was run again"
  fi
  [ "$(losses "$tmp/a/$r")" = "$(losses "$tmp/b/$r")" ] || fail "run $r: losses differ from the uninterrupted sweep"
done

# 3. the reports
for s in a b; do
  (cd / && "$lpx" report "$tmp/$s" >/dev/null) || fail "lpx report $s failed"
  [ -s "$tmp/$s/report.html" ] || fail "no report.html in $s"
done
resumed=$(cat "$tmp"/b/*/train.log | grep -c "resumed at step" || true)
[ "$resumed" -ge 1 ] || fail "run $midway was cancelled midway but no run resumed from a checkpoint"
echo "slurm_sweep: ${#runs[@]} runs as one array; cancelled after $n_before runs ($resumed run(s) resumed from a checkpoint)" \
  "and resubmitted: none repeated or lost, losses identical; reports written"
