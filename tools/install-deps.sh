#!/usr/bin/env bash
# Installs lpx's build and test dependencies from Debian's packages. Idempotent: only
# missing packages are installed, and apt-get runs only when something is missing.
# The CUDA toolkit is not a Debian package here: it is used from /usr/local/cuda when
# present, and the CPU build never needs it.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libfmt-dev libcli11-dev catch2 nlohmann-json3-dev
  libhwy-dev libeigen3-dev libhdf5-dev libbenchmark-dev
  zlib1g-dev dataset-fashion-mnist fortunes   # sim/: IDX reading, training data
  clang-14 libclang-rt-14-dev   # libFuzzer targets (tests/fuzz)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
