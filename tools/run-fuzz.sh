#!/usr/bin/env bash
# Fuzzes lpx's input parsers with libFuzzer + ASan + UBSan (tests/fuzz; the README says
# what each target covers and how long CI runs it):
#
#   tools/run-fuzz.sh [--tests] [SECONDS_PER_TARGET] [TARGET...]   default 20 s, the CI targets
#
# --tests first builds the tests labelled `inputs` (tests/CMakeLists.txt: how lpx takes
# files, options, JSON, run logs and sweeps) in the same sanitized build and runs them:
# the ASan + UBSan step of tools/test.sh. A finding aborts the test, which fails.
#
#   npy, safetensors   the tensor file parsers (io/)
#   recipe             recipe JSON (Recipe::from_json), and applying what it accepts
#   runlog_schema      the run-log reader on files HDF5 writes from fuzzed choices
#   cli                the lpx command line's option parsing (no command runs)
#   sweep_spec         lpx sweep's spec (parse_sweep_spec)
#   dequantize         lpx dequantize on a packed .safetensors (its metadata)
#   runlog             the run-log reader on fuzzed file bytes. Not fuzzed by default, only
#                      its corpus replayed: HDF5 1.10's own parser fails on such files within
#                      minutes (README); name it to fuzz it.
#
# Builds with clang in $LPX_FUZZ_BUILD (default build-fuzz/ in the checkout): the whole
# project with -DLPX_FUZZ=ON, every library instrumented for coverage and the sanitizers
# (-DLPX_SANITIZE=fuzzer-no-link,address,undefined), CUDA off, one Highway target (the
# fuzzers do not aim at the SIMD paths, and the build is much shorter; it also keeps the
# single-target build compiling). Formats' Highway sources are compiled without ASan and
# UBSan there (tests/fuzz/CMakeLists.txt says why).
# Each fuzzer starts from the committed seeds in tests/fuzz/corpus/<kind> and writes new
# inputs to a scratch corpus, so the committed seeds change only by hand. Crashing inputs
# land in $LPX_FUZZ_BUILD/artifacts/<kind>/; the script exits non-zero on any finding.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${LPX_FUZZ_BUILD:-$root/build-fuzz}
tests=0
if [ "${1:-}" = --tests ]; then
  tests=1
  shift
fi
seconds=${1:-20}
[ $# -gt 0 ] && shift
jobs=${JOBS:-2}
export CC=${CC:-clang-14} CXX=${CXX:-clang++-14}
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)

cmake -S "$root" -B "$build" "${generator[@]}" "${launcher[@]}" -DLPX_FUZZ=ON -DLPX_CUDA=OFF \
  -DLPX_BUILD_TESTS=ON -DLPX_SANITIZE=fuzzer-no-link,address,undefined \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" \
  "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1" -DCMAKE_CXX_FLAGS=-DHWY_COMPILE_ONLY_STATIC >/dev/null
fuzzed=(npy safetensors recipe runlog_schema cli sweep_spec dequantize)
replayed=(runlog)
if [ $# -gt 0 ]; then
  fuzzed=("$@")
  replayed=()
fi
all=("${fuzzed[@]}" "${replayed[@]}")
if [ $tests = 1 ]; then
  started=$SECONDS
  cmake --build "$build" -j "$jobs" --target lpx_input_tests "${all[@]/#/fuzz_}"
  echo "run-fuzz: sanitized build took $((SECONDS - started)) s"
  started=$SECONDS
  # Leaks count (LeakSanitizer is on with ASan); a UBSan report prints its stack.
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir "$build" -L inputs --output-on-failure -j "$jobs" --timeout 1500
  echo "run-fuzz: the inputs tests under ASan + UBSan took $((SECONDS - started)) s"
else
  cmake --build "$build" -j "$jobs" --target "${all[@]/#/fuzz_}"
fi

# The longest input each fuzzer makes: the tensor headers, recipes and command lines are
# small; the run-log seeds are whole HDF5 files of up to ~140 kB, the packed tensors a few kB.
declare -A max_len=([npy]=8192 [safetensors]=8192 [recipe]=16384 [runlog]=262144 [runlog_schema]=8192
                    [cli]=4096 [sweep_spec]=16384 [dequantize]=16384)
# One thread per process: the recipe target applies recipes through OpenMP code.
export OMP_NUM_THREADS=1

status=0
for kind in "${all[@]}"; do
  exe=$(find "$build" -type f -name "fuzz_$kind" -perm -u+x | head -n 1)
  scratch=$(mktemp -d)  # new inputs
  tmp=$(mktemp -d)      # the files a target writes (the run-log targets' input file)
  artifacts=$build/artifacts/$kind/
  mkdir -p "$artifacts"
  options=(-rss_limit_mb=2048 -timeout=10 -max_len="${max_len[$kind]}" -artifact_prefix="$artifacts")
  [ -f "$root/tests/fuzz/$kind.dict" ] && options+=(-dict="$root/tests/fuzz/$kind.dict")
  env=()
  if [ "$kind" = runlog ]; then
    # HDF5 mallocs what a damaged file claims and checks for NULL; its error paths leak
    # (tests/sanitizers/hdf5.supp says which and why). lpx's own allocations still throw.
    env=(ASAN_OPTIONS=allocator_may_return_null=1
         LSAN_OPTIONS=suppressions=$root/tests/sanitizers/hdf5.supp:print_suppressions=0)
    options+=(-malloc_limit_mb=1048576)
  fi
  if [[ " ${replayed[*]} " == *" $kind "* ]]; then
    echo "run-fuzz: fuzz_$kind replays its corpus"
    options+=(-runs=0)
  else
    echo "run-fuzz: fuzz_$kind for ${seconds}s"
    options+=(-max_total_time="$seconds" -print_final_stats=1 "$scratch")
  fi
  if ! env TMPDIR="$tmp" "${env[@]}" "$exe" "${options[@]}" "$root/tests/fuzz/corpus/$kind" \
      2>"$build/fuzz_$kind.log"; then
    echo "run-fuzz: fuzz_$kind FAILED; log: $build/fuzz_$kind.log; inputs in $artifacts" >&2
    tail -n 40 "$build/fuzz_$kind.log" >&2
    status=1
  else
    grep -E '^stat::number_of_executed_units|^stat::peak_rss_mb' "$build/fuzz_$kind.log" || true
  fi
  rm -rf "$scratch" "$tmp"
done
exit $status
