#!/usr/bin/env bash
# Packs a CUDA build made on this machine for a GPU machine that has the CUDA driver and
# toolkit but none of lpx's Debian build dependencies (and no package registry): the
# executables, the CUDA module and ctest's files of the build tree (no objects), the
# shared libraries they need beyond the C/C++ runtimes and CUDA's own, h5dump (the
# train-step check compares loss arrays with it), and the fortune corpus the GPT presets
# train on. On the GPU machine, `tools/gpu-check.sh` with GPU_CHECK_BUNDLE=<dir> uses it
# instead of configuring and building there (docs/kernels.md, "Checking on a device").
#   usage: tools/gpu-bundle.sh [BUILD_DIR=build-gpu] [DEST=gpu-bundle]   (writes DEST/ and DEST.tar.xz)
# The build must be configured from this checkout's absolute path: ctest's files name it,
# and gpu-check.sh links that path to the checkout on the GPU machine.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build-gpu}"
dest="${2:-gpu-bundle}"
[ -f "$build/kernels/liblpx_cuda.so" ] || { echo "gpu-bundle: $build/kernels/liblpx_cuda.so not built" >&2; exit 1; }
rm -rf "$dest"
mkdir -p "$dest/lib" "$dest/bin" "$dest/data"
# The build tree minus what only the build needs.
tar -C "$build" --exclude='*.o' --exclude='*.a' --exclude='CMakeFiles' --exclude='.ninja_*' \
  --exclude='build.ninja' --exclude='*.h5' -cf - . | (mkdir -p "$dest/build" && tar -C "$dest/build" -xf -)
is_elf() { [ "$(od -An -N4 -tx1 "$1" | tr -d ' \n')" = 7f454c46 ]; }
# Symbols only help a debugger, and the bundle must travel: strip the executables (the
# module keeps its one export either way).
while IFS= read -r f; do is_elf "$f" && strip "$f"; done < <(find "$dest/build" -type f -perm -u+x ! -name '*.so*')
cp "$(command -v h5dump)" "$dest/bin/"
cp -r /usr/share/games/fortunes "$dest/data/"
# Shared libraries: everything ldd resolves except glibc's, the compiler runtimes (the GPU
# machine's are newer, and an older libstdc++ on its library path would break its own
# Python) and CUDA's (the driver's libcuda and the toolkit's cuBLASLt must be the machine's).
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|libpthread\.|librt\.|libstdc\+\+|libgcc_s|libcuda\.|libcublas)'
mapfile -t elves < <(find "$dest/build" "$dest/bin" -type f -perm -u+x -o -type f -name '*.so*' | sort -u)
for f in "${elves[@]}"; do
  is_elf "$f" || continue
  ldd "$f" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  [[ "$name" =~ $skip ]] && continue
  cp -L "$path" "$dest/lib/$name"
done
# One compressed file as well, for a machine that takes files by size (a third of it).
tar -cf - "$dest" | xz -T0 -6 >"$dest.tar.xz"
du -sh "$dest" "$dest.tar.xz"
