#!/usr/bin/env bash
# The GPU check, on a machine with a CUDA device (built for an H200: sm_90a only, so the
# build is fast). Builds lpx with CUDA, runs the kernels tests, `lpx validate
# --require-gpu` (>= 1e9 elements, bit for bit against the CPU emulator), the GPU
# benchmarks (1 GiB inputs; bandwidth as a fraction of device-to-device copy; FP8 vs BF16
# GEMM TFLOP/s) and tools/bench_torch_cast.py (torch's own FP8 cast, skipped without
# torch). Every log goes to ${OUT:-gpu-logs}/. Exits non-zero if a step fails; later
# steps still run. Budget: under 8 minutes on an H200.
#   usage: OUT=gpu-logs tools/gpu-check.sh [extra cmake args]
set -uo pipefail
cd "$(dirname "$0")/.."
LOGS="${OUT:-gpu-logs}"
BUILD="${BUILD_DIR:-build-gpu}"
mkdir -p "$LOGS"
status=0
step() {  # step NAME TIMEOUT_S COMMAND...
  local name="$1" limit="$2"; shift 2
  local t0=$SECONDS
  echo "== $name" | tee -a "$LOGS/summary.txt"
  if timeout "$limit" "$@" >"$LOGS/$name.log" 2>&1; then
    echo "   ok ($((SECONDS - t0)) s)" | tee -a "$LOGS/summary.txt"
  else
    echo "   FAILED rc=$? ($((SECONDS - t0)) s), see $LOGS/$name.log" | tee -a "$LOGS/summary.txt"
    tail -n 20 "$LOGS/$name.log"
    status=1
  fi
}
: >"$LOGS/summary.txt"
nvidia-smi >"$LOGS/nvidia-smi.txt" 2>&1 || true
step configure 120 cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_ARCHITECTURES=90a-real "$@"
step build 300 cmake --build "$BUILD" -j "$(nproc)" --target lpx lpx_kernels \
  kernels_test_device_codec kernels_test_cast_kernels kernels_test_hadamard \
  kernels_test_quantize_kernels kernels_test_validate_cli
step kernels-tests 120 ctest --test-dir "$BUILD" -R '^kernels_' --output-on-failure
step validate 240 "$BUILD/tools/lpx" validate --require-gpu
step bench 120 "$BUILD/tools/lpx" validate --require-gpu --elements 1000000 --bench --bench-bytes 1073741824
step bench-torch 90 python3 tools/bench_torch_cast.py --bytes 1073741824
cat "$LOGS/summary.txt"
exit $status
