#!/usr/bin/env bash
# The GPU check, in one call on a machine with a CUDA device (an H200 by default: the
# build is for sm_90a only, so it is fast; pass -DCMAKE_CUDA_ARCHITECTURES=... for
# another device, e.g. 100a-real on a B200 to exercise the Blackwell cvt forms and the
# block-scaled GEMMs).
#
# Steps, each logged to $OUT/<step>.log (OUT defaults to gpu-logs/), with a summary in
# $OUT/summary.txt:
#   configure, build    lpx, the CUDA module liblpx_cuda.so (kernels/src/*.cu, which lpx
#                       dlopen()s on first GPU use: docs/kernels.md) and every kernels test
#   module              what the loader sees: the module's exports and libraries, that lpx
#                       itself links no CUDA library, `lpx --version` start-up time and RSS
#   kernels-tests       ctest -R '^kernels_': argument checks and the device tests (and
#                       the same tests against the CPU mock module)
#   sim-gpu             sim_test_gpu_train: lpx train --device gpu gives the CPU's loss
#                       arrays bit for bit
#   validate            lpx validate --require-gpu: >= 1e9 elements bit for bit against the
#                       CPU emulator (casts, quantize / dequantize / fake_quantize, Hadamard,
#                       hardware cvt where present) and the quantized-operand GEMMs
#                       against dequantize-then-double (error bound)
#   bench               lpx bench --gpu: bandwidth vs the d2d copy (1 GiB inputs), FP8 / BF16
#                       / quantized-operand GEMM TFLOP/s (each row names the GEMM path)
#   bench-torch         tools/bench_torch_cast.py: torch's own FP8 cast, the peer (skipped
#                       without torch)
#   train-step          the default GPT, 30 steps of lpx train on the CPU and on the GPU in
#                       both GEMM orders: wall time of each, and whether the exact order's
#                       loss arrays agree bit for bit (cmp of the h5dump of /metrics/loss)
#   train-speed         gpt-medium with mxfp8, the step time on the CPU and on the GPU
#   sanitize            compute-sanitizer memcheck over the kernels tests that launch kernels
#   profile             (GPU_CHECK_PROFILE=1) SASS sizes and Nsight Compute sections of the
#                       cast, decode and tiled quantize kernels
# GPU_CHECK_SKIP="step step ..." leaves steps out (a rerun that needs only some).
# The whole run is held to GPU_CHECK_BUDGET_S seconds (default 540, under the 10-minute
# limit of one device call): each step gets at most its own cap and what is left of the
# budget; a step that would start with under 15 s left is skipped and counted as failed.
# Exits non-zero if any step fails; later steps still run (validate and bench need the build).
#   usage: OUT=gpu-logs tools/gpu-check.sh [extra cmake args]
# A machine without lpx's build dependencies runs a build packed elsewhere instead:
# GPU_CHECK_BUNDLE=<dir made by tools/gpu-bundle.sh> skips configure and build, links the
# paths ctest's files name to the bundle and this checkout, and puts the bundle's libraries
# and tools first on the search paths. VALIDATE_ELEMENTS (default 1e9) sizes validate.
set -uo pipefail
cd "$(dirname "$0")/.."
LOGS="${OUT:-gpu-logs}"
BUILD="${BUILD_DIR:-build-gpu}"
BUDGET="${GPU_CHECK_BUDGET_S:-540}"
BUNDLE="${GPU_CHECK_BUNDLE:-}"
mkdir -p "$LOGS"
if [ -n "$BUNDLE" ]; then
  if [ ! -f "$BUNDLE/build/CMakeCache.txt" ]; then
    echo "gpu-check: GPU_CHECK_BUNDLE=$BUNDLE is not a bundle from tools/gpu-bundle.sh (no build/CMakeCache.txt)" >&2
    exit 2
  fi
  BUNDLE="$(cd "$BUNDLE" && pwd)"
  src_path="$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$BUNDLE/build/CMakeCache.txt")"
  build_path="$(sed -n 's/^CMAKE_CACHEFILE_DIR:INTERNAL=//p' "$BUNDLE/build/CMakeCache.txt")"
  if [ "$src_path" != "$PWD" ] && [ ! -e "$src_path" ]; then mkdir -p "$(dirname "$src_path")"; ln -s "$PWD" "$src_path"; fi
  [ -e "$build_path" ] || ln -s "$BUNDLE/build" "$build_path"
  BUILD="$build_path"
  cuda_libs="$(dirname "$(find /usr/local/cuda/ /usr/local /opt -name 'libcublasLt.so.1*' -print -quit 2>/dev/null)")"
  export LD_LIBRARY_PATH="$BUNDLE/lib:$cuda_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PATH="$BUNDLE/bin:$PATH"
  [ -d /usr/share/games/fortunes ] || { mkdir -p /usr/share/games && cp -r "$BUNDLE/data/fortunes" /usr/share/games/; }
  echo "bundle $BUNDLE: source $src_path, build $build_path, cuBLASLt from $cuda_libs"
fi
status=0
start=$SECONDS
step() {  # step NAME CAP_S COMMAND...
  local name="$1" cap="$2"; shift 2
  if [[ " ${GPU_CHECK_SKIP:-} " == *" $name "* ]]; then
    echo "== $name: skipped (GPU_CHECK_SKIP)" | tee -a "$LOGS/summary.txt"
    return
  fi
  local left=$((BUDGET - (SECONDS - start)))
  local limit=$((cap < left ? cap : left))
  echo "== $name (limit ${limit} s, ${left} s of the budget left)" | tee -a "$LOGS/summary.txt"
  if ((limit < 15)); then
    echo "   SKIPPED: out of budget" | tee -a "$LOGS/summary.txt"
    status=1
    return
  fi
  local t0=$SECONDS
  if timeout "$limit" "$@" >"$LOGS/$name.log" 2>&1; then
    echo "   ok ($((SECONDS - t0)) s)" | tee -a "$LOGS/summary.txt"
  else
    local rc=$?
    echo "   FAILED rc=$rc ($((SECONDS - t0)) s$([ $rc -eq 124 ] && echo ', timed out')), see $LOGS/$name.log" \
      | tee -a "$LOGS/summary.txt"
    tail -n 20 "$LOGS/$name.log"
    status=1
  fi
}
: >"$LOGS/summary.txt"
{ nvidia-smi; nvcc --version || /usr/local/cuda/bin/nvcc --version; } >"$LOGS/nvidia-smi.txt" 2>&1 || true
mapfile -t kernel_tests < <(for f in tests/kernels/test_*.cpp; do basename "$f" .cpp | sed 's/^/kernels_/'; done)
if [ -z "$BUNDLE" ]; then
  step configure 90 cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_ARCHITECTURES=90a-real "$@"
  step build 300 cmake --build "$BUILD" -j "$(nproc)" --target lpx lpx_cuda "${kernel_tests[@]}" \
    sim_test_gpu_train
fi
module_report() {
  local lpx="$BUILD/tools/lpx" module="$BUILD/kernels/liblpx_cuda.so"
  echo "module: $module"; ls -l "$module"
  echo "exports:"; nm -D --defined-only "$module"
  echo "module needs:"; readelf -d "$module" | grep -E 'NEEDED|RUNPATH'
  echo "lpx needs:"; readelf -d "$lpx" | grep NEEDED
  if readelf -d "$lpx" | grep -qiE 'cublas|cudart|libcuda'; then echo "FAIL: lpx links CUDA"; return 1; fi
  echo "lpx --version, 7 runs:"
  local TIMEFORMAT='%3R s'
  for _ in 1 2 3 4 5 6 7; do
    if [ -x /usr/bin/time ]; then /usr/bin/time -f '%e s %M KB peak' "$lpx" --version 2>&1 >/dev/null
    else { time "$lpx" --version >/dev/null; } 2>&1; fi
  done
}
export BUILD
export -f module_report
step module 30 bash -c module_report
run_tests() {  # run_tests NAME...: through ctest where it is installed, else one by one
  if command -v ctest >/dev/null; then
    ctest --test-dir "$BUILD" -R "^($(IFS='|'; echo "$*"))\$" -j 4 --output-on-failure
  else
    local t rc=0
    for t in "$@"; do echo "-- $t"; (cd "$BUILD/tests" && "./$t") || rc=1; done
    return $rc
  fi
}
export -f run_tests
step kernels-tests 90 bash -c 'run_tests "$@"' _ "${kernel_tests[@]}"
step sim-gpu 60 bash -c 'run_tests sim_test_gpu_train'
step validate 180 "$BUILD/tools/lpx" validate --require-gpu --elements "${VALIDATE_ELEMENTS:-1000000000}"
step bench 120 "$BUILD/tools/lpx" bench --gpu
step bench-torch 60 env -u LD_LIBRARY_PATH python3 tools/bench_torch_cast.py --bytes 1073741824
train_steps() {
  local lpx="$BUILD/tools/lpx" dev order t0
  for run in "cpu fast" "gpu fast" "cpu exact" "gpu exact"; do
    read -r dev order <<<"$run"
    t0=$(date +%s%N)
    "$lpx" train --model gpt --steps 30 --seed 1 --device "$dev" --gemm "$order" \
      --out "$LOGS/train-$dev-$order.h5" >"$LOGS/train-$dev-$order.txt" 2>&1 || return 1
    echo "$dev $order: $((($(date +%s%N) - t0) / 1000000)) ms for 30 steps (start-up and data loading included)"
  done
  if command -v h5dump >/dev/null; then
    h5dump -m %.17g -d /metrics/loss "$LOGS/train-cpu-exact.h5" | grep -v HDF5 >"$LOGS/loss-cpu.txt"
    h5dump -m %.17g -d /metrics/loss "$LOGS/train-gpu-exact.h5" | grep -v HDF5 >"$LOGS/loss-gpu.txt"
    if cmp -s "$LOGS/loss-cpu.txt" "$LOGS/loss-gpu.txt"; then echo "exact order: CPU and GPU losses identical"
    else echo "FAIL: exact order: CPU and GPU losses differ"; diff "$LOGS/loss-cpu.txt" "$LOGS/loss-gpu.txt" | head; return 1; fi
  fi
}
export LOGS
export -f train_steps
step train-step 90 bash -c train_steps
# Step time of a larger preset on each device: 2 and 12 steps, the difference over 10 (so
# start-up, CUDA's included, and data loading drop out).
train_speed() {
  local lpx="$BUILD/tools/lpx" dev steps t0 ms
  for dev in cpu gpu; do
    for steps in 2 12; do
      t0=$(date +%s%N)
      "$lpx" train --preset gpt-medium --recipe mxfp8 --steps "$steps" --seed 1 --device "$dev" \
        --out "$LOGS/speed-$dev-$steps.h5" >/dev/null 2>&1 || return 1
      ms[$steps]=$((($(date +%s%N) - t0) / 1000000))
    done
    echo "gpt-medium mxfp8 on $dev: 2 steps ${ms[2]} ms, 12 steps ${ms[12]} ms, $(((ms[12] - ms[2]) / 10)) ms per step"
  done
}
export -f train_speed
step train-speed 120 bash -c train_speed
# memcheck over the kernels tests that launch kernels: out-of-bounds and misaligned
# accesses that a passing test can hide.
sanitize() {
  local t rc=0
  for t in kernels_test_cast_kernels kernels_test_quantize_kernels kernels_test_hadamard kernels_test_gemm; do
    echo "-- $t"
    compute-sanitizer --tool memcheck --error-exitcode 1 --print-limit 20 "$BUILD/tests/$t" || rc=1
  done
  return $rc
}
export -f sanitize
command -v compute-sanitizer >/dev/null && step sanitize 120 bash -c sanitize
# Where the kernels' time goes, for the next round of tuning (GPU_CHECK_PROFILE=1): the
# SASS instruction count of every kernel, and Nsight Compute's speed-of-light and
# occupancy sections on the first launch of the cast, decode and tiled quantize kernels
# in lpx bench --gpu (clocks left alone).
profile() {
  local module="$BUILD/kernels/liblpx_cuda.so" k
  echo "SASS instructions per kernel:"
  cuobjdump -sass "$module" | awk '/Function : /{name=$3} /\/\*[0-9a-f][0-9a-f][0-9a-f][0-9a-f]\*\//{n[name]++}
    END{for (k in n) print n[k], k}' | sort -n | c++filt | cut -c1-220
  for k in cast_kernel decode_kernel tiled; do
    echo "-- ncu: first $k launch"
    ncu --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats \
      -k "regex:$k" -c 1 "$BUILD/tools/lpx" bench --gpu 2>&1 | grep -E '^(==|[[:space:]])'
  done
}
export -f profile
[ "${GPU_CHECK_PROFILE:-0}" = 1 ] && step profile 150 bash -c profile
echo "total $((SECONDS - start)) s of a ${BUDGET} s budget" | tee -a "$LOGS/summary.txt"
cat "$LOGS/summary.txt"
exit $status
