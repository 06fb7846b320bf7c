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
  chromium                      # tests/browser: headless check of lpx report's page
  python3-dev python3-numpy pybind11-dev python3-pytest   # python/: the lpx module and its tests
  python3-torch                 # python/lpx/torch.py (lpx.torch) and its tests
  slurmctld slurmd slurm-client munge hdf5-tools   # tests/slurm: a one-node Slurm cluster (tools/slurm/local-cluster.sh); h5dump compares losses
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

install_report_js() {
  # the charting library that `lpx report` inlines (package-lock.json pins it); node and
  # npm come with the machine image (Debian's npm package conflicts with its node)
  local dir
  dir="$(dirname "$0")/report"
  if [ -f "$dir/package-lock.json" ] && [ ! -f "$dir/node_modules/vega-embed/build/vega-embed.min.js" ]; then
    command -v npm >/dev/null || { echo "install-deps: npm is missing (needed for tools/report)" >&2; exit 1; }
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
  fi
}

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  install_report_js
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
install_report_js
