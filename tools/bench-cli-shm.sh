#!/usr/bin/env bash
# The command-line tools on files in /dev/shm, against cp moving the same bytes (read +
# write) in the same run: how close `lpx cast` and `lpx quantize` come to the memory
# speed of the machine once file I/O is included (issue: emulation at memory speed).
# cp and each command alternate run by run; ratio = best cp time / best command time
# for equal bytes moved (cp of a file holding half the bytes: it reads and writes them).
#   usage: tools/bench-cli-shm.sh [ELEMENTS (default 67108864)] [REPS (default 3)] [THREADS (default 1)]
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-67108864}"
REPS="${2:-3}"
THREADS="${3:-1}"
LPX="${LPX:-build/tools/lpx}"
DIR="$(mktemp -d /dev/shm/lpx-bench.XXXXXX)"
trap 'rm -rf "$DIR"' EXIT
# Gaussian float32 input (stdlib only: 2^20 values repeated).
python3 - "$DIR/x.f32" "$N" <<'PY'
import array, random, sys
random.seed(1)
n = int(sys.argv[2])
piece = array.array("f", [random.gauss(0.0, 1.0) for _ in range(min(n, 1 << 20))])
with open(sys.argv[1], "wb") as f:
    left = n
    while left > 0:
        k = min(left, len(piece))
        piece[:k].tofile(f)
        left -= k
PY
seconds() {  # wall seconds of one run of the command
  local t0 t1
  t0=$(date +%s.%N); "$@" >/dev/null; t1=$(date +%s.%N)
  python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$t0" "$t1"
}
row() {  # row NAME IN_BYTES_PER_ELEM OUT_BYTES_PER_ELEM COMMAND...
  # cp and the command alternate, run by run, so both see the same machine; the best of
  # REPS of each is compared.
  local name="$1" ib="$2" ob="$3"; shift 3
  local bytes=$(( N * (ib + ob) ))
  head -c $(( bytes / 2 )) /dev/zero >"$DIR/ref"
  local tc="" tl=""
  for _ in $(seq "$REPS"); do
    tc="$tc $(seconds cp "$DIR/ref" "$DIR/ref.copy")"
    tl="$tl $(seconds "$@")"
  done
  python3 -c "
import sys
name, b = sys.argv[1], float(sys.argv[2])
tc, tl = min(map(float, sys.argv[3].split())), min(map(float, sys.argv[4].split()))
print(f'{name:<36} {b/tl/1e9:8.2f} GB/s   cp {b/tc/1e9:6.2f} GB/s   ratio {tc/tl:5.2f}')" "$name" "$bytes" "$tc" "$tl"
}
echo "lpx on /dev/shm, $N float32 elements, $THREADS thread(s), best of $REPS alternating with cp"
row "cast --to e4m3 (codes)" 4 1 "$LPX" cast --to e4m3 --threads "$THREADS" --shape "$N" "$DIR/x.f32" "$DIR/y.u8"
row "cast --to e2m1 (codes)" 4 1 "$LPX" cast --to e2m1 --threads "$THREADS" --shape "$N" "$DIR/x.f32" "$DIR/y.u8"
row "cast --to e4m3 --round sr (codes)" 4 1 "$LPX" cast --to e4m3 --round sr --threads "$THREADS" --shape "$N" "$DIR/x.f32" "$DIR/y.u8"
row "cast --to e4m3 --emit values" 4 4 "$LPX" cast --to e4m3 --emit values --threads "$THREADS" --shape "$N" "$DIR/x.f32" "$DIR/y.f32"
row "quantize mxfp8_e4m3 (values)" 4 4 "$LPX" quantize --format mxfp8_e4m3 --threads "$THREADS" --shape "$N" "$DIR/x.f32" "$DIR/q.f32"
row "quantize mxfp4 (values)" 4 4 "$LPX" quantize --format mxfp4 --threads "$THREADS" --shape "$N" "$DIR/x.f32" "$DIR/q.f32"
row "quantize nvfp4 (values)" 4 4 "$LPX" quantize --format nvfp4 --threads "$THREADS" --shape "$N" "$DIR/x.f32" "$DIR/q.f32"
row "quantize fp8_tensor (values)" 4 4 "$LPX" quantize --format fp8_tensor --threads "$THREADS" --shape "$N" "$DIR/x.f32" "$DIR/q.f32"
row "quantize mxfp8_e4m3 --emit packed" 4 1 "$LPX" quantize --format mxfp8_e4m3 --emit packed --threads "$THREADS" --shape "$N" "$DIR/x.f32" "$DIR/q.safetensors"
