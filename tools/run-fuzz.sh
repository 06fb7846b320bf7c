#!/usr/bin/env bash
# Fuzzes the tensor file parsers (.npy, .safetensors) with libFuzzer + ASan + UBSan.
#
#   tools/run-fuzz.sh [SECONDS_PER_TARGET]     default 30
#
# Builds with clang in $LPX_FUZZ_BUILD (default build-fuzz/ in the checkout): the whole project with
# -DLPX_FUZZ=ON when tests/CMakeLists.txt includes tests/fuzz, else tests/fuzz on its own.
# Each fuzzer starts from the committed seeds in tests/fuzz/corpus/<kind> and writes new
# inputs to a scratch corpus, so the committed seeds change only by hand. Crashing inputs
# land in $LPX_FUZZ_BUILD/artifacts/<kind>/; the script exits non-zero on any finding.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${LPX_FUZZ_BUILD:-$root/build-fuzz}
seconds=${1:-30}
jobs=${JOBS:-2}
export CC=${CC:-clang-14} CXX=${CXX:-clang++-14}
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)

if grep -qs 'add_subdirectory(fuzz)' "$root/tests/CMakeLists.txt"; then
  cmake -S "$root" -B "$build" "${generator[@]}" -DLPX_FUZZ=ON -DLPX_CUDA=OFF \
    -DLPX_BUILD_TESTS=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
else
  echo "run-fuzz: tests/CMakeLists.txt does not include tests/fuzz; building tests/fuzz on its own"
  build=$build/standalone
  cmake -S "$root/tests/fuzz" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$build" -j "$jobs" --target fuzz_npy fuzz_safetensors

status=0
for kind in npy safetensors; do
  exe=$(find "$build" -type f -name "fuzz_$kind" -perm -u+x | head -n 1)
  scratch=$(mktemp -d)
  artifacts=$build/artifacts/$kind/
  mkdir -p "$artifacts"
  echo "run-fuzz: fuzz_$kind for ${seconds}s"
  if ! "$exe" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -max_len=8192 \
      -dict="$root/tests/fuzz/$kind.dict" -artifact_prefix="$artifacts" -print_final_stats=1 \
      "$scratch" "$root/tests/fuzz/corpus/$kind" 2>"$build/fuzz_$kind.log"; then
    echo "run-fuzz: fuzz_$kind FAILED; log: $build/fuzz_$kind.log; inputs in $artifacts" >&2
    tail -n 40 "$build/fuzz_$kind.log" >&2
    status=1
  else
    grep -E '^stat::number_of_executed_units|^stat::peak_rss_mb' "$build/fuzz_$kind.log" || true
  fi
  rm -rf "$scratch"
done
exit $status
